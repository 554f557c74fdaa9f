"""The prepared GPU run (scripts/gpu_check.sh) rehearsed on this CPU under a GPU node's conditions
(scripts/rehearse_gpu_check.sh): a fresh venv holding only the PyTorch GPU image's packages, the wheelhouse
installed with pip --no-index, no hub cache, the papers' shapes shrunk. It needs PyPI for the venv and the
wheelhouse and takes minutes: make test-slow."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
@pytest.mark.serial
def test_the_prepared_gpu_check_runs_end_to_end_from_the_wheelhouse(tmp_path):
    out = tmp_path / "report"
    res = subprocess.run(["bash", str(ROOT / "scripts" / "rehearse_gpu_check.sh"), str(out)], capture_output=True,
                         text=True, timeout=3600)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    rep = json.loads((out / "report.json").read_text())
    assert rep["passed"] and rep["settings"]["random"] and "random weights" in rep["header"][0]
    status = {k: v["status"] for k, v in rep["sections"].items()}
    assert status == {"environment": "info", "numerics": "pass", "memory": "pass", "speed": "info",
                      "fsdp": "skipped"}
    memory = rep["sections"]["memory"]["rows"]
    assert {r["method"] for r in memory} >= {"tinyte_full", "lora", "full_ft", "ktoken", "pema", "prompt_tuning"}
    assert all(r["model"] == "llama31@random" and r["weights"] == "bfloat16" for r in memory)
    assert (out / "report.md").is_file() and (out / "pip-freeze.txt").is_file()
    assert "omegaconf" not in (out / "pip-freeze.txt").read_text().lower()  # the venv's own: the image's list only
