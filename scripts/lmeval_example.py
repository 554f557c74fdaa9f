"""The measured example of docs/lmeval.md: five trained SmolLM2 runs on lm-eval's sst2 and boolq through the backend.

    EMBEXP_DATA=../shared/data python scripts/lmeval_example.py [rows=200] [steps=100] [out=outputs/lmeval_example]

Trains (or finds complete) TinyTE-full, TinyTE-gated, prompt tuning, LoRA and K-Token (K=2) on SmolLM2-135M with
2,000 real SST-2 training rows (a seeded sample), ``steps`` steps at batch 8, each at its comparison learning rate
(``Method.comparison.lr``), embexp's own evaluation on the first ``rows`` validation rows. Then evaluates each run
through ``embexp.lmeval``'s model on local copies of lm-eval's ``sst2`` and ``boolq`` tasks (their YAML with
``dataset_path: json`` on EMBEXP_DATA's files, the first ``rows`` rows), and lm-eval's own ``hf`` model on the
untrained SmolLM2 on the same rows, in this process, one after the other. Prints a Markdown table: accuracy,
embexp's own accuracy on the same sst2 rows, and rows per second of each side.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

METHODS = {"tinyte_full": [], "tinyte_gated": [], "prompt_tuning": [], "lora": [], "ktoken": ["method.k=2"]}
TASKS = {"sst2_local": ("glue/sst2/default.yaml", "glue/sst2/validation.jsonl"),
         "boolq_local": ("super_glue/boolq/default.yaml", "super_glue/boolq/validation.jsonl")}


def options(argv: list[str]) -> dict:
    o = {"rows": "200", "steps": "100", "out": "outputs/lmeval_example"}
    for a in argv:
        key, sep, value = a.partition("=")
        if not sep or key not in o:
            sys.exit(f"embexp: error: unknown option '{a}' (valid: rows=N steps=N out=DIR)")
        o[key] = value
    if not os.environ.get("EMBEXP_DATA"):
        sys.exit("embexp: error: set EMBEXP_DATA to the folder of hub-schema files (e.g. ../shared/data)")
    return o


def train(method: str, extra: list[str], o: dict) -> Path:
    from embexp.methods.registry import registered

    run_dir = Path(o["out"]) / method
    cmd = [sys.executable, "-m", "embexp.train", f"method={method}", "model=smollm2", "task=glue", "task.subset=sst2",
           "task.max_train_samples=2000", "task.train_sample_seed=0", f"task.max_eval_samples={o['rows']}",
           "task.select_split=", f"trainer.max_steps={o['steps']}", "trainer.batch_size=8", "trainer.progress=false",
           f"trainer.lr={registered()[method].comparison.lr}", "trainer.resume=true", f"hydra.run.dir={run_dir}",
           *extra]
    print("#", " ".join(cmd[1:]), flush=True)
    if subprocess.run(cmd).returncode:
        sys.exit(f"embexp: error: training {method} failed (its error is above); nothing evaluated")
    return run_dir


def task_folder(data: Path, rows: int) -> Path:
    """Local copies of lm-eval's sst2 and boolq YAML reading EMBEXP_DATA's validation files (first `rows` rows)."""
    import lm_eval
    import yaml

    folder = Path(tempfile.mkdtemp(prefix="embexp_lmeval_tasks_"))
    for name, (yaml_path, data_file) in TASKS.items():
        lines = (data / data_file).read_text().splitlines()[:rows]
        (folder / f"{name}.jsonl").write_text("\n".join(lines) + "\n")
        task = yaml.safe_load((Path(lm_eval.__file__).parent / "tasks" / yaml_path).read_text())
        for key in ("tag", "dataset_name", "training_split"):
            task.pop(key, None)
        task.update(task=name, dataset_path="json",
                    dataset_kwargs={"data_files": {"validation": str(folder / f"{name}.jsonl")}})
        (folder / f"{name}.yaml").write_text(yaml.safe_dump(task, sort_keys=False))
    return folder


def measure(model, folder: Path) -> dict:
    """{task: (accuracy, rows/s)}, each task evaluated on its own so that its time is its own."""
    import lm_eval.evaluator
    from lm_eval import simple_evaluate
    from lm_eval.tasks import TaskManager

    lm_eval.evaluator.add_env_info = lambda results: None  # torch's collect_env report: seconds, not the model's time
    out = {}
    for name in TASKS:
        manager = TaskManager(include_path=str(folder), include_defaults=False)
        t0 = time.perf_counter()
        res = simple_evaluate(model=model, tasks=[name], task_manager=manager)
        seconds = time.perf_counter() - t0
        n = res["n-samples"][name]["effective"]
        out[name] = (100 * res["results"][name]["acc,none"], n / seconds)
    return out


def main(argv: list[str]) -> None:
    o = options(argv)
    from lm_eval.models.huggingface import HFLM

    from embexp.lmeval.model import EmbexpLM
    from embexp.models import smollm2_path

    runs = {m: train(m, extra, o) for m, extra in METHODS.items()}
    folder = task_folder(Path(os.environ["EMBEXP_DATA"]), int(o["rows"]))
    rows = []
    for method, run_dir in runs.items():
        own = json.loads((run_dir / "metrics.json").read_text())["metrics"]["ll_accuracy"]
        got = measure(EmbexpLM(str(run_dir), batch_size=16, cpu=True), folder)
        rows.append((method, got, f"{own:.1f}"))
        print(method, got, flush=True)
    base = measure(HFLM(pretrained=str(smollm2_path()), device="cpu", batch_size=16), folder)
    rows.append(("zero-shot, lm-eval's hf model", base, ""))
    print(f"\n{o['rows']} rows per task, SmolLM2-135M-Instruct, {o['steps']} steps at batch 8 on 2,000 SST-2 rows\n")
    print("| run | sst2 acc | embexp.eval sst2 acc (same rows) | boolq acc | sst2 rows/s | boolq rows/s |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, got, own in rows:
        (sa, sr), (ba, br) = got["sst2_local"], got["boolq_local"]
        print(f"| {name} | {sa:.1f} | {own} | {ba:.1f} | {sr:.1f} | {br:.1f} |")


if __name__ == "__main__":
    main(sys.argv[1:])
