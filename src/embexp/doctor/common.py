"""What the checks share: a train config for one (model, method) on its task's fixture, a section's
result, the device's clock."""

from __future__ import annotations

import contextlib
import copy
import functools
import time
from dataclasses import dataclass, field

import torch
from omegaconf import OmegaConf

from embexp.core.cli import compose_train

# The task each model kind trains on (its generated fixture, in the hub's schema: no network). A decoder
# with random weights trains on task=synthetic: prompts of exactly the checked length in tokens.
TASK = {"decoder": "wmt16", "encoder": "glue"}
RANDOM = "@random"  # a model entry NAME@random: conf/model/NAME's real architecture with random weights
# model.spec of every random-weight model (doctor option spec=...: shrunk shapes for a rehearsal on a CPU)
SPEC: dict = {}


@dataclass
class Section:
    """One check's result: ``status`` pass / fail / info / skipped, the lines of the one-screen summary,
    the Markdown of the report and the figures of the JSON."""

    name: str
    status: str
    screen: list[str] = field(default_factory=list)
    markdown: list[str] = field(default_factory=list)
    data: dict = field(default_factory=dict)


def model_overrides(model: str) -> list[str]:
    """The train overrides of a model entry: ``NAME`` or ``NAME@random`` (init=random, with the fields of
    :data:`SPEC` that its architecture has)."""
    from embexp.models.random_weights import architecture_fields

    name, random = model.removesuffix(RANDOM), model.endswith(RANDOM)
    fields = architecture_fields(name) if random else {}
    spec = [f"+model.spec.{k}={v}" for k, v in SPEC.items() if k in fields]  # the fields its architecture has
    return [f"model={name}", *(["model.init=random", *spec] if random else [])]


def model_label(model: str) -> str:
    return model.removesuffix(RANDOM) + (" (random weights)" if model.endswith(RANDOM) else "")


def model_config(name: str):
    """The model config of a model entry (NAME@random: NAME's; its kind decides the task), read from conf/model."""
    from embexp.judge.backends import model_config as read

    return read(name.removesuffix(RANDOM))


def task_overrides(model: str, seq_len: int) -> list[str]:
    kind = model_config(model).kind
    if kind == "decoder" and model.endswith(RANDOM):
        return ["task=synthetic", f"task.prompt_words={seq_len}"]
    return [f"task={TASK[kind]}", "task.source=fixture"]


@functools.lru_cache(maxsize=64)
def _composed(model: str, method: str, seq_len: int, batch: int, cpu: bool, spec: tuple):
    """The composed train config (``spec``: :data:`SPEC`'s items, which model_overrides reads: part of the key)."""
    return compose_train([f"method={method}", *model_overrides(model), *task_overrides(model, seq_len),
                          f"task.fixture_size={max(4 * batch, 16)}", f"task.max_source_tokens={seq_len}",
                          "task.max_target_tokens=16", "task.max_eval_samples=8", f"trainer.batch_size={batch}",
                          f"trainer.eval_batch_size={batch}", "trainer.progress=false", "trainer.log_every=0",
                          "trainer.warmup_steps=0", "trainer.eval_every=0", "trainer.save_every=0",
                          f"trainer.cpu={str(cpu).lower()}"])


def compose(model: str, method: str, seq_len: int, batch: int, device: torch.device, *extra: str):
    """The train config of ``method`` on ``model`` as ``python -m embexp.train`` composes it, on the
    fixture of the model kind's task: prompts cut at ``seq_len`` tokens, ``batch`` rows per step;
    ``extra``: ``key=value`` overrides of plain fields (merged onto a copy: Hydra composes each
    (model, method) once, which costs a few tenths of a second)."""
    cfg = copy.deepcopy(_composed(model, method, seq_len, batch, device.type == "cpu", tuple(SPEC.items())))
    return OmegaConf.merge(cfg, OmegaConf.from_dotlist(list(extra))) if extra else cfg


def matmul_params(c) -> int:
    """N_matmul: the parameters of the backbone of ``c`` (a run.build.Components) that take part in matmuls,
    i.e. less its input table (a lookup), plus a tied output head once more (its matrix is read again)."""
    from embexp.models.loading import text_config

    tc = text_config(c.method.backbone_model)
    v, d = tc.vocab_size, tc.hidden_size
    tied = c.backbone.is_decoder and bool(getattr(tc, "tie_word_embeddings", False))
    return c.n_backbone_params - v * d + (v * d if tied else 0)


def sync(device: torch.device) -> None:
    """Wait for the device's queued work (CUDA runs asynchronously), so a clock reads finished work."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(fn, device: torch.device) -> tuple[float, object]:
    """(wall seconds, result) of one call, the device's work included."""
    sync(device)
    t0 = time.perf_counter()
    out = fn()
    sync(device)
    return time.perf_counter() - t0, out


@contextlib.contextmanager
def strict_fp32():
    """fp32 matmuls in fp32, not TF32, while a reference is computed (the trainer turns TF32 on)."""
    old = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = old


def mib(n: float) -> str:
    return f"{n / 2**20:,.1f} MiB"


def table(header: list[str], rows: list[list]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return out + ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
