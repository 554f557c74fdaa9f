"""Where verdicts come from (``judge.backend``): local weights through transformers (constrained
answers by log-likelihood), vLLM and the OpenAI API (generated answers, parsed)."""

from __future__ import annotations

import copy
import json
import logging
import math
import os
import time

import torch

from embexp import EmbexpError, models
from embexp.judge.prompts import (
    HARMBENCH_CHOICES,
    HARMBENCH_PROMPT,
    INSTRUCT_ANSWER_PREFIX,
    INSTRUCT_CHOICES,
    INSTRUCT_PROMPT,
    INSTRUCT_SYSTEM,
    NLI_ANSWER_PREFIX,
    NLI_CHOICES,
    NLI_PROMPT,
    TRUE_CHOICES,
    TRUE_PROMPT,
    VERDICTS,
    fit,
    messages,
    parse,
    token_cutter,
)
from embexp.methods.prefix import keeps_logits
from embexp.models import cache_kwarg, output_cache

log = logging.getLogger("embexp")


def resolve_dtype(name: str, device: torch.device) -> torch.dtype:
    """judge.dtype: auto is bf16 on a GPU (a judge only infers), else model.dtype's reading of the name."""
    return torch.bfloat16 if name == "auto" and device.type == "cuda" else models.resolve_dtype(name)


def model_config(name: str):
    """The ModelConfig of conf/model/<name>.yaml, or None when `name` is not a config name."""
    from omegaconf import OmegaConf

    from embexp.core.cli import conf_dir
    from embexp.core.config import ModelConfig

    if "/" in name or not (conf_dir() / "model" / f"{name}.yaml").is_file():
        return None
    node = OmegaConf.load(conf_dir() / "model" / f"{name}.yaml")
    node.pop("defaults", None)
    return OmegaConf.merge(OmegaConf.structured(ModelConfig), node)


class TransformersBackend:
    """Local weights through transformers; verdicts by the log-likelihood of the allowed answers. A hub id or
    folder's weights load at the first verdict the cache does not hold (docs/judge.md, "Backends")."""

    def __init__(self, jcfg, device):
        import transformers as tf

        self.cfg, self.device = jcfg, device
        self.dtype = dtype = resolve_dtype(jcfg.dtype, device)
        self._model, self._load = None, None
        mcfg = model_config(jcfg.model)
        if mcfg is not None and mcfg.source != "hub":
            if mcfg.kind != "decoder":
                raise EmbexpError(f"judge.model={jcfg.model} is an encoder without an NLI head: a judge is a causal LM "
                                  "(e.g. smollm2, tiny_llama), a seq2seq TRUE model or a sequence-classification "
                                  "NLI model")
            from embexp.models import load_backbone

            mcfg.dtype = str(dtype).removeprefix("torch.")
            bb = load_backbone(mcfg)
            self._model, self.tok, self.type = self._ready(bb.model), bb.tokenizer, "causal"
            config = bb.model.config
        else:
            path = mcfg.id if mcfg is not None else jcfg.model
            try:
                config = tf.AutoConfig.from_pretrained(path, trust_remote_code=False)  # a judge never runs its code
                self.tok = tf.AutoTokenizer.from_pretrained(path, trust_remote_code=False)
            except (OSError, ValueError) as e:
                raise EmbexpError(f"could not load judge '{path}': {str(e).splitlines()[0]}") from e
            archs = " ".join(getattr(config, "architectures", None) or [])
            if getattr(config, "is_encoder_decoder", False):
                self.type, cls = "seq2seq", tf.AutoModelForSeq2SeqLM
            elif "ForSequenceClassification" in archs:
                self.type, cls = "seqcls", tf.AutoModelForSequenceClassification
            else:
                self.type, cls = "causal", tf.AutoModelForCausalLM
            self._load = lambda: cls.from_pretrained(path, dtype=dtype, trust_remote_code=False)
        if self.tok.pad_token_id is None:
            self.tok.pad_token = self.tok.eos_token
        self.tok.padding_side = "left"
        self.entail = None
        if self.type == "seqcls":
            labels = {int(i): str(n) for i, n in config.id2label.items()}
            hit = [i for i, n in labels.items() if "entail" in n.lower() and "not" not in n.lower()]
            if len(hit) != 1:
                raise EmbexpError(f"judge '{jcfg.model}': a sequence-classification NLI judge needs one label whose "
                                  f"name contains 'entail' (its labels: {', '.join(labels.values())})")
            self.entail = hit[0]
        self.chat = self.type == "causal" and bool(getattr(self.tok, "chat_template", None))
        self.cut = token_cutter(self.tok)
        # never past the judge's context window (ours: the limit is the smaller of the two)
        window = getattr(config, "max_position_embeddings", None) if self.type == "causal" else None
        self.limit = min(int(jcfg.max_input_tokens), int(window)) if window else int(jcfg.max_input_tokens)

    def _ready(self, model):
        model.to(device=self.device, dtype=self.dtype).eval()
        model.requires_grad_(False)
        return model

    @property
    def loaded(self) -> bool:
        return self._model is not None

    @property
    def model(self):
        if self._model is None:
            try:
                self._model = self._ready(self._load())
            except (OSError, ValueError) as e:
                raise EmbexpError(f"could not load judge '{self.cfg.model}': {str(e).splitlines()[0]}") from e
        return self._model

    def check_kind(self, kind: str) -> None:
        """An NLI model scores kind nli only (a generating backend scores every kind: it has no check_kind)."""
        if self.type != "causal" and kind != "nli":
            raise EmbexpError(f"judge '{self.cfg.model}' is a "
                              f"{'seq2seq' if self.type == 'seq2seq' else 'sequence-classification'} "
                              f"NLI model: it scores kind nli only, not {kind}")

    # -- prompt text ----------------------------------------------------------------------------
    def _chat(self, system: str, user: str) -> str:
        msgs = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": user}]
        try:
            return self.tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
        except Exception:  # templates without a system role (Gemma): fold it into the user turn
            text = f"{system}\n\n{user}" if system else user
            return self.tok.apply_chat_template([{"role": "user", "content": text}], tokenize=False,
                                                add_generation_prompt=True)

    def text(self, kind: str, item: dict) -> str:
        """The full prompt a causal/seq2seq judge reads, up to where its answer starts."""
        if self.type == "seq2seq":
            return TRUE_PROMPT.format(**item)
        if kind == "harmbench":  # the classifier's own Llama-2 chat format, as HarmBench feeds it
            return HARMBENCH_PROMPT.format(**item)
        system, user, prefix = ((INSTRUCT_SYSTEM, INSTRUCT_PROMPT.format(**item), INSTRUCT_ANSWER_PREFIX)
                                if kind == "instruct" else ("", NLI_PROMPT.format(**item), NLI_ANSWER_PREFIX))
        if self.chat:
            return self._chat(system, user) + prefix
        return (f"{system}\n\n" if system else "") + f"{user}\n\n{prefix}"

    def n_tokens(self, kind: str, item: dict) -> int:
        if self.type == "seqcls":
            return len(self.tok(item["premise"], item["hypothesis"])["input_ids"])
        text = self.text(kind, item)
        reserve = 0 if self.type == "seq2seq" else max(len(self.tok(c, add_special_tokens=False)["input_ids"])
                                                       for c in self.choices(kind))
        return len(self.tok(text, add_special_tokens=not self.chat)["input_ids"]) + reserve

    def render(self, kind: str, item: dict) -> str:
        item = fit(item, kind, lambda it: self.n_tokens(kind, it), self.limit, self.cut)
        if self.type == "seqcls":
            return json.dumps({"premise": item["premise"], "hypothesis": item["hypothesis"]}, ensure_ascii=False)
        return self.text(kind, item)

    def choices(self, kind: str) -> tuple[str, ...]:
        if self.type == "seq2seq":
            return TRUE_CHOICES
        return {"instruct": INSTRUCT_CHOICES, "harmbench": HARMBENCH_CHOICES, "nli": NLI_CHOICES}[kind]

    # -- verdicts -------------------------------------------------------------------------------
    @torch.no_grad()
    def verdicts(self, kind: str, prompts: list[str]) -> list[float]:
        if self.type == "seqcls":
            pairs = [json.loads(p) for p in prompts]
            enc = self.tok([p["premise"] for p in pairs], [p["hypothesis"] for p in pairs], padding=True,
                           return_tensors="pt")
            logits = self.model(**{k: v.to(self.device) for k, v in enc.items()}).logits
            return [1.0 if int(i) == self.entail else 0.0 for i in logits.argmax(-1).tolist()]
        scores = (self.seq2seq_logliks(prompts, TRUE_CHOICES) if self.type == "seq2seq"
                  else self.causal_logliks(prompts, self.choices(kind)))
        values = VERDICTS[kind]
        return [values[max(range(len(s)), key=s.__getitem__)] for s in scores]

    def split(self, prompt: str, choice: str) -> tuple[list[int], list[int]]:
        """(context ids, continuation ids), lm-eval's way: encode prompt+choice, cut at the prompt's length."""
        special = not self.chat
        ctx = self.tok(prompt, add_special_tokens=special)["input_ids"]
        whole = self.tok(prompt + choice, add_special_tokens=special)["input_ids"]
        if whole[:len(ctx)] != ctx or len(whole) == len(ctx):  # the choice merged into the prompt's last token
            return ctx, self.tok(choice, add_special_tokens=False)["input_ids"]
        return ctx, whole[len(ctx):]

    def causal_logliks(self, prompts: list[str], choices: tuple[str, ...]) -> list[list[float]]:
        """Summed log-probability of each choice after each prompt: one forward of the prompts (KV
        cache), then one short forward per choice on a copy of the cache."""
        pairs = [[self.split(p, c) for c in choices] for p in prompts]
        ctx = [pairs[i][0][0] for i in range(len(prompts))]  # split gives every choice the prompt's own ids
        n = max(map(len, ctx))
        pad = self.tok.pad_token_id
        ids = torch.tensor([[pad] * (n - len(c)) + c for c in ctx], device=self.device)
        mask = torch.tensor([[0] * (n - len(c)) + [1] * len(c) for c in ctx], device=self.device)
        pos = (mask.cumsum(-1) - 1).clamp(min=0)
        keep = {"logits_to_keep": 1} if keeps_logits(self.model) else {}
        out = self.model(input_ids=ids, attention_mask=mask, position_ids=pos, use_cache=True, **keep)
        first = torch.log_softmax(out.logits[:, -1].float(), -1)
        past = output_cache(out)
        scores = [[0.0] * len(choices) for _ in prompts]
        for j in range(len(choices)):
            conts = [pairs[i][j][1] for i in range(len(prompts))]
            for i, c in enumerate(conts):
                scores[i][j] = float(first[i, c[0]])
            m = max(map(len, conts))
            if m == 1:
                continue
            inp = torch.tensor([c[:-1] + [pad] * (m - len(c)) for c in conts], device=self.device)
            cmask = torch.cat([mask, torch.ones_like(inp)], 1)
            cpos = pos[:, -1:] + 1 + torch.arange(m - 1, device=self.device)
            o = self.model(input_ids=inp, attention_mask=cmask, position_ids=cpos, use_cache=True,
                           **{cache_kwarg(self.model): copy.deepcopy(past)})
            lp = torch.log_softmax(o.logits.float(), -1)
            for i, c in enumerate(conts):
                scores[i][j] += sum(float(lp[i, k - 1, c[k]]) for k in range(1, len(c)))
        return scores

    def seq2seq_logliks(self, prompts: list[str], choices: tuple[str, ...]) -> list[list[float]]:
        enc = self.tok(prompts, padding=True, return_tensors="pt").to(self.device)
        scores = [[0.0] * len(choices) for _ in prompts]
        for j, c in enumerate(choices):
            lab = self.tok(c, add_special_tokens=False)["input_ids"]
            labels = torch.tensor([lab] * len(prompts), device=self.device)
            lp = torch.log_softmax(self.model(**enc, labels=labels).logits.float(), -1)
            for i in range(len(prompts)):
                scores[i][j] = float(sum(lp[i, k, t] for k, t in enumerate(lab)))
        return scores


# ---- generating backends: vllm, openai -----------------------------------------------------------
class VllmBackend:
    """vLLM (optional): greedy generation of up to ``judge.max_new_tokens`` tokens, then :func:`parse`."""

    def __init__(self, jcfg, device):
        try:
            import vllm
        except ImportError as e:
            raise EmbexpError("judge.backend=vllm needs the vllm package (pip install vllm), "
                              "or judge.backend=transformers") from e
        mcfg = model_config(jcfg.model)
        path = jcfg.model
        if mcfg is not None:
            if mcfg.source == "smollm2":
                from embexp.models import smollm2_path

                path = str(smollm2_path())
            elif mcfg.source == "hub":
                path = mcfg.id
            else:
                raise EmbexpError(f"judge.model={jcfg.model} (source={mcfg.source}) cannot run on vllm; "
                                  "use judge.backend=transformers")
        self.cfg = jcfg
        self.llm = vllm.LLM(model=path, dtype=jcfg.dtype)
        self.tok = self.llm.get_tokenizer()
        self.params = vllm.SamplingParams(temperature=0.0, max_tokens=jcfg.max_new_tokens)
        self.cut = token_cutter(self.tok)

    def render(self, kind: str, item: dict) -> str:
        def text(it):
            if kind == "harmbench":
                return HARMBENCH_PROMPT.format(**it)
            return self.tok.apply_chat_template(messages(kind, it), tokenize=False, add_generation_prompt=True)
        item = fit(item, kind, lambda it: len(self.tok(text(it), add_special_tokens=False)["input_ids"]),
                   self.cfg.max_input_tokens, self.cut)
        return text(item)

    def verdicts(self, kind: str, prompts: list[str]) -> list[float]:
        outs = self.llm.generate(prompts, self.params, use_tqdm=False)
        return [parse(kind, o.outputs[0].text) for o in outs]


class OpenAIBackend:
    """A remote judge through the OpenAI API (``judge.model`` = the API model, e.g. gpt-4o-2024-08-06); texts cut
    at 4 characters per token of ``judge.max_input_tokens`` (docs/judge.md)."""

    def __init__(self, jcfg, device):
        try:
            import openai
        except ImportError as e:
            raise EmbexpError("judge.backend=openai needs the openai package (pip install openai)") from e
        if not os.environ.get("OPENAI_API_KEY"):
            raise EmbexpError("judge.backend=openai needs OPENAI_API_KEY in the environment")
        self.cfg, self.client = jcfg, openai.OpenAI()

    def render(self, kind: str, item: dict) -> str:
        limit = 4 * self.cfg.max_input_tokens
        item = fit(item, kind, lambda it: sum(len(m["content"]) for m in messages(kind, it)), limit,
                   lambda t, over: t[:max(0, len(t) - over)])
        return json.dumps(messages(kind, item), ensure_ascii=False)

    def verdicts(self, kind: str, prompts: list[str]) -> list[float]:
        out = []
        for p in prompts:
            for attempt in range(3):
                try:
                    r = self.client.chat.completions.create(model=self.cfg.model, messages=json.loads(p), temperature=0,
                                                            max_tokens=self.cfg.max_new_tokens)
                    out.append(parse(kind, r.choices[0].message.content or ""))
                    break
                except Exception as e:  # rate limits, timeouts: retry, then NaN (counted as unparsed)
                    log.warning("openai judge call failed (%s), attempt %d", type(e).__name__, attempt + 1)
                    time.sleep(2 ** attempt)
            else:
                out.append(math.nan)
        return out
