"""Scoring with a judge: :class:`Judge` (cached verdicts of a kind's items), :func:`aggregate` (the
kind's metric), and the run's hooks: :func:`check` before any model loads, :func:`score_run` after
the evaluation (train.py)."""

from __future__ import annotations

import logging
import math
import time
from pathlib import Path
from typing import Sequence

import torch

from embexp import EmbexpError
from embexp.judge.backends import OpenAIBackend, TransformersBackend, VllmBackend, model_config
from embexp.judge.cache import VerdictCache, cache_key
from embexp.judge.prompts import FIELDS, KINDS, METRIC, check_kind

log = logging.getLogger("embexp")


# ---- aggregation ---------------------------------------------------------------------------------
def aggregate(kind: str, verdicts: Sequence[float]) -> dict:
    """The metric of a kind over its verdicts (NaN verdicts, unparsable answers, left out):
    ``judge_instruct`` (mean rating 1-10), ``asr`` (% attacks that succeeded) or ``entailment`` (%
    entailed), with ``<metric>_stderr`` (the standard error over the items) and ``judge_unparsed``."""
    check_kind(kind)
    scale = 1.0 if kind == "instruct" else 100.0
    ok = [float(v) * scale for v in verdicts if v == v]
    name = METRIC[kind]
    mean = sum(ok) / len(ok) if ok else math.nan
    se = math.sqrt(sum((v - mean) ** 2 for v in ok) / (len(ok) - 1) / len(ok)) if len(ok) >= 2 else math.nan
    return {name: mean, f"{name}_stderr": se, "judge_unparsed": len(verdicts) - len(ok)}


# ---- the judge -----------------------------------------------------------------------------------
class Judge:
    """Scores items of a kind; ``calls`` = items the last :meth:`score` sent to the model (cache misses)."""

    def __init__(self, jcfg, backend, cache_path=None):
        self.cfg = jcfg
        self.backend = backend
        self.name = str(jcfg.model)
        self.cache = VerdictCache(cache_path if jcfg.cache else None)
        self.calls = 0

    def prompts(self, kind: str, items: Sequence[dict]) -> list[str]:
        """The full prompt text of each item, as the judge reads it (after truncation)."""
        check_kind(kind)
        for i, it in enumerate(items):
            missing = [k for k in FIELDS[kind] if not isinstance(it.get(k), str)]
            if missing:
                raise EmbexpError(f"judge kind {kind}: item {i} lacks the text field(s) {', '.join(missing)} "
                                  f"(an item is {{{', '.join(map(repr, FIELDS[kind]))}}})")
        if hasattr(self.backend, "check_kind"):  # a backend that scores some kinds only
            self.backend.check_kind(kind)
        return [self.backend.render(kind, it) for it in items]

    def score(self, kind: str, items: Sequence[dict]) -> list[float]:
        prompts = self.prompts(kind, items)
        keys = [cache_key(self.name, self.cfg.backend, kind, p) for p in prompts]
        out: list[float | None] = [self.cache.get(k) for k in keys]
        todo = list(dict.fromkeys(k for k, v in zip(keys, out) if v is None))  # each distinct prompt once
        first = {k: keys.index(k) for k in todo}
        self.calls = 0
        size = int(self.cfg.batch_size)
        got: dict[str, float] = {}
        for s in range(0, len(todo), size):
            chunk = todo[s:s + size]
            verdicts = self.backend.verdicts(kind, [prompts[first[k]] for k in chunk])
            self.calls += len(chunk)
            rows = [{"key": k, "verdict": float(v), "kind": kind, "judge": self.name} for k, v in zip(chunk, verdicts)]
            got.update({r["key"]: r["verdict"] for r in rows})
            self.cache.add(rows)
        return [v if v is not None else got[k] for k, v in zip(keys, out)]


def build_judge(jcfg, device=None, cache_path=None) -> Judge:
    """A :class:`Judge` from the judge config node (a ``config.JudgeConfig``, its fields checked against their
    domains)."""
    from embexp.core.config import validate_fields

    if not jcfg.model:
        raise EmbexpError("judge.model is empty: name a judge "
                          "(a conf/model name such as smollm2, a hub id or a local folder)")
    validate_fields(jcfg, "judge")
    device = (torch.device(device) if device is not None
              else torch.device("cuda" if torch.cuda.is_available() else "cpu"))
    backend = {"transformers": TransformersBackend, "vllm": VllmBackend, "openai": OpenAIBackend}[jcfg.backend]
    return Judge(jcfg, backend(jcfg, device), cache_path)


# ---- runs: scoring a run's evaluation generations ------------------------------------------------
CACHE_FILE = "judge_cache.jsonl"


def run_kind(cfg) -> str:
    """The kind that scores a run's generations: judge.kind, else the task's own (task.judge)."""
    return str(cfg.judge.kind or cfg.task.judge or "")


def check(cfg, task=None) -> None:
    """Before any model loads: a configured judge needs a kind, a loadable name and a task whose
    evaluation generates text (one-line errors; judge.kind, task.judge and judge.backend are inside their
    domains, checked with the config). ``task``: the run's task (built from ``cfg.task`` when not given)."""
    j = cfg.judge
    if not j.model:
        return
    if not run_kind(cfg):
        raise EmbexpError(f"judge.model={j.model} but no judge kind: task {cfg.task.name} has task.judge='' "
                          f"(set judge.kind to one of: {', '.join(KINDS)})")
    check_model_name(j)
    from embexp.objectives.sentence import SENTENCE_KINDS
    from embexp.tasks import build_task

    task = task if task is not None else build_task(cfg.task)
    mode = cfg.task.eval_mode
    generates = (cfg.model.kind == "decoder" and task.kind not in ("perplexity", *SENTENCE_KINDS)
                 and (task.kind != "classification" or mode in ("auto", "generate", "both")))
    if not generates:
        why = ("an encoder" if cfg.model.kind != "decoder"
               else f"task kind {task.kind}" if task.kind != "classification" else "task.eval_mode=loglik")
        raise EmbexpError(f"judge.model={j.model}: task {cfg.task.name} generates no text to judge with {why} "
                          "(a judge scores the generations of a decoder; drop judge.model)")


def check_model_name(j) -> None:
    if j.backend != "openai" and model_config(j.model) is None and "/" not in j.model and not Path(j.model).is_dir():
        from embexp.core.cli import choices

        raise EmbexpError(f"judge.model '{j.model}' is not a conf/model name ({', '.join(choices('model'))}), "
                          "a local folder or a hub id (owner/name)")


def items(kind: str, records: Sequence[dict], questions: Sequence[str], what: str = "generation") -> list[dict]:
    """Judge items from prediction records (``generation``, ``target``) and each example's question."""
    out = []
    for r, q in zip(records, questions):
        text = r.get("target", "") if what == "reference" else r.get("generation")
        if text is None:
            raise EmbexpError("the run's predictions have no 'generation' to judge (a loglik-only or encoder run)")
        out.append({"instruct": {"question": q, "answer": text}, "harmbench": {"behavior": q, "generation": text},
                    "nli": {"premise": r.get("target", ""), "hypothesis": text}}[kind])
    return out


def score_records(cfg, kind: str, records: list[dict], questions: Sequence[str], cache_path, device,
                  primary: bool = True, what: str = "generation") -> dict:
    """Score `records` in place (their verdict under ``judge[...]``) and return the metrics to add."""
    t0 = time.perf_counter()
    judge = build_judge(cfg.judge, device, cache_path=cache_path)  # Judge reads judge.cache
    verdicts = judge.score(kind, items(kind, records, questions, what))
    suffix = ("" if primary else f"_{kind}") + ("_reference" if what == "reference" else "")
    for r, v in zip(records, verdicts):
        r["judge" + suffix] = v
    agg = aggregate(kind, verdicts)
    tail, name = ("_reference" if what == "reference" else ""), METRIC[kind]
    out = {name + tail: agg[name], f"{name}{tail}_stderr": agg[f"{name}_stderr"],
           f"judge_unparsed{suffix}": agg["judge_unparsed"]}
    out.update({f"judge_seconds{suffix}": time.perf_counter() - t0, f"judge_model{suffix}": str(cfg.judge.model),
                f"judge_calls{suffix}": judge.calls})
    log.info("judge %s (%s): %s = %.4g, %d items, %d judge calls, %.1f s", cfg.judge.model, kind, METRIC[kind] + tail,
             agg[METRIC[kind]], len(records), judge.calls, out[f"judge_seconds{suffix}"])
    return out


def score_run(cfg, examples, records: list[dict], run_dir, device) -> dict:
    """train.py's hook after evaluation: judge the generations when judge.model is set (else {})."""
    kind = run_kind(cfg)
    if not cfg.judge.model or not kind:
        return {}
    questions = [ex.meta.get("question", ex.prompt) for ex in examples]
    return score_records(cfg, kind, records, questions, Path(run_dir) / CACHE_FILE, device)
