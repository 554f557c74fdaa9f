"""K-Token Merging (papers/k-token-merging.md): the P–L scores of Tables 1–3 by embexp's Eq. 3/4 from
the paper's own performance and length reduction (a check of the formula, not a re-run), the
Textualized Tree's sizes and majority class from the project's generator (src/embexp/tasks/tree.py),
the merging encoder's size; accuracy, perplexity and the measured reductions need a GPU. The printed
cells (and the P–L formula's printed inputs) are ledger/printed/ktoken.csv."""

from __future__ import annotations

import random
from functools import lru_cache

from embexp.report.ledger import measure, sheet
from embexp.report.ledger.core import Compute

# the paper-sized stage of make ktoken_table1 (`table1` in src/embexp/sweep/papers/ktoken.py, tree=paper): trees
# generated per stage (the held-out gate trees included), gate trees, test trees, questions asked per tree
TREES, GATE, TEST, PAIRS = 500_000, 10_000, 10_000, 5
SAMPLE = 300  # trees generated per stage for the sizes and majority class
INTRO = (
    "Tables 1–3 and the numbers of §3–§4. Not listed: the figures (Fig. 6's claim is a row), §1's 94% (arithmetic "
    "on K = 4) and the vocabulary-bits example of §1 (its numbers are lost in the paper's text)."
)
NOTES = {
    "Table 1": "P–L (Eq. 3) = 2PL/(P+L) by `embexp.tasks.metrics.pl_from_accuracy` from the printed accuracy P and "
    "length reduction L: a check of embexp's formula, not a re-run. LTSC is another paper's method "
    "(not in embexp); its P–L still checks the formula.",
    "Table 3": "P–L by Eq. 4 (`pl_from_perplexity`): P = PPL(uncompressed) / PPL(method).",
    "§4.2 Textualized Tree": "The generator's trees for the paper-sized stage of `make ktoken_table1` "
    f"({TREES:,} trees "
    f"per stage, {GATE:,} held out for the gate, {TEST:,} test trees, {PAIRS} questions per tree): "
    f"the first {SAMPLE} trees of each stage's stream (seed 42 + stage index) are generated and "
    "their question counts and labels extrapolated.",
}


def pl(rid: str) -> float:
    """A P–L cell by Eq. 3 (accuracy, reduction) or Eq. 4 (perplexity, the uncompressed one, reduction) from
    the paper's printed inputs (the row's ``inputs``)."""
    from embexp.tasks.metrics import pl_from_accuracy, pl_from_perplexity

    args = sheet.inputs("ktoken", rid)
    return pl_from_perplexity(*args) if rid.startswith("ktoken.t3.") else pl_from_accuracy(*args)


@lru_cache(maxsize=None)
def stage_sample(stage: str) -> dict:
    """Questions per tree and the share of 'false' answers over the first SAMPLE trees of a stage."""
    from omegaconf import OmegaConf

    from embexp.tasks import TASKS as REG
    from embexp.tasks import build_task
    from embexp.tasks.tree import STAGES, tree_rows, walk

    cfg = OmegaConf.merge(
        OmegaConf.structured(REG["tree"].Config),
        {
            "name": "tree",
            "subset": stage,
            "num_train_trees": SAMPLE,
            "num_eval_trees": 1,
            "max_pairs_per_tree": PAIRS,
            "select_split": "",
        },
    )
    task = build_task(cfg)
    trees = task.trees()[:SAMPLE]
    rng = random.Random(0)
    per_tree = [len(tree_rows(t, rng, PAIRS)) for t in trees]
    nodes = [sum(1 for _ in walk(t)) for t in trees]
    rows = task.generate("train")
    min_children = STAGES[stage][2]
    return {
        "questions": per_tree,
        "nodes": nodes,
        "false": sum(r["label"] == "false" for r in rows) / len(rows),
        "exact": min(per_tree) == PAIRS and min_children >= 2,
    }


def questions(stage: str, trees: int) -> float:
    """Questions of `trees` trees of the stage: exact when every tree has at least PAIRS ordered pairs
    (x3large: the root has at least 3 children, so N >= 4 and N(N-1) >= 12), else the sample's mean."""
    s = stage_sample(stage)
    per = PAIRS if s["exact"] else sum(s["questions"]) / len(s["questions"])
    return trees * per


def tree_computes() -> dict:
    from embexp.tasks.tree import STAGES

    out = {
        "ktoken.tree.x3large.train": Compute(lambda _d: questions("x3large", TREES - GATE)),
        "ktoken.tree.x3large.test": Compute(lambda _d: questions("x3large", TEST)),
    }
    for stage in STAGES:
        out[f"ktoken.tree.{stage}.majority"] = Compute(lambda _d, s=stage: 100 * stage_sample(s)["false"])
    return out


def encoder_mb(k: int) -> float:
    """fp32 megabytes of the merging encoder of K on Qwen2.5-0.5B (d = 896), built by methods/ktoken.py."""
    import torch

    from embexp.methods.ktoken import MergingEncoder

    with torch.device("meta"):
        enc = MergingEncoder(k, measure.spec_config("qwen25_05b").hidden_size)
    return 4 * sum(p.numel() for p in enc.parameters()) / 1e6


def computes() -> dict:
    cols = ("uncompressed", "selectivecontext", "llmlingua2", "ltsc", "2-token", "3-token", "4-token")
    ids = [f"ktoken.t{t}.{col}.pl" for t in "123" for col in cols]
    pls = {rid: Compute(lambda _d, rid=rid: pl(rid)) for rid in ids}
    return {**pls, **tree_computes(), "ktoken.s31.encoder.mb": Compute(lambda _d: encoder_mb(2))}
