"""Re-evaluate a saved run: ``python -m embexp.eval run_dir=DIR``.

Rebuilds backbone, method and data from the run's own config.yaml, loads adapter.safetensors,
evaluates, and compares with the metrics the run recorded. Writes nothing into the run.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import hydra
import torch
from omegaconf import OmegaConf
from safetensors.torch import load_file

from embexp import EmbexpError, cli
from embexp.config import register_core_schemas
from embexp.inference import evaluate
from embexp.pipeline import build
from embexp.results import CONFIG, METRICS, is_complete

register_core_schemas()
import embexp.methods  # noqa: E402,F401
import embexp.tasks  # noqa: E402,F401


def reevaluate(run_dir: Path, max_eval_samples=None, batch_size=None, cpu=False) -> tuple[dict, dict]:
    """(new metrics, recorded metrics) for a finished run directory."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise EmbexpError(f"run_dir '{run_dir}' does not exist")
    if not (run_dir / CONFIG).is_file():
        raise EmbexpError(f"run_dir '{run_dir}' has no {CONFIG}: not an embexp run directory")
    if not is_complete(run_dir):
        raise EmbexpError(f"run_dir '{run_dir}' did not finish (status.json is not 'complete'); rerun it with trainer.resume=true")
    cfg = OmegaConf.load(run_dir / CONFIG)
    if max_eval_samples is not None:
        cfg.task.max_eval_samples = max_eval_samples
    device = torch.device("cuda" if torch.cuda.is_available() and not cpu else "cpu")
    torch.manual_seed(cfg.seed)
    cfg.do_eval, cfg.export = True, False
    c = build(cfg, device, training=False)
    if c.method.trains and cfg.do_train:
        adapter = run_dir / "adapter.safetensors"
        if not adapter.is_file():
            raise EmbexpError(f"run_dir '{run_dir}' has no adapter.safetensors (was it trained with save_adapter=false?)")
        c.method.load_trainable_state(load_file(adapter))
    eval_ex = c.eval_examples
    metrics, _ = evaluate(c.method, c.task, eval_ex, c.featurizer, batch_size or cfg.trainer.eval_batch_size, device,
                          cfg.trainer.progress)
    recorded = json.loads((run_dir / METRICS).read_text())["metrics"]
    return metrics, recorded


@hydra.main(config_path=None, config_name="eval", version_base=None)
@cli.one_line_errors
def main(cfg) -> None:
    cli.quiet_libraries()
    new, old = reevaluate(Path(cfg.run_dir), cfg.max_eval_samples, cfg.batch_size, cfg.cpu)
    rows, worst = [], 0.0
    for k, v in new.items():
        if k.endswith("_seconds") or not isinstance(v, (int, float)):
            continue
        ref = old.get(k)
        diff = abs(v - ref) if isinstance(ref, (int, float)) else float("nan")
        worst = max(worst, diff) if diff == diff else worst
        rows.append(f"  {k:<24} {v:>10.4f}   recorded {ref if ref is not None else '-':>10}   diff {diff:.2e}")
    print(f"re-evaluated {cfg.run_dir}\n" + "\n".join(rows))
    if cfg.max_eval_samples is not None:  # a subset cannot be compared with the full recorded metrics
        print(f"reproduced: not checked (max_eval_samples={cfg.max_eval_samples} evaluates a subset of the recorded run)")
        return
    same = worst <= cfg.tolerance
    print("reproduced: " + ("yes" if same else f"no (largest difference {worst:.3g})"))
    if not same:
        sys.exit(3)


def entry() -> None:
    argv = sys.argv[1:]
    if not any(a.startswith("run_dir=") for a in argv):
        cli.die("missing run_dir (usage: python -m embexp.eval run_dir=DIR)")
    sys.argv.insert(1, f"--config-dir={cli.conf_dir()}")
    main()


if __name__ == "__main__":
    entry()
