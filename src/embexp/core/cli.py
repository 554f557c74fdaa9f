"""Entry-point plumbing, the one path from a command line to a checked config: find the config tree,
check group choices early, compose the train config (:func:`compose_train`), parse the key=value
arguments of the analyses, reports and the doctor (:func:`parse`, :func:`usage`), print one-line errors."""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import functools
import logging
import os
import sys
import warnings
from pathlib import Path

from embexp import EmbexpError

GROUPS = ("method", "model", "task", "trainer", "experiment", "debug")


def conf_dir() -> Path:
    """The Hydra config tree: $EMBEXP_CONF, else conf/ of the source checkout."""
    env = os.environ.get("EMBEXP_CONF")
    d = Path(env) if env else Path(__file__).resolve().parents[3] / "conf"
    if not (d / "train.yaml").is_file():
        die(f"config tree not found at {d} (set EMBEXP_CONF to the embexp conf/ folder)")
    return d


def choices(group: str) -> list[str]:
    return sorted(p.stem for p in (conf_dir() / group).glob("*.yaml"))


# (config, group choices, what the tree is made of) -> the composed tree, never handed out; the most recently
# used 256 (~110 KB each), so that a long sweep's process does not keep every command's tree
_TREES: collections.OrderedDict = collections.OrderedDict()


def compose(config_name: str, overrides: list[str]):
    """Hydra's compose of ``config_name`` from the config tree (its public API: ``initialize_config_dir``
    and ``compose``), each caller getting its own copy to change. The sweep, the studies, the doctor and
    the tests compose thousands of override lists that differ only in values (``trainer.lr=...``), at
    ~0.15 s a Hydra compose, so Hydra composes each distinct list of group choices (``method=``,
    ``model=``, ``+experiment=``) once per process, and the value overrides are applied to a copy of that
    tree the way Hydra applies them after composing (``OmegaConf.update(cfg, key, value, merge=True)`` on
    the struct tree, in order, values parsed by Hydra's own override parser): ~5 ms. An override that is
    anything else (``+key=``, ``~key``, ``++key=``, ``key@package=``, ``hydra.*``), or one that fails to
    apply, goes to Hydra's compose of the whole list, which gives the result or Hydra's own error.
    The cache key holds everything the tree is made of: the config folder with every file's modification
    time and size (an edited or added file composes afresh), the schemas in Hydra's ConfigStore, and the
    group choices; ``${oc.env:...}`` stays an interpolation, resolved when read. A failed compose is not
    kept: it raises again on the next call."""
    import copy

    from omegaconf import OmegaConf

    d = str(conf_dir())
    split = _split_overrides(d, overrides)
    if split is not None:
        groups, values = split
        try:
            cfg = copy.deepcopy(_compose_cached(d, config_name, groups))
            for key, value in values:
                OmegaConf.update(cfg, key, value, merge=True)
            return cfg
        except Exception:  # noqa: BLE001 - Hydra composes the whole list again: its result or its own error
            pass
    return copy.deepcopy(_compose_cached(d, config_name, list(overrides)))


def _split_overrides(d: str, overrides: list[str]):
    """(group choices, [(key, value)] of plain value overrides), as Hydra sorts them (a key naming a config
    group whose value is not a dict chooses from that group), or None where the list holds anything
    the fast path does not follow."""
    from hydra.core.config_store import ConfigStore
    from hydra.core.override_parser.overrides_parser import OverridesParser

    try:
        parsed = OverridesParser.create().parse_overrides(list(overrides))
    except Exception:  # noqa: BLE001 - Hydra's compose reports the syntax error
        return None
    groups, values = [], []
    for line, o in zip(overrides, parsed):
        if o.is_hydra_override() or o.is_sweep_override() or o.package is not None:
            return None
        node = ConfigStore.instance().repo
        for part in o.key_or_group.split("/"):
            node = node.get(part) if isinstance(node, dict) else None
        value = o.value()
        if (os.path.isdir(os.path.join(d, o.key_or_group)) or isinstance(node, dict)) and not isinstance(value, dict):
            groups.append(line)
        elif o.is_add() or o.is_delete() or o.is_force_add() or "/" in o.key_or_group:
            return None
        else:
            values.append((o.key_or_group, value))
    return groups, values


def _compose_cached(d: str, config_name: str, overrides: list[str]):
    """Hydra's compose of these overrides, kept (see :func:`compose`); the caller copies it."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.config_store import ConfigStore

    files = []
    folders = [d]
    while folders:
        with os.scandir(folders.pop()) as entries:
            for e in entries:
                if e.is_dir():
                    folders.append(e.path)
                else:
                    st = e.stat()
                    files.append((e.path, st.st_mtime_ns, st.st_size))

    def key():
        schemas = ((g, len(v) if isinstance(v, dict) else 1) for g, v in ConfigStore.instance().repo.items())
        return config_name, tuple(overrides), d, tuple(sorted(files)), tuple(sorted(schemas))

    k = key()
    if k in _TREES:
        _TREES.move_to_end(k)
    else:
        with initialize_config_dir(config_dir=d, version_base=None):
            tree = hydra_compose(config_name, overrides=list(overrides))
        k = key()  # again: a process's first compose registers Hydra's own schemas
        _TREES[k] = tree
        if len(_TREES) > 256:
            _TREES.popitem(last=False)
    return _TREES[k]


def compose_train(overrides: list[str]):
    """The train config for these overrides, composed and validated exactly as ``python -m embexp.train``
    does (the analyses, the sweep, the doctor and the tests compose through here)."""
    from embexp.core.config import register_core_schemas, validate

    register_core_schemas()
    from embexp.core.plugins import discover

    discover("embexp.methods")  # registers the method schemas (plugins: found by name, never a static import)
    discover("embexp.tasks")  # registers the task schemas

    for arg in overrides:  # unknown group choices: one line naming the valid ones
        key, _, value = arg.partition("=")
        key = key.lstrip("+~")
        if key in GROUPS and value and value != "null" and value not in choices(key):
            raise EmbexpError(f"unknown {key} '{value}' (choose from: {', '.join(choices(key))})")
    try:
        cfg = compose("train", list(overrides))
    except Exception as e:  # hydra/omegaconf raise many types; keep the first line
        raise EmbexpError(f"cannot compose {' '.join(overrides)}: {str(e).splitlines()[0]}") from None
    validate(cfg)  # every field's domain and the method's model kinds, as the CLI checks them
    return cfg


def parse(config_cls, args: list[str], check: bool = True):
    """Dot-list overrides (key=value) merged onto a dataclass schema (an analysis', a report's, the
    doctor's), every field inside its domain (``check=False``: the caller normalises a value first, then
    validates); one-line errors naming the valid keys."""
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    from embexp.core.config import validate

    try:
        cfg = OmegaConf.merge(OmegaConf.structured(config_cls), OmegaConf.from_dotlist(args))
    except OmegaConfBaseException as e:
        raise EmbexpError(_parse_error(config_cls, args, e)) from None
    if check:
        validate(cfg)
    return cfg


TYPE_WORDS = {"int": "an integer", "float": "a number", "bool": "true or false", "str": "text", "list": "a list",
              "list[int]": "a list of integers, e.g. [0,1]", "list[str]": "a list of names, e.g. [a,b]"}


def _parse_error(config_cls, args: list[str], e) -> str:
    """The one line for a dot-list that does not fit the schema: a value of the wrong type names the field, the
    value and what the field takes (its type and domain); an unknown key names the valid keys."""
    from omegaconf.errors import ConfigKeyError

    from embexp.core.config import domain_text

    fields = {fl.name: fl for fl in dataclasses.fields(config_cls)}
    key = str(getattr(e, "full_key", "") or "")
    fl = fields.get(key.split("[")[0].split(".")[0])
    if fl is None or isinstance(e, ConfigKeyError):
        return f"{str(e).splitlines()[0]} (valid keys: {', '.join(fields)})"
    given = next((a.split("=", 1)[1] for a in reversed(args) if a.split("=", 1)[0] == fl.name), "")
    typ = str(fl.type).removeprefix("Optional[").removesuffix("]") if str(fl.type).startswith("Optional[") \
        else str(fl.type)
    domain = domain_text(fl.metadata) if "choices" in fl.metadata or "range" in fl.metadata else ""
    each = "each " if typ.startswith("list") else ""
    if given == "":  # key= reads as null, which the field does not take
        return f"{fl.name}= (empty) is not {TYPE_WORDS.get(typ, typ)}" + (f" (valid: {domain})" if domain else "") + \
            (f"; for empty text: {fl.name}=''" if typ == "str" else "")
    return f"{fl.name}={given} is not {TYPE_WORDS.get(typ, typ)}" + (f" (valid: {each}{domain})" if domain else "")


def usage(name: str, config_cls) -> str:
    """``--help`` of a dataclass-configured command: every field, its default and its help text."""
    lines = [f"python -m embexp.analyze {name} key=value ...", ""]
    for fl in dataclasses.fields(config_cls):
        if fl.default is not dataclasses.MISSING:
            default = fl.default
        else:
            default = fl.default_factory() if fl.default_factory is not dataclasses.MISSING else ""
        lines.append(f"  {fl.name}={default!s:<24} {fl.metadata.get('help', '')}")
    return "\n".join(lines)


def die(message: str, code: int = 2) -> None:
    print(f"embexp: error: {message}", file=sys.stderr)
    sys.exit(code)


def warn(message: str) -> None:
    """One warning line on stderr (a skipped record, a fall-back), in the format of :func:`die`."""
    print(f"embexp: warning: {message}", file=sys.stderr)


def check_overrides(argv: list[str]) -> None:
    """Reject unknown group choices (method=foo) with one line naming the valid ones."""
    for arg in argv:
        if arg.startswith("-") or "=" not in arg:
            continue
        key, value = arg.split("=", 1)
        key = key.lstrip("+~")
        if key not in GROUPS:
            continue
        for v in value.split(","):
            if v and v != "null" and v not in choices(key):
                die(f"unknown {key} '{v}' (choose from: {', '.join(choices(key))})")


def check_compose(config_name: str, argv: list[str]) -> None:
    """Compose once before Hydra does, so a typo (trainer.lrr=1) or a wrong type is one line
    naming the bad key and the valid ones, not Hydra's multi-line report. Skipped for sweeps."""
    if any(a in ("-m", "--multirun") or a.startswith("--") for a in argv):
        return
    overrides = [a for a in argv if "=" in a and not a.lstrip("+~").startswith("hydra.")]
    from omegaconf import OmegaConf

    def attempt(ovr):
        return compose(config_name, ovr)

    try:
        composed = attempt(overrides)
    except Exception as e:  # hydra/omegaconf raise several types; all are user input errors here
        text = f"{e}\n{e.__cause__ or ''}"
        skip = ("full_key", "object_type", "reference_type", "Set the environment")
        lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.strip().startswith(skip)]
        message = ": ".join(dict.fromkeys(lines[:3]))
    else:
        if config_name == "train":
            from embexp.core.config import validate

            try:
                validate(composed)
            except EmbexpError as e:
                die(str(e))
        return
    group_keys = [a for a in overrides if a.split("=", 1)[0].lstrip("+~") in GROUPS]
    for bad in overrides:
        key = bad.split("=", 1)[0].lstrip("+~")
        if "." not in key:
            continue
        parent, leaf = key.rsplit(".", 1)
        try:
            base = attempt(group_keys)
        except Exception:
            break
        node = OmegaConf.select(base, parent)
        if OmegaConf.is_dict(node) and leaf not in node:
            die(f"unknown key '{key}' (valid keys of {parent}: {', '.join(sorted(node.keys()))})")
    die(message)


def check_run_dir(argv: list[str]) -> None:
    """The run directory (hydra.run.dir, else the one the config names) can be made and written, checked
    before Hydra creates it (``core.rundir.check_path``): a path through a file, a read-only parent, a name the
    filesystem refuses, a symlink on the way are one line. Skipped for sweeps and Hydra's own flags (--help,
    --cfg), as :func:`check_compose` is."""
    if any(a in ("-m", "--multirun") or a.startswith("--") for a in argv):
        return
    given = [a.split("=", 1)[1] for a in argv if a.split("=", 1)[0].lstrip("+") == "hydra.run.dir"]
    if given:
        target = Path(given[-1])
    else:
        from embexp.core.config import run_name

        try:
            cfg = compose_train([a for a in argv if "=" in a and not a.lstrip("+~").startswith("hydra.")])
        except EmbexpError as e:
            die(str(e))
        target = Path(run_name(cfg.output_root, cfg.task.name, cfg.task.subset, cfg.model.name,
                               cfg.method.name, cfg.tag, cfg.seed))
    from embexp.core.rundir import check_path

    try:
        check_path(target)
    except EmbexpError as e:
        die(str(e))


def quiet_libraries() -> None:
    import transformers

    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    logging.getLogger("accelerate").setLevel(logging.WARNING)
    warnings.filterwarnings("ignore", category=UserWarning, module="torch")


def setup_logging(run_dir: Path | None, is_main: bool) -> None:
    log = logging.getLogger("embexp")
    log.setLevel(logging.INFO if is_main else logging.WARNING)
    log.propagate = False
    log.handlers.clear()
    fmt = logging.Formatter("[%(asctime)s] %(message)s", "%H:%M:%S")
    h = logging.StreamHandler(sys.stderr)
    h.setFormatter(fmt)
    log.addHandler(h)
    if run_dir is not None and is_main:
        run_dir.mkdir(parents=True, exist_ok=True)
        try:
            fh = LogFile(run_dir / "train.log")
        except OSError as e:
            warn(f"cannot write {run_dir / 'train.log'}: {e.strerror or e}; the log goes to stderr only")
            return
        fh.setFormatter(fmt)
        log.addHandler(fh)


class LogFile(logging.FileHandler):
    """A run's train.log. A write that fails (a full disk, a quota) is one warning line, once, and the log goes
    on to stderr only: not logging's "--- Logging error ---" traceback at every line."""

    failed = False

    def emit(self, record) -> None:
        if not self.failed:
            super().emit(record)

    def flush(self) -> None:
        if not self.failed:
            super().flush()

    def handleError(self, record) -> None:  # noqa: N802 (logging's name)
        if self.failed:
            return
        self.failed = True
        e = sys.exc_info()[1]
        with contextlib.suppress(Exception):  # its unwritten buffer goes with it
            self.stream.close()
        warn(f"cannot write {self.baseFilename}: {getattr(e, 'strerror', None) or e}; the log goes to stderr only")


def one_line_errors(fn):
    """Turn EmbexpError (and config errors) raised by an entry point into one stderr line, exit 1 (or the
    error's ``exit_code``: 75 for a run directory in use, ``embexp.RunBusy``)."""

    @functools.wraps(fn)
    def wrapper(*a, **kw):
        try:
            return fn(*a, **kw)
        except EmbexpError as e:
            die(str(e), code=getattr(e, "exit_code", 1))
        except KeyboardInterrupt:  # Ctrl-C before or after a run's record: one line, the shell's code for SIGINT
            die("interrupted (Ctrl-C)", code=130)

    return wrapper
