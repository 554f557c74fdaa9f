"""Tiny-Attention's tables (make tinyattn_table1, tinyattn_table2, tinyattn_table8, tinyattn_table10-12).

Every cell is an experiment file conf/experiment/tinyattn_<setting>_<task>.yaml (the paper's per-task
hyperparameters, Tables 4-7); tables that share cells share runs.

select_on: heldout (ours, the experiment files), reported (the paper's: tag <setting>_paper, marked in the
table) or both (the default); the two protocols: docs/methods_tinyattn.md ("Model selection").
"""

from __future__ import annotations

from typing import NamedTuple

from embexp.sweep.runner import Var, report, switched_on, table, train

SEEDS = Var([0])
SELECT_ON = Var("both", choices=["heldout", "reported", "both"], help="heldout (ours), reported (the paper's), both")
INIT_FROM = "method.init_from=${output_root}/glue_${task.subset}/${model.name}/tinyattn_1h_paper/seed${seed}"


class Cell(NamedTuple):
    exp: str  # conf/experiment/<exp>.yaml
    model: str
    tag: str  # the setting: tag <tag>_paper under the reported protocol
    every: int  # half an epoch of the whole training split (steps): eval_every under the reported protocol
    warmup: int = 0  # 10% of the whole split's steps, where the experiment warms up (reported protocol)
    init: str = ""  # 4H: warm-started from the 1H run of the same task, model and seed (reported protocol)


def selection_table(v, name: str, cells: list[Cell]):
    """A GLUE table under the heldout and/or the reported protocol (module doc), then its report."""
    for protocol in ["heldout", "reported"]:
        if v.select_on not in ("both", protocol):
            continue
        for seed in v.seeds:
            for c in cells:
                args = [f"experiment={c.exp}", f"model={c.model}", f"seed={seed}", "trainer.resume=true"]
                if protocol == "reported":
                    args += ["trainer.select_on=reported", "trainer.select_metric=task", "task.select_split=",
                             f"trainer.eval_every={c.every}"]
                    if c.warmup:
                        args.append(f"trainer.warmup_steps={c.warmup}")
                    if c.init:
                        args.append(INIT_FROM)
                    args.append(f"tag={c.tag}_paper")
                yield train(*args)
    yield report("paper=tinyattn", f"table={name}", f"seeds=[{','.join(v.seeds)}]", f"select_on={v.select_on}")


@table(seeds=Var([1, 2, 3, 4]),
       fewglue_data=Var("", help="folder holding super_glue/<cb|rte>/train_fewglue32.jsonl "
                                 "('' = task.data_dir's default, $EMBEXP_DATA)"))
def table1(v):
    """Table 1: FewGLUE CB and RTE (32 training rows), ALBERT-xxlarge, PET cloze pattern 3 scored by the
    masked-LM head. One protocol: FewGLUE selects nothing. The seeds: docs/methods_tinyattn.md (FewGLUE)."""
    data = [f"task.data_dir={v.fewglue_data}"] if switched_on(v.fewglue_data) else []
    for seed in v.seeds:
        for exp in ["tinyattn_fewglue_cb", "tinyattn_fewglue_rte"]:
            yield train(f"experiment={exp}", "model=albert_xxlarge", f"seed={seed}", "trainer.resume=true", *data)
    yield report("paper=tinyattn", "table=table1", f"seeds=[{','.join(v.seeds)}]")


@table(seeds=SEEDS, select_on=SELECT_ON)
def table2(v):
    """Table 2 + Fig. 4: roberta-base against roberta-large on MNLI and SST-2."""
    yield from selection_table(v, "table2", [
        Cell("tinyattn_1h_mnli", "roberta", "1h", 12272, 49088),
        Cell("tinyattn_1h_sst2", "roberta", "1h", 2105, 8420),
        Cell("tinyattn_base_seq_mnli", "roberta_base", "1h_seq", 12272, 49088),
        Cell("tinyattn_base_seq_sst2", "roberta_base", "1h_seq", 2105, 8420),
    ])


@table(seeds=SEEDS, select_on=SELECT_ON)
def table8(v):
    """Table 8: GLUE dev, roberta-large, 1H on 8 tasks and 4H (warm-started from the 1H run of the same
    task, model and seed, listed first) where the paper ran it."""
    yield from selection_table(v, "table8", [
        Cell("tinyattn_1h_sst2", "roberta", "1h", 2105, 8420),
        Cell("tinyattn_1h_cola", "roberta", "1h", 267),
        Cell("tinyattn_1h_mnli", "roberta", "1h", 12272, 49088),
        Cell("tinyattn_1h_qqp", "roberta", "1h", 11370),
        Cell("tinyattn_1h_rte", "roberta", "1h", 78),
        Cell("tinyattn_1h_mrpc", "roberta", "1h", 115, 460),
        Cell("tinyattn_1h_qnli", "roberta", "1h", 3273),
        Cell("tinyattn_1h_stsb", "roberta", "1h", 180),
        Cell("tinyattn_4h_cola", "roberta", "4h", 267, 1070, init="1h"),
        Cell("tinyattn_4h_rte", "roberta", "4h", 78, init="1h"),
        Cell("tinyattn_4h_mrpc", "roberta", "4h", 115, init="1h"),
        Cell("tinyattn_4h_qnli", "roberta", "4h", 3273, init="1h"),
    ])


@table(seeds=SEEDS, select_on=SELECT_ON)
def table10(v):
    """Table 10: sequential against parallel placement (roberta-base, SST-2 and MNLI)."""
    yield from selection_table(v, "table10", [
        Cell("tinyattn_base_seq_sst2", "roberta_base", "1h_seq", 2105, 8420),
        Cell("tinyattn_base_para_sst2", "roberta_base", "1h_para", 2105, 8420),
        Cell("tinyattn_base_seq_mnli", "roberta_base", "1h_seq", 12272, 49088),
        Cell("tinyattn_base_para_mnli", "roberta_base", "1h_para", 12272, 49088),
    ])


@table(seeds=SEEDS, select_on=SELECT_ON)
def table11(v):
    """Table 11: 4H with and without parameter averaging (CoLA, RTE)."""
    yield from selection_table(v, "table11", [
        Cell("tinyattn_1h_cola", "roberta", "1h", 267),
        Cell("tinyattn_1h_rte", "roberta", "1h", 78),
        Cell("tinyattn_4h_cola", "roberta", "4h", 267, 1070, init="1h"),
        Cell("tinyattn_4h_noavg_cola", "roberta", "4h_noavg", 267, init="1h"),
        Cell("tinyattn_4h_rte", "roberta", "4h", 78, init="1h"),
        Cell("tinyattn_4h_noavg_rte", "roberta", "4h_noavg", 78, 312, init="1h"),
    ])


@table(seeds=SEEDS, select_on=SELECT_ON)
def table12(v):
    """Table 12: 1H4D (head dim 4) against 1H (CoLA, RTE)."""
    yield from selection_table(v, "table12", [
        Cell("tinyattn_1h_cola", "roberta", "1h", 267),
        Cell("tinyattn_1h_rte", "roberta", "1h", 78),
        Cell("tinyattn_1h4d_cola", "roberta", "1h4d", 267),
        Cell("tinyattn_1h4d_rte", "roberta", "1h4d", 78),
    ])
