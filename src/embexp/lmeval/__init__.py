"""Evaluate a trained run on lm-evaluation-harness's tasks: ``python -m embexp.lmeval run_dir=DIR tasks=[sst2,boolq]``.

The run is rebuilt as ``embexp.eval`` rebuilds it and wrapped as lm-eval's model ``embexp``
(:class:`embexp.lmeval.model.EmbexpLM`): every decoder method, also those that cannot be exported to a
plain transformers model (TinyTE-gated and -hybrid, prompt tuning, K-Token merging, repeat_prompt), is
scored through embexp's own log-likelihood and generation path. Prints lm-eval's results table.

Tasks are lm-eval task names, or YAML files / folders of them (``include_path``): offline, a task's
YAML may read local files with ``dataset_path: json`` and ``dataset_kwargs: {data_files: {validation:
...}}`` (docs/lmeval.md). From Python, after ``import embexp.lmeval.model``, lm-eval's
``simple_evaluate(model="embexp", model_args="run_dir=DIR")`` works too. Needs the extra
``pip install -e '.[lmeval]'``.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from dataclasses import dataclass
from pathlib import Path

from embexp import EmbexpError
from embexp.core import cli
from embexp.core.config import option
from embexp.core.records import check_finished
from embexp.lmeval import checks


@dataclass
class Config:
    run_dir: str = option("", "A complete embexp run directory (a decoder run).")
    tasks: list = option([], "lm-eval task names (sst2, boolq, hellaswag, ...) or paths of task YAML files.")
    include_path: str = option("", "A folder of extra task YAML files (lm-eval's --include_path); '' = none.")
    limit: int = option(-1, "Rows per task (-1: all).", ge=1, also=(-1,))
    num_fewshot: int = option(-1, "Few-shot examples per prompt (-1: the task's default).", ge=0, also=(-1,))
    batch_size: int = option(0, "Requests per forward (0: the run's trainer.eval_batch_size).", ge=0)
    cpu: bool = option(False, "Evaluate on the CPU even when a GPU is present.")
    trust_remote_code: bool = option(False, "Let the run's model code run (never taken from the run directory; a "
                                            "warning line when set).")
    output: str = option("", "Also write lm-eval's results as JSON to this file ('' = print only).")
    seed: int = option(1234, "lm-eval's seeds (few-shot sampling).", ge=0)


def configure(argv: list[str]) -> Config:
    """The checked config: every option in its domain, and what the evaluation reads and writes checked before
    lm-eval indexes a task or the run's model loads (embexp.lmeval.checks)."""
    argv, names = checks.task_list(argv)  # tasks=sst2 or tasks=sst2,boolq: lm-eval's --tasks, a list of one or more
    cfg = cli.parse(Config, argv)
    if names is not None:
        cfg.tasks = names
    if not cfg.run_dir:
        raise EmbexpError("missing run_dir (usage: python -m embexp.lmeval run_dir=DIR tasks=[sst2])")
    if not cfg.tasks:
        raise EmbexpError("missing tasks (usage: python -m embexp.lmeval run_dir=DIR tasks=[sst2]; lm-eval task "
                          "names or YAML files)")
    check_finished(cfg.run_dir)  # as embexp.eval reads a run, before lm-eval indexes its tasks (seconds)
    checks.check_output(cfg.output)  # before the evaluation, not after it
    checks.check_include_path(cfg.include_path)
    if importlib.util.find_spec("lm_eval") is None:
        raise EmbexpError("python -m embexp.lmeval needs lm-evaluation-harness: pip install -e '.[lmeval]'")
    return cfg


def task_manager(cfg: Config):
    """lm-eval's TaskManager over ``include_path``, the folders of YAML files named in ``tasks`` (a file is then
    asked for by its ``task:`` name) and lm-eval's own tasks, unless every task is a file (indexing lm-eval's
    thousands of task files takes seconds). Each file is checked first (``checks.task_file``), and a name that
    lm-eval's index gives to another file than the one named is refused: lm-eval would evaluate that one."""
    from lm_eval.tasks import TaskManager

    names, folders, files = [], [cfg.include_path] if cfg.include_path else [], {}
    for t in cfg.tasks:
        path = Path(str(t))
        if checks.is_task_file(path):
            names.append(checks.task_file(path))  # parsed, one task, its local data found: one line otherwise
            folders.append(str(path.resolve().parent))
            files.setdefault(names[-1], path)
        else:
            names.append(str(t))
    files_only = all(checks.is_task_file(t) for t in cfg.tasks)
    manager = TaskManager(include_path=folders or None, include_defaults=not files_only)
    for name, path in files.items():
        entry = manager.task_index.get(name)
        indexed = getattr(entry, "yaml_path", None)
        if indexed is not None and Path(indexed).resolve() != path.resolve():
            raise EmbexpError(f"task file '{path}' names task '{name}', and so does {indexed} beside it: lm-eval "
                              f"would evaluate that one (give each file its own task: name)")
    return manager, names


def run(cfg: Config) -> dict:
    from lm_eval import simple_evaluate
    from lm_eval.utils import make_table

    from embexp.lmeval.model import EmbexpLM

    manager, names = task_manager(cfg)
    unknown = [n for n in names if n not in manager.all_tasks]
    if unknown:
        raise EmbexpError(f"unknown lm-eval task '{unknown[0]}' (lm-eval lists {len(manager.all_tasks)} tasks; "
                          "a local YAML file or include_path adds others)")
    tasks = [load_task(manager, n) for n in names]  # every task's rows read (or found unreachable) before the model
    lm = EmbexpLM(cfg.run_dir, batch_size=cfg.batch_size, cpu=cfg.cpu, trust_remote_code=cfg.trust_remote_code)
    results = simple_evaluate(model=lm, tasks=[t for ts in tasks for t in ts], task_manager=manager,
                              limit=cfg.limit if cfg.limit > 0 else None,
                              num_fewshot=cfg.num_fewshot if cfg.num_fewshot >= 0 else None,
                              random_seed=cfg.seed, numpy_random_seed=cfg.seed, torch_random_seed=cfg.seed,
                              fewshot_random_seed=cfg.seed)
    print(f"embexp run {cfg.run_dir} ({lm.cfg.method.name} on {lm.cfg.model.name}), batch {lm.batch_size}")
    print(make_table(results))
    if cfg.output:
        Path(cfg.output).write_text(json.dumps(results, indent=1, default=str) + "\n")
    return results


def load_task(manager, name: str) -> list:
    """lm-eval's task (or group, or a tag's tasks) ``name``, built as ``simple_evaluate`` builds it, which reads its
    rows: a hub dataset that cannot be reached (offline), a data file that does not read, or a task config lm-eval
    rejects is one line here, before the model loads. The built objects are what ``simple_evaluate`` evaluates."""
    try:
        loaded = manager.load(name)
    except Exception as e:  # noqa: BLE001 - datasets, the hub and lm-eval raise many types
        text = next((ln.strip() for ln in str(e).splitlines() if ln.strip()), type(e).__name__)
        offline = any(w in text.lower() for w in ("offline", "reach", "connect", "resolve"))
        hint = " (offline, a task YAML reads local files with dataset_path: json: docs/lmeval.md)" if offline else ""
        raise EmbexpError(f"lm-eval task '{name}' could not be loaded: {text}{hint}") from None
    group = loaded["groups"].get(name)
    return [group] if group is not None else list(loaded["tasks"].values())


@cli.one_line_errors
def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if any(a in ("-h", "--help") for a in argv):
        print(__doc__.strip().replace("``", "") + "\n\n" + cli.usage("", Config).split("\n", 2)[2])
        return
    run(configure(argv))
