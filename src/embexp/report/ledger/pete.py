"""PETE (papers/pete.md): Table 2's parameter counts on the meta device; its STS-B scores need a GPU
(ledger/runs.py). The printed cells are ledger/printed/pete.csv."""

from __future__ import annotations

from embexp.report.ledger import sources
from embexp.report.ledger.core import Compute

INTRO = "Table 2 (Table 1 and the training-time and dropout rows of Table 2 are qualitative)."
NOTES = {
    "Table 2": "The 2-layer/2-head d=512 encoders of conf/model/scratch_encoder.yaml, without a task head "
    "(num_labels=0: the sentence encoder STS-B reads)."
}


def total(method: str) -> int:
    return sources.tp("scratch_encoder", f"method={method}", num_labels=0)


def computes() -> dict:
    return {
        "pete.t2.pete.params": Compute(lambda _d: total("pete")),
        "pete.t2.baseline.params": Compute(lambda _d: total("full_ft")),
        "pete.t2.reduction": Compute(lambda _d: 100 * (1 - total("pete") / total("full_ft"))),
    }
