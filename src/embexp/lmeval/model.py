"""``EmbexpLM``: an lm-evaluation-harness model backed by an embexp run directory (registered as ``embexp``).

It rebuilds the run as ``embexp.eval`` does (``eval.rebuild_run``) and answers lm-eval's three request types
through embexp's own scoring and generation path; how each is answered and how that differs from lm-eval's
``hf`` model: docs/lmeval.md.
"""

from __future__ import annotations

import json
from pathlib import Path

from lm_eval.api.model import TemplateLM
from lm_eval.api.registry import register_model
from lm_eval.utils import get_rolling_token_windows, make_disjoint_window

from embexp import EmbexpError
from embexp.run.predict import continuation_ids, generate

DEFAULT_MAX_GEN_TOKS = 256


def _flag(value) -> bool:
    return str(value).lower() in ("1", "true", "yes")


@register_model("embexp")
class EmbexpLM(TemplateLM):
    """lm-eval's model interface over a finished embexp run (``run_dir``); decoders only."""

    def __init__(self, run_dir: str, batch_size: int | str = 0, cpu: bool | str = False,
                 trust_remote_code: bool | str = False, device: str | None = None, max_length: int = 0, **unused):
        from embexp.eval import rebuild_run

        super().__init__()
        cpu = _flag(cpu) or (device is not None and str(device).startswith("cpu"))
        self.cfg, self.c, self._device = rebuild_run(Path(run_dir), 1, cpu, _flag(trust_remote_code))
        if not self.c.backbone.is_decoder:
            raise EmbexpError(f"run_dir '{run_dir}' trained an encoder ({self.cfg.model.name}): lm-eval's requests "
                              "need a language model (a decoder run)")
        self.method, self.featurizer, self.tokenizer = self.c.method, self.c.featurizer, self.c.backbone.tokenizer
        auto = str(batch_size).startswith("auto")
        self.batch_size = int(self.cfg.trainer.eval_batch_size if auto or not int(batch_size) else batch_size)
        config = self.method.backbone_model.config
        self._max_length = int(max_length) or int(getattr(config, "max_position_embeddings", 0) or 2048)
        self.method.eval()

    # ---- the tokenizer, as the run's featurizer uses it ---------------------------------------------
    @property
    def eot_token_id(self) -> int:
        return self.tokenizer.eos_token_id

    @property
    def prefix_token_id(self) -> int:
        bos = self.tokenizer.bos_token_id
        return bos if bos is not None else self.eot_token_id

    @property
    def max_length(self) -> int:
        return self._max_length

    @property
    def device(self):
        return self._device

    def tok_encode(self, string: str, add_special_tokens: bool | None = None, **kw) -> list[int]:
        return self.featurizer.encode(string, special=bool(add_special_tokens))

    def tok_decode(self, tokens, skip_special_tokens: bool = True) -> str:
        return self.tokenizer.decode(tokens, skip_special_tokens=skip_special_tokens)

    # ---- the three request types ----------------------------------------------------------------------
    def pair(self, context: str, continuation: str) -> tuple[list[int], list[int]]:
        """(context ids, continuation ids) as embexp's evaluation scores a choice; an empty context reads the
        prefix token (lm-eval's rule) and the continuation without special tokens."""
        if not context:
            return [self.prefix_token_id], self.featurizer.encode(continuation, special=False)
        return continuation_ids(self.featurizer, context, continuation)

    def loglikelihood(self, requests, disable_tqdm: bool = False) -> list[tuple[float, bool]]:
        out = self._loglikelihood_tokens([self.pair(*r.args) for r in requests], disable_tqdm)
        for r, res in zip(requests, out):
            self.cache_hook.add_partial("loglikelihood", r.args, res)
        return out

    def _loglikelihood_tokens(self, requests, disable_tqdm: bool = False, **kw) -> list[tuple[float, bool]]:
        """(summed log-probability, whether greedy decoding gives the continuation) per (context ids,
        continuation ids); lm-eval's own ((context, continuation), context ids, continuation ids) too."""
        pairs = [(r[1], r[2]) if len(r) == 3 else (r[0], r[1]) for r in requests]
        return self.method.score_continuations(pairs, self.batch_size, not disable_tqdm, greedy=True)

    def loglikelihood_rolling(self, requests, disable_tqdm: bool = False) -> list[float]:
        """The log-likelihood of each whole text: lm-eval's disjoint windows of ``max_length`` tokens (the
        first after the prefix token), scored as continuations of their windows' contexts."""
        windows, owner = [], []
        for i, r in enumerate(requests):
            tokens = self.featurizer.encode(r.args[0], special=False)
            for ctx, cont in map(make_disjoint_window, get_rolling_token_windows(
                    token_list=tokens, prefix_token=self.prefix_token_id, max_seq_len=self.max_length, context_len=1)):
                windows.append((list(ctx), list(cont)))
                owner.append(i)
        scores = self.method.score_continuations(windows, self.batch_size, not disable_tqdm) if windows else []
        out = [0.0] * len(requests)
        for i, s in zip(owner, scores):
            out[i] += s
        for r, res in zip(requests, out):
            self.cache_hook.add_partial("loglikelihood_rolling", r.args, res)
        return out

    def generate_until(self, requests, disable_tqdm: bool = False) -> list[str]:
        """Greedy continuations, grouped by their generation options, cut at the first ``until`` string."""
        groups: dict[str, list[int]] = {}
        for i, r in enumerate(requests):
            groups.setdefault(json.dumps(r.args[1], sort_keys=True, default=str), []).append(i)
        out = [""] * len(requests)
        for key, idx in groups.items():
            kw = json.loads(key)
            if _flag(kw.get("do_sample", False)) and float(kw.get("temperature", 1.0) or 0.0) > 0:
                raise EmbexpError("lm-eval asked to sample (do_sample with temperature > 0): embexp generates greedily "
                                  "(set the task's generation_kwargs to do_sample: false)")
            until = kw.get("until") or []
            until = [until] if isinstance(until, str) else list(until)
            texts = generate(self.method, self.featurizer, [requests[i].args[0] for i in idx], self.batch_size,
                             int(kw.get("max_gen_toks", DEFAULT_MAX_GEN_TOKS)), self._device, not disable_tqdm,
                             until=until)
            for i, text in zip(idx, texts):
                out[i] = text
                self.cache_hook.add_partial("generate_until", requests[i].args, text)
        return out
