"""Analyses behind the papers' tables, run with ``python -m embexp.analyze <name> key=value ...``.

Each module exposes a ``Config`` dataclass (help text on every field) and ``run(cfg)``. This file
holds what they share: composing the real train config (the same Hydra tree and compose API the
CLI and the tests use), finding finished run directories, and the display names of methods.
"""

from __future__ import annotations

import glob
import json
from pathlib import Path

from omegaconf import OmegaConf

from embexp import EmbexpError, cli
from embexp.results import CONFIG, METRICS, is_complete


def compose_train(overrides: list[str]):
    """The train config for these overrides, composed exactly as ``python -m embexp.train`` does."""
    from hydra import compose, initialize_config_dir

    from embexp.config import register_core_schemas

    register_core_schemas()
    import embexp.methods  # noqa: F401  (registers the method schemas)
    import embexp.tasks  # noqa: F401  (registers the task schemas)

    for arg in overrides:  # unknown group choices: one line naming the valid ones
        key, _, value = arg.partition("=")
        key = key.lstrip("+~")
        if key in cli.GROUPS and value and value != "null" and value not in cli.choices(key):
            raise EmbexpError(f"unknown {key} '{value}' (choose from: {', '.join(cli.choices(key))})")
    try:
        with initialize_config_dir(config_dir=str(cli.conf_dir()), version_base=None):
            return compose("train", overrides=list(overrides))
    except Exception as e:  # hydra/omegaconf raise many types; keep the first line
        raise EmbexpError(f"cannot compose {' '.join(overrides)}: {str(e).splitlines()[0]}") from None


def debug_output_root(debug: str, default: str = "outputs") -> str:
    """The output_root a conf/debug preset sets (smoke -> outputs/smoke); `default` when none."""
    if not debug:
        return default
    path = cli.conf_dir() / "debug" / f"{debug}.yaml"
    if not path.is_file():
        raise EmbexpError(f"unknown debug '{debug}' (choose from: {', '.join(cli.choices('debug'))})")
    return str(OmegaConf.load(path).get("output_root", default))


def run_dirs(spec: str) -> list[Path]:
    """Complete run directories named by `spec`: a run directory, a folder holding runs (searched
    recursively), or a glob of either."""
    roots = [Path(p) for p in sorted(glob.glob(spec))] if any(c in spec for c in "*?[") else [Path(spec)]
    found: dict[str, Path] = {}
    for root in roots:
        if not root.exists():
            continue
        for status in ([root / "status.json"] if (root / "status.json").is_file() else sorted(root.rglob("status.json"))):
            if is_complete(status.parent):
                found[str(status.parent.resolve())] = status.parent
    return list(found.values())


def load_run(run_dir: Path) -> dict:
    """metrics.json of a finished run, plus run_dir, its resolved config (dict) and tag."""
    m = json.loads((Path(run_dir) / METRICS).read_text())
    cfg = OmegaConf.to_container(OmegaConf.load(Path(run_dir) / CONFIG)) if (Path(run_dir) / CONFIG).is_file() else {}
    m.update(run_dir=str(run_dir), config=cfg, tag=cfg.get("tag", ""))
    m["task_name"] = cfg.get("task", {}).get("name", m.get("task", ""))
    m["subset"] = cfg.get("task", {}).get("subset", "")
    return m


def collect_runs(spec: str) -> list[dict]:
    return [load_run(d) for d in run_dirs(spec)]


# Display names in the tables: the TinyTE paper's spelling for its methods, each paper's own name
# for the others; a method missing here shows its config name.
LABELS = {
    "zero_shot": "Base model", "full_ft": "Full FT", "emb_tuning": "Emb. Tuning", "lora": "LoRA (r=8)",
    "prompt_tuning": "PromptT", "tinyte_full": "TinyTE-full", "tinyte_half": "TinyTE-half",
    "tinyte_gated": "TinyTE-gated", "tinyte_hybrid": "TinyTE-hybrid",
    "head_only": "Head only", "pema": "PEMA", "pete": "PETE", "tinyattn": "Tiny-Attention",
    "ktoken": "K-Token merging", "prompt_compress": "Prompt compression", "repeat_prompt": "Repeating the question",
}


def method_label(method: str, tag: str = "") -> str:
    """'prompt_tuning' + tag 'tk2' -> 'PromptT (tk=2)'; other tags are appended in brackets."""
    base = LABELS.get(method, method)
    if tag.startswith("tk") and tag[2:].isdigit():
        return f"{base} (tk={tag[2:]})"
    return f"{base} [{tag}]" if tag else base


def markdown(rows: list[dict], columns: list[str], title: str = "") -> str:
    """The Markdown that results.write_table writes, without writing files."""
    fmt = lambda v: f"{v:.2f}" if isinstance(v, float) else ("" if v is None else str(v))  # noqa: E731
    lines = ([f"### {title}", ""] if title else []) + ["| " + " | ".join(columns) + " |", "|" + "|".join("---" for _ in columns) + "|"]
    return "\n".join(lines + ["| " + " | ".join(fmt(r.get(c)) for c in columns) + " |" for r in rows]) + "\n"
