"""Sanity experiment: does TinyTE-full really learn? BoolQ on SmolLM2-135M-Instruct, on a CPU.

    python scripts/boolq_smollm2.py [--eval-rows 500] [--max-source-tokens 256] [--out outputs/boolq_smollm2]

Runs two ordinary ``python -m embexp.train`` commands (printed before they start) on the FewGLUE
32-example BoolQ training set and the first ``--eval-rows`` validation rows (local data under
``--data-dir``), and prints exact-match accuracy (``em_accuracy``, the TinyTE protocol: the greedy
answer must be exactly " yes"/" no", no post-processing) and log-likelihood accuracy
(``ll_accuracy``, lm-eval's ``acc``) for

(a) ``method=zero_shot``;
(b) ``method=tinyte_full`` with the paper's SuperGLUE recipe (``trainer=tinyte_paper``: Adam 5e-4,
    cosine, 20 epochs over 32 examples at an effective batch of 32 = 20 optimizer steps), adapted to a
    CPU: micro-batches of 4 x 8 accumulation steps (``--train-batch-size``) instead of 1 x 32 (the same
    objective here: every BoolQ target is " yes"/" no" + EOS, 2 tokens, so the token-mean equals the
    example-mean), 2 warm-up steps instead of 50 (50 would never reach the peak lr in 20 steps), no
    periodic evaluation, no selection rows (``task.select_split=``: all 32 rows train, nothing is
    selected), the loss on the answer only (``task.loss_on=target``, the default; the tinyte_*
    experiments use ``all``), and the end-of-training evaluation loss on one batch only.

``--rescore`` recomputes the prediction statistics of finished runs without training. ``--lr``
changes TinyTE's peak learning rate (the run directory gets the tag ``lr<value>``). Several
invocations with the same ``--out`` are merged into ``<out>/summary.json``; the runs are under
``<out>/superglue_boolq/smollm2/<method>[_lr<value>]/seed0``. Numbers and commands: docs/tasks_tinyte.md.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path


def prediction_stats(run_dir: Path) -> dict:
    """What em/ll accuracy alone hides: the majority baseline, how often the answer is not exactly a
    choice, how often "no" is chosen, and balanced accuracy (mean recall of yes and no; an invalid
    answer counts as wrong), which is 50 for any constant or label-blind answer."""
    preds = [json.loads(line) for line in (run_dir / "predictions.jsonl").read_text().splitlines() if line]
    labels = sorted({p["label"] for p in preds})

    def balanced(key: str) -> float:
        return 100.0 * sum(sum(p[key] == v for p in preds if p["label"] == v) / sum(p["label"] == v for p in preds)
                           for v in labels) / len(labels)

    n = len(preds)
    return {
        "majority_baseline": 100.0 * max(sum(p["label"] == v for p in preds) for v in labels) / n,
        "em_balanced_accuracy": balanced("em_pred"),
        "ll_balanced_accuracy": balanced("ll_pred"),
        "em_invalid_rate": 100.0 * sum(p["em_pred"] == -1 for p in preds) / n,  # answer not exactly a choice
        "em_no_rate": 100.0 * sum(p["em_pred"] == 0 for p in preds) / n,
        "ll_no_rate": 100.0 * sum(p["ll_pred"] == 0 for p in preds) / n,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--eval-rows", type=int, default=500, help="BoolQ validation rows to evaluate (the first N).")
    ap.add_argument("--max-source-tokens", type=int, default=256,
                    help="Prompt truncation (keeps the end: question + passage tail).")
    ap.add_argument("--eval-batch-size", type=int, default=8)
    ap.add_argument("--train-batch-size", type=int, default=4, choices=(1, 2, 4, 8, 16, 32),
                    help="Micro-batch; accumulation = 32 / this, so the effective batch stays 32.")
    ap.add_argument("--lr", type=float, default=5e-4,
                    help="TinyTE peak learning rate (the paper: 5e-4); another value tags the run dir.")
    ap.add_argument("--data-dir", default=os.environ.get("EMBEXP_DATA", ""),
                    help="Root of the hub-schema files (default: $EMBEXP_DATA).")
    ap.add_argument("--out", default="outputs/boolq_smollm2")
    ap.add_argument("--only", choices=("zero_shot", "tinyte_full"), help="Run one of the two.")
    ap.add_argument("--rescore", action="store_true",
                    help="Train nothing: recompute the prediction statistics "
                         "of the runs already in <out>/summary.json.")
    args = ap.parse_args()

    common = ["model=smollm2", "task=superglue", "task.subset=boolq", f"task.data_dir={args.data_dir}",
              "task.train_split=train_fewglue32", "task.select_split=", f"task.max_eval_samples={args.eval_rows}",
              f"task.max_source_tokens={args.max_source_tokens}", "task.max_new_tokens=4",
              f"trainer.eval_batch_size={args.eval_batch_size}", "trainer.cpu=true", "trainer.progress=false",
              f"output_root={args.out}"]
    runs = {
        "zero_shot": ["method=zero_shot"],
        "tinyte_full": ["method=tinyte_full", "trainer=tinyte_paper", "trainer.epochs=20",
                        f"trainer.batch_size={args.train_batch_size}",
                        f"trainer.grad_accum={32 // args.train_batch_size}", "trainer.warmup_steps=2",
                        "trainer.eval_every=0", "trainer.select_best=false",
                        "trainer.save_every=0", "trainer.max_eval_loss_batches=1", "trainer.log_every=1"]
        + ([f"trainer.lr={args.lr}", f"tag=lr{args.lr:g}"] if args.lr != 5e-4 else []),
    }
    summary_path = Path(args.out) / "summary.json"
    summary = json.loads(summary_path.read_text()) if summary_path.is_file() else {}
    for run in summary if args.rescore else ():
        summary[run].update(prediction_stats(Path(args.out) / "superglue_boolq" / "smollm2" / run / "seed0"))
    for name, extra in runs.items():
        if args.rescore or (args.only and name != args.only):
            continue
        cmd = [sys.executable, "-m", "embexp.train", *extra, *common]
        print("$", shlex.join(["python", *cmd[1:]]), flush=True)
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True)
        wall = time.perf_counter() - t0
        run = name if name == "zero_shot" or args.lr == 5e-4 else f"{name}_lr{args.lr:g}"
        run_dir = Path(args.out) / "superglue_boolq" / "smollm2" / run / "seed0"
        rec = json.loads((run_dir / "metrics.json").read_text())
        m = rec["metrics"]
        summary[run] = {"em_accuracy": m["em_accuracy"], "ll_accuracy": m["ll_accuracy"], **prediction_stats(run_dir),
                         "wall_seconds": wall,
                         "train_seconds": rec["train"].get("wall_seconds", 0.0), "eval_seconds": m["eval_seconds"],
                         "train_steps": rec["train"]["steps"], "final_train_loss": rec["train"].get("final_train_loss"),
                         "n_eval": rec["n_eval_examples"], "n_trainable": rec["n_trainable_params"],
                         "command": shlex.join(["python", *cmd[1:]])}
        print(json.dumps({run: summary[run]}, indent=1), flush=True)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    summary_path.write_text(json.dumps(summary, indent=1))
    print(f"{'run':<20} {'em_accuracy':>12} {'ll_accuracy':>12} {'majority':>9} "
          f"{'em_balanced':>12} {'em_invalid':>11} {'wall_s':>8}")
    for name, s in summary.items():
        print(f"{name:<20} {s['em_accuracy']:>12.1f} {s['ll_accuracy']:>12.1f} {s['majority_baseline']:>9.1f} "
              f"{s['em_balanced_accuracy']:>12.1f} {s['em_invalid_rate']:>11.1f} {s['wall_seconds']:>8.0f}")


if __name__ == "__main__":
    main()
