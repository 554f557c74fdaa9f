"""Entry-point plumbing, the one path from a command line to a checked config, composed (or parsed) once and
validated once (what each part does: docs/architecture.md, ``core/``)."""

from __future__ import annotations

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


def compose(config_name: str, overrides: list[str]):
    """Hydra's compose of ``config_name`` from the config tree with ``overrides``, through its public API
    (``initialize_config_dir`` + ``compose``, in ``core.hydra_compat``); every call composes afresh. A bad group
    choice (:func:`check_groups`), an unknown key or any other composition error is one line. Raises
    EmbexpError."""
    from embexp.core import hydra_compat

    check_groups(overrides)
    try:
        return hydra_compat.compose(str(conf_dir()), config_name, overrides)
    except Exception as e:  # noqa: BLE001 - hydra and omegaconf raise many types; each is the user's input here
        raise EmbexpError(_compose_error(config_name, overrides, e)) from None


def _compose_error(config_name: str, overrides: list[str], e: Exception) -> str:
    """The one line for a failed compose: an unknown key names the keys its parent has (composed from the
    group choices alone, on this error path only), else Hydra's message as one line."""
    from omegaconf import OmegaConf

    from embexp.core import hydra_compat

    key = hydra_compat.unknown_key(e)
    if key is not None:
        parent, _, leaf = key.rpartition(".")
        groups = [a for a in overrides if a.split("=", 1)[0].lstrip("+~") in GROUPS]
        try:
            base = hydra_compat.compose(str(conf_dir()), config_name, groups)
        except Exception:  # noqa: BLE001 - the group choices alone fail too: Hydra's own message
            return hydra_compat.error_line(e)
        node = OmegaConf.select(base, parent) if parent else base
        if OmegaConf.is_dict(node) and leaf not in node:
            where = f" of {parent}" if parent else ""
            return f"unknown key '{key}' (valid keys{where}: {', '.join(sorted(node.keys()))})"
    return hydra_compat.error_line(e)


def checked(config_name: str, overrides: list[str]):
    """The config of a Hydra-composed command (train, eval, judge): composed once (:func:`compose`) and validated
    once (``core.config.validate``: every field's domain and the registered ``CHECKS``). Raises EmbexpError."""
    from embexp.core.config import validate

    cfg = compose(config_name, overrides)
    validate(cfg)
    return cfg


def run_dir_command(config_name: str, config_cls, usage_line: str, main) -> None:
    """``python -m embexp.<config_name> run_dir=DIR [key=value ...]`` (eval, judge): ``-h`` prints the usage;
    conf/<config_name>.yaml composed and validated once (:func:`checked`: a bad key or value is one line, exit 2),
    then ``main(cfg)`` under :func:`one_line_errors`."""
    argv = sys.argv[1:]
    if any(a in ("-h", "--help") for a in argv):
        print(usage(f"python -m embexp.{config_name}", config_cls))
        return
    if not any(a.startswith("run_dir=") for a in argv):
        die(f"missing run_dir (usage: {usage_line})")
    try:
        cfg = checked(config_name, argv)
    except EmbexpError as e:
        die(str(e))
    one_line_errors(main)(cfg)


def compose_train(overrides: list[str]):
    """The train config for these overrides, composed once and validated once exactly as ``python -m
    embexp.train`` does (:func:`checked`); the analyses, the sweep, the doctor and the tests compose through
    here."""
    from embexp.core.config import register_core_schemas

    register_core_schemas()
    from embexp.core.plugins import discover

    discover("embexp.methods")  # registers the method schemas (plugins: found by name, never a static import)
    discover("embexp.tasks")  # registers the task schemas
    return checked("train", list(overrides))


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
    """``--help`` of a dataclass-configured command: every field, its default and its help text. ``name``: an
    analysis, or the whole command (``python -m embexp.eval``)."""
    command = name if name.startswith("python ") else f"python -m embexp.analyze {name}"
    lines = [f"{command} key=value ...", ""]
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


def check_groups(argv: list[str]) -> None:
    """Group choices (``method=foo``, ``+experiment=a,b`` in a multirun) that name no file of the config tree:
    one line naming the valid ones, before Hydra composes."""
    for arg in argv:
        if arg.startswith("-") or "=" not in arg:
            continue
        key, value = arg.split("=", 1)
        key = key.lstrip("+~")
        if key not in GROUPS:
            continue
        for v in value.split(","):
            if v and v != "null" and v not in choices(key):
                raise EmbexpError(f"unknown {key} '{v}' (choose from: {', '.join(choices(key))})")


RUN_DIR = "hydra.run.dir"


def hydra_launches(argv: list[str]) -> bool:
    """Whether Hydra's app runs this train command: a multirun (-m), Hydra's own flags (--cfg, --help, ...) or
    a Hydra option other than ``hydra.run.dir`` (``hydra/launcher=...``, ``hydra.job.chdir=...``). Every other
    command is one run that ``embexp.train`` composes, checks and starts itself (:func:`train_config`)."""
    keys = [a.split("=", 1)[0].lstrip("+~") for a in argv if "=" in a]
    return any(a.startswith("-") for a in argv) or any(k.startswith("hydra") and k != RUN_DIR for k in keys)


def train_config(argv: list[str]):
    """(the checked config, its run directory) of one train command: composed and validated once
    (:func:`compose_train`); the run directory is ``hydra.run.dir`` (made absolute) or the one the config names
    (``core.config.run_name``, as conf/train.yaml tells Hydra), checked before it is made
    (``core.rundir.check_path``). Raises EmbexpError."""
    from embexp.core.config import run_name
    from embexp.core.rundir import check_path

    given = [a.split("=", 1)[1] for a in argv if a.split("=", 1)[0].lstrip("+") == RUN_DIR]
    if given and not given[-1].strip():
        raise EmbexpError(f"{RUN_DIR} is empty: name the run directory (without it: <output_root>/<task>/<model>/"
                          "<method>/seed<seed>)")
    cfg = compose_train([a for a in argv if a.split("=", 1)[0].lstrip("+") != RUN_DIR])
    target = Path(given[-1]) if given else Path(run_name(cfg.output_root, cfg.task.name, cfg.task.subset,
                                                         cfg.model.name, cfg.method.name, cfg.tag, cfg.seed))
    check_path(target)
    return cfg, Path(os.path.abspath(target))


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
