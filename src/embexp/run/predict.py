"""Predictions and their scores: batched greedy generation with the KV cache, log-likelihood scoring of choices,
and encoder heads. Metrics come from the task (and ``tasks/metrics.py``); this module produces the
predictions, and measures the prompt-length figures where they belong to the run
(:func:`length_figures`)."""

from __future__ import annotations

import math
from typing import Sequence

import torch
from tqdm.auto import tqdm
from transformers import StoppingCriteria, StoppingCriteriaList

from embexp import EmbexpError
from embexp.featurize import Featurizer, collate
from embexp.methods.base import Method
from embexp.methods.onepass import Greedy, WindowExceeded
from embexp.objectives.sentence import SENTENCE_KINDS, evaluate_similarity
from embexp.tasks.base import Example
from embexp.tasks.metrics import length_reduction, pl_from_accuracy


def _batches(n: int, size: int, desc: str, progress: bool):
    return tqdm(range(0, n, size), desc=desc, disable=not progress, leave=False, dynamic_ncols=True)


def eos_ids(method, tokenizer) -> list[int]:
    """Every end-of-sequence id generation stops at: the tokenizer's eos plus each id of the model's
    ``generation_config.eos_token_id`` (an int or a list: Llama-3.1-Instruct lists 128001, 128008,
    128009; Qwen-2.5-Instruct 151645, 151643; Gemma-2-it 1 and 107, its ``<end_of_turn>``)."""
    model = getattr(method, "model", method)
    config = getattr(model, "generation_config", None)
    found: list[int] = []
    for value in (tokenizer.eos_token_id, getattr(config, "eos_token_id", None)):
        if value is None:
            continue
        found += [int(v) for v in value] if isinstance(value, (list, tuple)) else [int(value)]
    return list(dict.fromkeys(found))


class _StopAt(StoppingCriteria):
    """Per-row stop once a generated token's text contains a newline (``newline``), or once the generated text
    contains one of ``strings`` (lm-eval's ``until``); the text is cut there after."""

    def __init__(self, tokenizer, strings: Sequence[str] = (), newline: bool = False):
        self.tokenizer, self.strings = tokenizer, [s for s in strings if s]
        self.ids = torch.tensor(sorted(newline_ids(tokenizer)), dtype=torch.long) if newline else None
        self.start: int | None = None  # where the new tokens begin (the prompt is absent from input_ids
        #                                when a method generates from inputs_embeds, e.g. prompt tuning)

    def __call__(self, input_ids, scores, **kw):
        if self.start is None:  # first call: exactly one new token so far
            self.start = input_ids.shape[1] - 1
        new = input_ids[:, self.start:]
        if self.ids is not None:
            return torch.isin(new, self.ids.to(new.device)).any(dim=1)
        texts = self.tokenizer.batch_decode(new, skip_special_tokens=True)
        return torch.tensor([any(s in t for s in self.strings) for t in texts], device=input_ids.device)


def cut_at(text: str, strings: Sequence[str]) -> str:
    ends = [text.find(s) for s in strings if s and s in text]
    return text[:min(ends)] if ends else text


def newline_ids(tokenizer) -> set[int]:
    cached = getattr(tokenizer, "_embexp_newline_ids", None)
    if cached is None:
        cached = {i for i in range(len(tokenizer)) if "\n" in tokenizer.decode([i])}
        try:
            tokenizer._embexp_newline_ids = cached
        except AttributeError:  # a tokenizer that refuses new attributes: recompute next time
            pass
    return cached


@torch.no_grad()
def generate(method, featurizer: Featurizer, prompts: Sequence[str], batch_size: int, max_new_tokens: int,
             device, progress: bool = True, stop_at_newline: bool = False, until: Sequence[str] = ()) -> list[str]:
    """Greedy continuations of `prompts` (left-padded batches, KV cache), special tokens dropped.

    Generation stops at every id of :func:`eos_ids` or after `max_new_tokens`; with
    `stop_at_newline` (lm-eval's ``until: ["\\n"]``) also at the first newline, and the text is cut
    before it; likewise at the first of the `until` strings (lm-eval's ``until``)."""
    tok = featurizer.tokenizer
    ids = [featurizer.prompt_ids(p) for p in prompts]
    order = sorted(range(len(ids)), key=lambda i: -len(ids[i]))  # similar lengths share a batch
    out: list[str] = [""] * len(ids)
    stop = eos_ids(method, tok)
    method.eval()
    for s in _batches(len(order), batch_size, "generate", progress):
        chunk = order[s:s + batch_size]
        batch = {k: v.to(device)
                 for k, v in collate([{"input_ids": ids[i]} for i in chunk], tok.pad_token_id, left=True).items()}
        prompt_len = batch["input_ids"].shape[1]
        criteria = ([_StopAt(tok, newline=True)] if stop_at_newline else []) + ([_StopAt(tok, until)] if until else [])
        extra = {"stopping_criteria": StoppingCriteriaList(criteria)} if criteria else {}
        gen = method.generate(**batch, max_new_tokens=max_new_tokens, do_sample=False, use_cache=True,
                              pad_token_id=tok.pad_token_id, eos_token_id=stop, **extra)
        new = gen[:, prompt_len:]
        for i, row in zip(chunk, new):
            text = tok.decode(row, skip_special_tokens=True)
            out[i] = cut_at(text.split("\n", 1)[0] if stop_at_newline else text, until)
    return out


def continuation_ids(featurizer: Featurizer, prompt: str, choice: str) -> tuple[list[int], list[int]]:
    """(context ids, continuation ids) the way lm-eval splits them: encode context+choice and cut
    at the length of the encoded context; with a chat template the choice is the reply. As lm-eval's
    ``_encode_pair``, trailing whitespace of the context moves to the continuation (a BPE tokenizer
    merges ``"Answer: " + "true"`` into ``Answer: | true``, which leaves nothing after the context).
    The context is the prompt's encoding before ``max_source_tokens`` cuts it; the featurizer
    tokenises each text once, so the prompt is shared with generation and the other choices."""
    if featurizer.chat_template:
        return featurizer.prompt_ids(prompt), featurizer.encode(choice, special=False)
    n_spaces = len(prompt) - len(prompt.rstrip())
    if n_spaces:
        prompt, choice = prompt[:-n_spaces], prompt[-n_spaces:] + choice
    return featurizer.prompt_ids(prompt), featurizer.encode(prompt + choice)[len(featurizer.encode(prompt)):]


def choice_pairs(featurizer: Featurizer, examples: Sequence[Example]) -> list[list[tuple[list[int], list[int]]]]:
    """Each example's (context ids, continuation ids) per choice (:func:`continuation_ids`); a choice that encodes
    to no tokens after its prompt is one line."""
    pairs = [[continuation_ids(featurizer, ex.prompt, c) for c in ex.choices] for ex in examples]
    for i, (ex, p) in enumerate(zip(examples, pairs)):
        if empty := [c for c, (_, cont) in zip(ex.choices, p) if not cont]:
            raise EmbexpError(f"choice {empty[0]!r} of example {i} encodes to no tokens after its prompt")
    return pairs


def choice_logliks(method, featurizer: Featurizer, examples: Sequence[Example], batch_size: int, device,
                   progress: bool = True) -> list[list[float]]:
    """Summed log-probability of each choice's continuation given the prompt, per example
    (lm-eval's multiple-choice scoring; the method scores, so prefixes and shorter prompts work)."""
    pairs = choice_pairs(featurizer, examples)
    flat = iter(method.score_continuations([pc for p in pairs for pc in p], batch_size, progress))
    return [[next(flat) for _ in p] for p in pairs]


# generation options that make generate() process the logits even when greedy (its logits processors)
PLAIN = {"num_beams": (None, 1), "repetition_penalty": (None, 1.0), "encoder_repetition_penalty": (None, 1.0),
         "no_repeat_ngram_size": (None, 0), "bad_words_ids": (None,), "suppress_tokens": (None,),
         "begin_suppress_tokens": (None,), "min_length": (None, 0), "min_new_tokens": (None, 0),
         "forced_bos_token_id": (None,), "forced_eos_token_id": (None,), "sequence_bias": (None,),
         "exponential_decay_length_penalty": (None,), "renormalize_logits": (None, False),
         "guidance_scale": (None, 1.0), "penalty_alpha": (None,), "watermarking_config": (None,)}


def one_pass_blocker(method, featurizer: Featurizer, examples: Sequence[Example], pairs: list, generating: bool) -> str:
    """Why the choices and the greedy generation of `examples` cannot come from one forward per prompt
    (``Method.score_and_generate``), "" where they can. `pairs`: each example's (context,
    continuation) ids per choice (:func:`continuation_ids`)."""
    if type(method).generate is not Method.generate:
        return f"method {method.cfg.name} generates its own way"
    config = getattr(method.backbone_model, "generation_config", None)
    if generating and (bad := [k for k, ok in PLAIN.items() if getattr(config, k, None) not in ok]):
        return f"the model's generation config sets {', '.join(bad)}"
    if any(ctx != featurizer.prompt_ids(ex.prompt) for ex, p in zip(examples, pairs) for ctx, _ in p):
        return ("a prompt's trailing whitespace moves to its choices (lm-eval's split): the prompt scored is not the "
                "one generated from")
    if not method.shares_prompt_cache and any(len(c) > 1 for p in pairs for _, c in p):
        return f"method {method.cfg.name} reads the whole input's length: a choice of several tokens keeps its own pass"
    return ""


def one_pass(method, featurizer: Featurizer, examples: Sequence[Example], batch_size: int, max_new_tokens: int,
             stop_at_newline: bool, progress: bool = True) -> tuple[list[str] | None, list[list[float]] | None]:
    """(greedy generations, or None with `max_new_tokens` 0; each choice's log-likelihood) from one
    forward per prompt, the same as :func:`generate` and :func:`choice_logliks` give; (None, None)
    where :func:`one_pass_blocker` names a reason or a batch would cross the model's sliding window."""
    pairs = choice_pairs(featurizer, examples)
    if one_pass_blocker(method, featurizer, examples, pairs, max_new_tokens > 0):
        return None, None
    tok = featurizer.tokenizer
    greedy = Greedy(max_new_tokens, tuple(eos_ids(method, tok)), tok.pad_token_id,
                    tuple(sorted(newline_ids(tok))) if stop_at_newline else ()) if max_new_tokens else None
    try:
        scores, ids = method.score_and_generate([featurizer.prompt_ids(ex.prompt) for ex in examples],
                                                [[c for _, c in p] for p in pairs], batch_size, greedy, progress)
    except WindowExceeded:
        return None, None
    if ids is None:
        return None, scores
    texts = [tok.decode(x, skip_special_tokens=True) for x in ids]
    return [t.split("\n", 1)[0] for t in texts] if stop_at_newline else texts, scores


@torch.no_grad()
def head_predictions(method, featurizer: Featurizer, examples: Sequence[Example], batch_size: int, device,
                     regression: bool, progress: bool = True) -> list:
    feats = [featurizer.encoder_features(ex) for ex in examples]
    for f in feats:
        f.pop("labels", None)
    out = []
    method.eval()
    for s in _batches(len(feats), batch_size, "predict", progress):
        batch = {k: v.to(device)
                 for k, v in collate(feats[s:s + batch_size], featurizer.tokenizer.pad_token_id).items()}
        logits = method(**batch).logits.float()
        out += logits[:, 0].tolist() if regression else logits.argmax(-1).tolist()
    return out


def parse_float(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return math.nan


def score_rows(method, task, examples: list[Example], featurizer: Featurizer, batch_size: int, device,
               progress: bool = True) -> tuple[dict, list[dict]]:
    """Predict and score `examples`; returns (metrics, one prediction record per example)."""
    records = [{"prompt": ex.prompt, "target": ex.target, "label": ex.label} if featurizer.is_decoder
               else {"text": list(ex.text), "label": ex.label} for ex in examples]
    metrics: dict = {}
    if task.kind in SENTENCE_KINDS:  # sentence embeddings: cosine similarity of the pooled texts
        return evaluate_similarity(method, task, examples, featurizer, batch_size, device, progress)
    if not featurizer.is_decoder:
        preds = head_predictions(method, featurizer, examples, batch_size, device, task.kind == "regression", progress)
        gold = [ex.label for ex in examples]
        metrics = task.score_regression(gold, preds) if task.kind == "regression" else task.score_labels(gold, preds)
        for r, p in zip(records, preds):
            r["prediction"] = p
        return metrics, records

    given = method.given_generations(examples)  # a baseline whose outputs are not generated (repeat_prompt)
    if given is not None and task.kind != "generation":
        raise EmbexpError(f"method {method.cfg.name} gives fixed texts instead of generations: it needs a generation "
                          "task "
                          f"(got task kind '{task.kind}')")
    if task.kind == "perplexity":  # the target's perplexity given the prompt as the method reads it
        metrics = perplexity(method, featurizer, examples, batch_size, progress)
        metrics.update(length_figures(method, task, featurizer, examples, metrics, batch_size, device))
        return metrics, records
    mode = task.cfg.eval_mode if task.cfg.eval_mode != "auto" else "both"
    if task.kind != "classification":
        mode = "generate"
    stop_at_newline = bool(getattr(task.cfg, "stop_at_newline", False))
    hyps = scores = None
    if mode in ("both", "loglik"):  # one forward per prompt where it can (Method.score_and_generate)
        hyps, scores = one_pass(method, featurizer, examples, batch_size, task.cfg.max_new_tokens if mode == "both"
                                else 0, stop_at_newline, progress)
    if mode in ("generate", "both"):
        if hyps is None:
            hyps = given if given is not None else generate(
                method, featurizer, [ex.prompt for ex in examples], batch_size, task.cfg.max_new_tokens, device,
                progress, stop_at_newline=stop_at_newline)
        for r, h in zip(records, hyps):
            r["generation"] = h
        if task.kind == "generation":
            metrics.update(task.score_text([ex.target for ex in examples], hyps, examples))
        elif task.kind == "regression":
            metrics.update(task.score_regression([ex.label for ex in examples], [parse_float(h) for h in hyps]))
        else:  # exact match of the generated text, no post-processing (the TinyTE protocol)
            pred = [ex.choices.index(h) if h in ex.choices else -1 for ex, h in zip(examples, hyps)]
            metrics.update({f"em_{k}": v for k, v in task.score_labels([ex.label for ex in examples], pred).items()})
            for r, p in zip(records, pred):
                r["em_pred"] = p
    if mode in ("loglik", "both"):
        if scores is None:
            scores = choice_logliks(method, featurizer, examples, batch_size, device, progress)
        pred = [max(range(len(s)), key=s.__getitem__) for s in scores]
        metrics.update({f"ll_{k}": v for k, v in task.score_labels([ex.label for ex in examples], pred).items()})
        for r, p, s in zip(records, pred, scores):
            r["ll_pred"], r["ll_scores"] = p, s
    metrics.update(length_figures(method, task, featurizer, examples, metrics, batch_size, device))
    return metrics, records


def perplexity(method, featurizer: Featurizer, examples: Sequence[Example], batch_size: int,
               progress: bool = True) -> dict[str, float]:
    """``perplexity`` = exp(total NLL / total tokens) of the targets (their tokens and the EOS after
    them, as trained) given the prompts, token-weighted over the examples (K-Token Merging's
    CommitPackFT metric); ``nll`` in nats per token; ``scored_tokens``. Scored by the method, so a
    compressed prefix counts as its context."""
    requests = [(featurizer.prompt_ids(ex.prompt), featurizer.target_ids(ex.target)) for ex in examples]
    logliks = method.score_continuations(requests, batch_size, progress)
    n = sum(len(c) for _, c in requests)
    nll = -sum(logliks) / n
    return {"perplexity": math.exp(nll), "nll": nll, "scored_tokens": float(n)}


def length_figures(method, task, featurizer: Featurizer, examples: Sequence[Example], metrics: dict, batch_size: int,
                   device) -> dict[str, float]:
    """The prompt-length figures a decoder run records (:func:`compression_metrics`), only where they belong to it
    (docs/running.md, metrics.json): ``length_reduction`` when the task's paper reports it for every method
    (``Task.reports_length_reduction``) or when the method changes the input length
    (``Method.changes_input_length``); ``pl_score`` only where the task defines it (``Task.pl_score``). Other runs
    record neither: their prompt is read as is, and a 0 would read as a measurement of something that does not
    apply."""
    if not featurizer.is_decoder or not (task.reports_length_reduction or method.changes_input_length):
        return {}
    out = compression_metrics(method, featurizer, examples, metrics, batch_size, device)
    if not task.pl_score:
        out.pop("pl_score", None)
    return out


@torch.no_grad()
def compression_metrics(method, featurizer: Featurizer, examples: Sequence[Example], metrics: dict, batch_size: int,
                        device) -> dict[str, float]:
    """``length_reduction`` (0-100, ``tasks.metrics.length_reduction``): the mean over examples of
    1 - (positions the backbone reads for the prompt, ``Method.prompt_positions``) / (the prompt's
    tokens); 0 for methods that read the prompt as is (negative when a method adds positions, e.g.
    prompt tuning). ``pl_score`` (0-1, K-Token Merging's Eq. 3) from it (a negative reduction
    counts as 0) and the accuracy (the generated answer's exact match where there is one) when
    ``metrics`` holds one. Which of them a run records: :func:`length_figures`."""
    ids = [featurizer.prompt_ids(ex.prompt) for ex in examples]
    seen: list[int] = []
    for s in range(0, len(ids), batch_size):
        batch = collate([{"input_ids": x} for x in ids[s:s + batch_size]], featurizer.tokenizer.pad_token_id, left=True)
        seen += method.prompt_positions(batch["input_ids"].to(device), batch["attention_mask"].to(device)).tolist()
    out = {"length_reduction": length_reduction([len(x) for x in ids], seen)}
    acc = next((metrics[k] for k in ("em_accuracy", "accuracy", "ll_accuracy") if k in metrics), None)
    if acc is not None:
        out["pl_score"] = pl_from_accuracy(acc, max(out["length_reduction"], 0.0))
    return out


# ---- points of the learning curve (trainer.curve_at) and the selection metric (trainer.select_metric) ----

def curve_point(cfg, c, device):
    """trainer.curve_at's callback: step -> the final evaluation's metrics, mid-run (None without curve_at)."""
    if not (cfg.trainer.curve_at and cfg.do_eval):
        return None
    return lambda step: {**curve_metrics(c.task, *c.score(cfg.trainer.eval_batch_size, device)),
                         **select_point(cfg, c, device)}


def select_score(cfg, c, device):
    """trainer.select_metric's signal, where select_best keeps the best metric rather than the lowest loss: (name,
    () -> the metric on the selection rows), scored by the final evaluation's code (``Components.score``,
    rows="select"); None otherwise. ``run.preflight.probe`` has scored the name on two rows before training."""
    sel = c.selection
    name = sel.metric(c.task)
    if name == "loss" or not (sel.best and c.select_features):
        return None
    return name, lambda: float(c.score(cfg.trainer.eval_batch_size, device, rows="select")[0][name])


def curve_metrics(task, metrics: dict, records: list[dict]) -> dict:
    """A learning-curve point: the task's numeric metrics, and for decoder classification by
    log-likelihood the balanced accuracy and each answer's share of the predictions (a run that
    answers one class shows it here)."""
    out = {k: v for k, v in metrics.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    preds = [r["ll_pred"] for r in records if "ll_pred" in r]
    if preds and task.kind == "classification":
        gold = [r["label"] for r in records]
        n = max(max(gold), max(preds)) + 1
        recalls = [sum(p == g for p, g in zip(preds, gold) if g == k) / gold.count(k)
                   for k in range(n) if gold.count(k)]
        out["ll_balanced_accuracy"] = 100.0 * sum(recalls) / len(recalls)
        out["ll_answer_share"] = [100.0 * preds.count(k) / len(preds) for k in range(n)]
    return out


def select_point(cfg, c, device) -> dict:
    """trainer.curve_select: ``{"select": metrics}`` of the held-out selection rows at this step ({} without it)."""
    if not cfg.trainer.curve_select:
        return {}
    m, recs = c.score(cfg.trainer.eval_batch_size, device, rows="select")
    return {"select": curve_metrics(c.task, m, recs)}


def curve_record(res, task, metrics: dict, records: list[dict], final_select: dict | None = None) -> list[dict]:
    """metrics.json's ``curve``: the points of trainer.curve_at, then the final evaluation."""
    points = [{"step": h["step"], **h["curve"]} for h in (res.history if res is not None else []) if "curve" in h]
    return points + [{"step": res.steps if res is not None else 0, **curve_metrics(task, metrics, records),
                      **(final_select or {})}]
