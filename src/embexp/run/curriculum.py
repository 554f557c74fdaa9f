"""Curriculum training (the K-Token Merging paper's Textualized Tree recipe; a trainer feature any
method and task with subsets can use): ``trainer.curriculum=[small,xsmall,...]`` trains the stages
in order, each round one trainer run on the stage's training split, until the stage's gate passes.
The recipe, which rows the gate reads and what differs from the authors: docs/methods_ktoken.md,
"Curriculum (the tree recipe)". Each round draws its own data order (seed ``seed * 1009 + round``); the run's
final evaluation is on ``task.subset`` as usual (normally the last stage).
"""

from __future__ import annotations

import copy
import logging

from omegaconf import OmegaConf

from embexp.run import stops
from embexp.run.build import featurize
from embexp.run.loop import Trainer, TrainInputs, TrainResult
from embexp.run.predict import score_rows
from embexp.run.preflight import metric_value, stage_task

log = logging.getLogger("embexp")

SUMMED = ("steps", "micro_batches", "examples", "tokens", "input_tokens", "wall_seconds")


def fit(cfg, c, acc) -> TrainResult:
    """Train ``c.method`` through the stages of ``cfg.trainer.curriculum``; returns the summed
    TrainResult, whose history holds one ``{"stage", "round", metric, "gate", "passed"}`` entry
    per round."""
    t, sel = cfg.trainer, c.selection
    stages, metric = list(sel.curriculum), sel.curriculum_metric
    total, opt_state, k = TrainResult(), None, 0
    pad_id = c.backbone.tokenizer.pad_token_id
    for i, stage in enumerate(stages):
        task = stage_task(cfg, stage)
        train = featurize(c, task, task.examples("train"), f"train_{stage}")  # cuts counted in metrics.json's data
        evals, read = task.examples(sel.gate_rows()), task.split_name(sel.gate_rows())
        gate = t.curriculum_final_gate if i == len(stages) - 1 else t.curriculum_gate
        ts = copy.deepcopy(t)
        OmegaConf.update(ts, "resume", False)  # a stage's round never continues a checkpoint (there are none)
        if t.curriculum_batch_size:  # this stage's per-device batch (the authors' per-stage table)
            OmegaConf.update(ts, "batch_size", int(t.curriculum_batch_size[i]))
        for r in range(t.curriculum_max_rounds):
            trainer = Trainer(c.method, ts, acc, TrainInputs(train, pad_id, cfg.seed * 1009 + k))
            if opt_state is not None:
                trainer.optimizer.load_state_dict(opt_state)
            res = trainer.fit()
            stops.phase("now")  # the gate's evaluation: a stop signal stops at once (a curriculum keeps no checkpoint)
            opt_state, k = trainer.optimizer.state_dict(), k + 1
            metrics, _ = score_rows(c.method, task, evals, c.featurizer, t.eval_batch_size, acc.device, progress=False)
            c.method.train()
            value = metrics[metric] if metric in metrics else metric_value(metrics, "curriculum_metric", metric,
                                                                            metric, task)
            passed = value >= gate
            log.info("curriculum stage %s round %d: %s=%.2f (gate %.1f) %s", stage, r + 1, metric, value,
                     gate, "passed" if passed else "missed")
            for key in SUMMED:
                setattr(total, key, getattr(total, key) + getattr(res, key))
            total.final_train_loss, total.state_memory = res.final_train_loss, total.state_memory or res.state_memory
            total.history += res.history + [{"stage": stage, "round": r + 1, metric: value, "gate": gate,
                                             "passed": bool(passed), "steps": res.steps, "gate_split": read,
                                             "gate_rows": len(evals), "batch_size": ts.batch_size}]
            if passed:
                break
    total.tokens_per_second = total.tokens / max(total.wall_seconds, 1e-9)
    return total
