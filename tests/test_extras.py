"""The optional extras of pyproject.toml: a feature whose extra is missing stops in one line naming the extra, and
`make install` installs every extra a run can need (compress alone fetches from the network: it is left out)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from conftest import smoke
from embexp import EmbexpError

REPO = Path(__file__).resolve().parents[1]
NOT_INSTALLED = {"compress"}  # LLMLingua fetches a hub model and tiktoken's files: not part of an offline install


def test_smollm2_without_gguf_names_the_offline_extra(tmp_path, monkeypatch):
    from embexp.models import offline

    monkeypatch.setattr(offline, "CACHE", tmp_path)  # no converted copy: the conversion needs gguf
    monkeypatch.setitem(sys.modules, "gguf", None)  # import gguf raises ImportError
    with pytest.raises(EmbexpError, match=r"^model=smollm2 .*needs the package gguf: pip install 'embexp\[offline\]'"):
        offline.smollm2_path()


def test_integrated_gradients_without_captum_names_the_attribution_extra(monkeypatch):
    from embexp.methods import build_method
    from embexp.models import load_backbone
    from embexp.tasks import build_task

    cfg = smoke("method=tinyte_half", "model=tiny_llama", "task=wmt16", "method.ranking=integrated_gradients")
    method = build_method(cfg.method, load_backbone(cfg.model, num_labels=build_task(cfg.task).num_labels))
    monkeypatch.setitem(sys.modules, "captum", None)
    monkeypatch.setitem(sys.modules, "captum.attr", None)
    with pytest.raises(EmbexpError, match=r"^method.ranking=integrated_gradients needs the package captum: "
                                          r"pip install 'embexp\[attribution\]'"):
        method.setup({"train": [[1, 70, 71, 72, 2]], "eval": []})


def test_make_install_installs_every_extra():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    line = re.search(r'install -q -e "\.\[([\w,]+)\]"', (REPO / "Makefile").read_text())
    assert line, "the Makefile's install recipe has no pip install -e .[<extras>] line"
    installed = line.group(1).split(",")
    assert set(installed) <= set(extras), f"make install names no such extra: {set(installed) - set(extras)}"
    names = {Requirement(r).name for e in installed for r in extras[e]}
    missed = {e: r for e in set(extras) - set(installed) - NOT_INSTALLED for r in extras[e]
              if Requirement(r).name not in names}
    assert not missed, f"make install leaves out the packages of extras {missed}"
