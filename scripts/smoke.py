"""make smoke: one debug=smoke run per registered method, on a tiny decoder and a tiny encoder.

Every run goes through the same code path as `python -m embexp.train ... debug=smoke` (offline,
CPU, a few seconds each). Prints one line per run and exits non-zero if any failed. A cell whose
model kind the method does not run on (its class's `model_kinds`: ktoken on an encoder, head_only
on a decoder) is printed as `skip` with that reason, not run and not counted as a failure.
Each run trains afresh, so a second `make smoke` checks the code as it is now: trainer.overwrite=true
replaces the run a previous one left in outputs/smoke (only embexp's records there go, run/ownership.py).
`python scripts/smoke.py [override ...]` appends overrides to every run (e.g. output_root=DIR).
"""

from __future__ import annotations

import os
import sys
import time
import traceback
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from embexp.core.cli import (
    compose_train,  # noqa: E402
    quiet_libraries,  # noqa: E402
)
from embexp.core.config import run_name  # noqa: E402
from embexp.methods.registry import registered, unsupported  # noqa: E402

CELLS = [("tiny_llama", "wmt16"), ("tiny_roberta", "glue")]


def plan() -> list[tuple[str, str, str, str]]:
    """(method, model, task, why it is skipped or '') for every registered method and cell."""
    models = {model: compose_train(["debug=smoke", f"model={model}", f"task={task}"]).model for model, task in CELLS}
    return [(method, model, task, unsupported(method, models[model]))
            for method in sorted(registered()) for model, task in CELLS]


def main(overrides: list[str] | None = None, methods: list[str] | None = None) -> int:
    """Every cell of :func:`plan` (of ``methods`` only, where given), with ``overrides`` appended to each run."""
    from embexp.train import run

    quiet_libraries()
    failures = 0
    for method, model, task, skip in plan():
        if methods is not None and method not in methods:
            continue
        if skip:
            print(f"skip  {method:<17}{model:<14}{task:<7}{skip}", flush=True)
            continue
        cfg = compose_train(["debug=smoke", f"method={method}", f"model={model}", f"task={task}",
                             "trainer.log_every=0", "trainer.overwrite=true", *(overrides or [])])
        run_dir = Path(run_name(cfg.output_root, cfg.task.name, cfg.task.subset, model, method, cfg.tag, cfg.seed))
        t0 = time.perf_counter()
        try:
            m = run(cfg, run_dir)
            shown = ", ".join(f"{k}={v:.2f}" for k, v in m["metrics"].items() if not k.endswith("seconds"))
            print(f"ok    {method:<17}{model:<14}{task:<7}{m['n_trainable_params']:>9,} "
                  f"params  {time.perf_counter() - t0:5.1f}s  {shown}", flush=True)
        except Exception as e:  # report every cell, then fail
            failures += 1
            print(f"FAIL  {method:<17}{model:<14}{task:<7}{type(e).__name__}: {e}", flush=True)
            traceback.print_exc(limit=3)
    print(f"{failures} failed" if failures else "all smoke runs passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
