"""make demo: TinyTE-full on a real pretrained encoder, offline, on a CPU, against its baselines.

Runs `python -m embexp.train` configurations in-process (the same code path as the CLI) on
model=minilm (real MiniLM-L6-H384) and the Textualized Tree task (stage `small`, generated
offline), then prints one table: metrics and trainable parameters per method.
Run directories land in outputs/demo/.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from conftest import compose  # noqa: E402
from embexp.cli import quiet_libraries  # noqa: E402
from embexp.config import run_name  # noqa: E402
from embexp.train import run  # noqa: E402

COMMON = ["model=minilm", "task=tree", "task.subset=small", "task.num_train_trees=300", "task.num_eval_trees=100",
          "trainer.batch_size=32", "trainer.epochs=2", "trainer.eval_batch_size=64", "trainer.warmup_steps=10",
          "trainer.log_every=20", "trainer.cpu=true", "output_root=outputs/demo"]
METHODS = {  # method -> its learning rate (the frozen-backbone methods need a larger one)
    "zero_shot": [],
    "tinyte_full": ["trainer.lr=5e-3"],
    "emb_tuning": ["trainer.lr=1e-3"],
    "full_ft": ["trainer.lr=5e-5"],
}


def main() -> None:
    quiet_libraries()
    rows = []
    t_all = time.perf_counter()
    for method, extra in METHODS.items():
        cfg = compose(f"method={method}", *COMMON, *extra)
        run_dir = Path(run_name(cfg.output_root, cfg.task.name, cfg.task.subset, cfg.model.name, method, cfg.tag, cfg.seed))
        print(f"\n=== {method}: python -m embexp.train method={method} {' '.join(COMMON + extra)}", flush=True)
        t0 = time.perf_counter()
        m = run(cfg, run_dir)
        rows.append((method, m, time.perf_counter() - t0))
    print(f"\nTextualized Tree (stage small) on MiniLM-L6-H384, {rows[0][1]['n_eval_examples']} eval questions, "
          f"wall {time.perf_counter() - t_all:.0f} s")
    head = f"{'method':<13}{'trainable':>13}{'(method)':>13}{'accuracy':>10}{'bal.acc':>9}{'F1(true)':>10}{'majority':>10}{'seconds':>9}"
    print(head + "\n" + "-" * len(head))
    for method, m, secs in rows:
        x = m["metrics"]
        print(f"{method:<13}{m['n_trainable_params']:>13,}{m['n_method_params']:>13,}{x['accuracy']:>10.1f}"
              f"{x['balanced_accuracy']:>9.1f}{x['f1']:>10.1f}{x['majority_baseline']:>10.1f}{secs:>9.0f}")
    print("\ntrainable = method tensors + the encoder's classification head (random at init, so zero_shot is a chance baseline).")


if __name__ == "__main__":
    main()
