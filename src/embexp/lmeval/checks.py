"""What ``python -m embexp.lmeval`` checks before lm-eval indexes a task or the run's model loads: the task
list, the output file, the include folder and each task YAML (docs/lmeval.md), each problem one line naming the
value and what is valid."""

from __future__ import annotations

import glob
import os
import tempfile
from pathlib import Path

from embexp import EmbexpError

# lm-eval's ``dataset_path`` values that read local files (datasets' packaged builders), with the files in
# ``dataset_kwargs.data_files``
LOCAL_BUILDERS = ("json", "csv", "parquet", "text", "arrow", "pandas", "xml", "webdataset")
SPLITS = ("training_split", "validation_split", "test_split", "fewshot_split")


def task_list(argv: list[str]) -> tuple[list[str], list[str] | None]:
    """(the other arguments, the task names) where the last ``tasks=`` is not a bracketed list: ``tasks=sst2``
    (one task) or ``tasks=sst2,boolq``, as lm-eval's ``--tasks`` reads them; ``None`` otherwise (the typed
    parse reads ``tasks=[...]``)."""
    given = [a for a in argv if a.split("=", 1)[0] == "tasks"]
    if not given or given[-1].split("=", 1)[1].lstrip().startswith("["):
        return argv, None
    names = [t.strip() for t in given[-1].split("=", 1)[1].split(",") if t.strip()]
    return [a for a in argv if a.split("=", 1)[0] != "tasks"], names


def is_task_file(task) -> bool:
    return Path(str(task)).suffix in (".yaml", ".yml")


def check_output(output: str) -> None:
    """``output=``: the JSON file lm-eval's results are written to can be written, checked before any work: not a
    folder, in a folder that exists and takes a new file (a file written and removed there), or itself a file
    that can be opened for writing."""
    if not output:
        return
    path = Path(output)
    what = f"output='{output}'"
    if path.is_dir():
        raise EmbexpError(f"{what} is a directory: name the JSON file to write lm-eval's results to (e.g. "
                          f"output={path / 'results.json'})")
    parent = path.absolute().parent
    if not parent.exists():
        raise EmbexpError(f"{what}: the folder {parent} does not exist (create it, or name a file in an existing one)")
    if not parent.is_dir():
        raise EmbexpError(f"{what}: {parent} is not a directory")
    try:
        if path.exists():
            with open(path, "a"):  # opened to append, nothing written: its content stays
                pass
        else:
            with tempfile.NamedTemporaryFile(dir=parent, prefix=".embexp-probe-"):
                pass
    except OSError as e:
        raise EmbexpError(f"{what} cannot be written: {e.strerror or e} (in {parent}); name a file in a writable "
                          "folder") from None


def check_include_path(include_path: str) -> None:
    if include_path and not Path(include_path).is_dir():
        raise EmbexpError(f"include_path '{include_path}' is not a folder (a folder of lm-eval task YAML files, or '')")


def task_file(path: Path) -> str:
    """The lm-eval name of the task (or group) in the YAML file ``path``, the file read as lm-eval reads it
    (``!function`` tags and ``include:`` followed) and checked: one mapping naming a task, and a task that reads
    local files (``dataset_path: json`` ...) finds them, with every split it names."""
    import yaml
    from lm_eval.tasks._yaml_loader import load_yaml

    if not path.is_file():
        raise EmbexpError(f"task file '{path}' does not exist")
    try:
        cfg = load_yaml(path, resolve_func=False)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise EmbexpError(f"task file '{path}' does not parse as YAML{where}: {problem}") from None
    except (ValueError, OSError) as e:
        text = str(e).splitlines()[0] if str(e) else type(e).__name__
        if text.startswith("Expected YAML dict"):
            text = f"it holds a {text.rsplit(' ', 1)[-1]}, not a mapping of a task's fields (task:, dataset_path:, ...)"
        raise EmbexpError(f"task file '{path}' is not an lm-eval task: {text}") from None
    name = cfg.get("group") if "group" in cfg else cfg.get("task")
    if not isinstance(name, str) or not name:
        raise EmbexpError(f"task file '{path}' names no task: lm-eval reads a task's name from 'task: NAME' (a group's "
                          f"from 'group: NAME'); it has keys {', '.join(map(str, cfg)) or 'none'}")
    if "group" not in cfg:
        check_data(path, cfg)
    return name


def check_data(path: Path, cfg: dict) -> None:
    """A task reading local files (``dataset_path`` a packaged builder such as json, or a folder): the files of
    ``dataset_kwargs.data_files`` (a path, a list, or split -> paths; globs allowed, relative to the working
    directory as datasets reads them) exist, and every split the task names is one of them."""
    source = cfg.get("dataset_path")
    kwargs = cfg.get("dataset_kwargs") or {}
    if not isinstance(source, str) or not isinstance(kwargs, dict):
        return
    if source.startswith(("/", "./", "../", "~")) and not Path(source).expanduser().exists():
        raise EmbexpError(f"task file '{path}': dataset_path '{source}' does not exist")
    if source not in LOCAL_BUILDERS:
        return  # a hub dataset: loaded (or found unreachable) before the model, by run()
    files = kwargs.get("data_files")
    if not files:
        raise EmbexpError(f"task file '{path}': dataset_path: {source} reads local files, but "
                          "dataset_kwargs.data_files names none (e.g. data_files: {validation: /data/val.jsonl})")
    by_split = files if isinstance(files, dict) else {"train": files}
    for split, paths in by_split.items():
        for p in [paths] if isinstance(paths, str) else list(paths or []):
            p = str(p)
            if "://" in p:
                continue
            found = glob.glob(os.path.expanduser(p)) if glob.has_magic(p) else Path(p).expanduser().is_file()
            if not found:
                raise EmbexpError(f"task file '{path}': the data file '{p}' of split '{split}' does not exist")
    for key in SPLITS:
        split = cfg.get(key)
        if isinstance(split, str) and split not in by_split:
            raise EmbexpError(f"task file '{path}': {key}: {split} is not among its data files' splits (it has: "
                              f"{', '.join(map(str, by_split))})")
