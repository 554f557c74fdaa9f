"""``python -m embexp.judge run_dir=DIR [judge.model=NAME] [judge.kind=KIND] [what=generation|reference]``:
score a finished run's predictions and merge the metrics into its metrics.json (docs/judge.md)."""

from __future__ import annotations

import json
from pathlib import Path

import torch

from embexp import EmbexpError
from embexp.judge.prompts import KINDS, check_kind
from embexp.judge.scoring import CACHE_FILE, check_model_name, run_kind, score_records


def rescore(run_dir, jcfg, what: str = "generation", cpu: bool = False) -> dict:
    """Score a finished run's predictions.jsonl and merge the metrics into its metrics.json (and the
    verdicts into predictions.jsonl), both written atomically. Returns the merged metrics."""
    from omegaconf import OmegaConf

    from embexp.core.config import JudgeConfig
    from embexp.core.records import METRICS, atomic_write, check_finished, load_config, read_predictions, write_json

    run_dir = Path(run_dir)
    check_finished(run_dir)
    cfg = load_config(run_dir)
    run_primary = run_kind(cfg)
    j = OmegaConf.merge(OmegaConf.structured(JudgeConfig), jcfg)
    if not j.model:
        j.model = cfg.judge.model
    if not j.model:
        raise EmbexpError("judge.model is empty and the run had no judge: name one (e.g. judge.model=smollm2)")
    check_model_name(j)
    kind = j.kind or run_primary
    if not kind:
        raise EmbexpError(f"no judge kind: task {cfg.task.name} has task.judge='' "
                          f"(set judge.kind to one of: {', '.join(KINDS)})")
    check_kind(kind)
    preds = run_dir / "predictions.jsonl"
    if not preds.is_file():
        raise EmbexpError(f"run_dir '{run_dir}' has no predictions.jsonl (was it run with do_eval=false?)")
    records = read_predictions(run_dir)
    questions = [r.get("question") for r in records]
    if kind in ("instruct", "harmbench") and any(q is None for q in questions):
        questions = eval_questions(cfg, records)
    rcfg = OmegaConf.create({"judge": j})
    device = torch.device("cuda" if torch.cuda.is_available() and not cpu else "cpu")
    new = score_records(rcfg, kind, records, questions, run_dir / CACHE_FILE, device, primary=kind == run_primary,
                        what=what)
    atomic_write(preds, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))
    metrics = json.loads((run_dir / METRICS).read_text())
    metrics.setdefault("metrics", {}).update(new)
    write_json(run_dir / METRICS, metrics)
    return new


def eval_questions(cfg, records: list[dict]) -> list[str]:
    """Each record's question (``Example.meta['question']``, else its prompt), from the task's
    evaluation examples rebuilt from the run's config (data only, no model)."""
    import embexp.tasks  # noqa: F401  (register task schemas)
    from embexp.tasks import build_task

    examples = build_task(cfg.task).examples("eval")
    if len(examples) != len(records) or any(ex.prompt != r.get("prompt") for ex, r in zip(examples, records)):
        raise EmbexpError(f"the task's evaluation examples ({len(examples)}) no longer match the run's "
                          f"{len(records)} predictions (changed data or config?): cannot recover the questions")
    return [ex.meta.get("question", ex.prompt) for ex in examples]


def main(cfg) -> None:
    """Re-score ``cfg.run_dir`` and print the merged metrics; ``cfg``: the validated judge config (:func:`entry`)."""
    from embexp.core import cli

    cli.quiet_libraries()
    cli.setup_logging(None, True)
    new = rescore(cfg.run_dir, cfg.judge, cfg.what, cfg.cpu)
    width = max(map(len, new))
    print(f"judged {cfg.run_dir}\n" + "\n".join(f"  {k:<{width}} {v:.4f}" if isinstance(v, float)
                                                  else f"  {k:<{width}} {v}" for k, v in new.items()))


def entry() -> None:
    """``python -m embexp.judge run_dir=DIR [key=value ...]`` (conf/judge.yaml) through ``core.cli.run_dir_command``."""
    from embexp.core import cli
    from embexp.core.config import JudgeRunConfig, register_core_schemas

    register_core_schemas()
    cli.run_dir_command("judge", JudgeRunConfig, "python -m embexp.judge run_dir=DIR [judge.model=NAME] "
                        "[judge.kind=KIND] [what=generation|reference]", main)
