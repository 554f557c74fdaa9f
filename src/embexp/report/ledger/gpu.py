"""GPU estimates of the ledger's rows that need a GPU: arithmetic, not measurements.

One GPU: an NVIDIA H100-80GB SXM. Peak dense throughput by the precision embexp's recipe for the
table runs in (conf/trainer/<paper>_paper.yaml): fp32 without tensor cores 67 TFLOP/s, tf32
494.7 TFLOP/s, bf16/fp16 989.4 TFLOP/s; HBM 3.35 TB/s. Sustained model FLOPs utilisation (MFU): 40%
for models of 1B parameters or more, 30% from 100M, 10% below (small matmuls do not fill the GPU).

- Training FLOPs: 6·N·T with every weight trained (full fine-tuning, PEMA, training from scratch),
  4·N·T for a frozen backbone with a small trainable set (TinyTE, prompt tuning, LoRA,
  Tiny-Attention, K-Token: backward through the activations, no weight gradients); N = the
  parameters in matrix multiplies (the model less its input-embedding lookup; a tied output head
  counts), T = tokens through the model. Evaluation, selection passes and judges: 2·N·T.
  Attention's own FLOPs are left out (under 10% at these lengths).
- Generation: each decode step reads the weights once: steps = rows / batch × new tokens, at
  weight bytes / (50% of 3.35 TB/s) per step.
- Peak memory: weights (4 B per parameter: embexp loads fp32 by default) + gradients and AdamW
  state of the trainable parameters (4 + 8 B each) + activations ≈ 34·s·b·d bytes per layer at
  16 bit (Korthikanti et al., 2022, attention scores not stored: SDPA), ×2 in fp32/tf32 + logits
  and their gradient in fp32 (8·b·s·V B) for language-model heads; evaluation-only runs: weights +
  the KV cache of one decode batch.
"""

from __future__ import annotations

from dataclasses import dataclass

GPU = "one H100-80GB SXM"
PEAK = {"fp32": 67e12, "tf32": 494.7e12, "bf16": 989.4e12, "fp16": 989.4e12}
HBM, HBM_EFF, GPU_GB = 3.35e12, 0.5, 80


def mfu(n: float) -> float:
    return 0.40 if n >= 1e9 else 0.30 if n >= 1e8 else 0.10


def sci(x: float) -> str:
    return f"{x:.2e}".replace("e+0", "e").replace("e+", "e")


def num(x: float) -> str:
    return f"{x:,.0f}" if x >= 100 else f"{x:g}"


@dataclass(frozen=True)
class Arch:
    """What an estimate needs of a model."""

    name: str
    n: int  # all parameters
    n_matmul: int  # parameters in matrix multiplies
    d: int
    layers: int
    vocab: int  # output vocabulary of a language-model head (0: a classification head)
    kv: int  # key/value width per layer (KV cache)


@dataclass(frozen=True)
class Work:
    """Tokens of one kind: rows x tokens per row x times (epochs, passes)."""

    what: str
    rows: float
    tokens: float
    times: float = 1

    @property
    def total(self) -> float:
        return self.rows * self.tokens * self.times

    def text(self) -> str:
        times = f" × {num(self.times)}" if self.times != 1 else ""
        return f"{self.what}: {num(self.rows)} × {num(self.tokens)} tokens{times} = {sci(self.total)}"


@dataclass(frozen=True)
class Run:
    """One run as embexp runs it (or `copies` identical runs: seeds)."""

    label: str
    arch: Arch
    precision: str
    trainable: int = 0
    full: bool = False
    train: tuple = ()  # Work
    evals: tuple = ()  # Work, forward only
    decode: tuple = ()  # Work: rows x new tokens per row, `times` = decode batch (divides)
    seq: int = 0  # tokens per training sequence
    batch: int = 1
    copies: int = 1
    weight_bytes: int = 4  # 2: a judge loaded in bf16 (judge.dtype=auto on a GPU)
    key: str = ""  # the same run in two estimates (a table's row and another's) is counted once by this key

    @property
    def ident(self) -> str:
        return self.key or f"{self.arch.name}: {self.label}"

    def flops(self) -> tuple[float, float]:
        a = self.arch
        k = 6 if self.full else 4
        return (k * a.n_matmul * sum(w.total for w in self.train), 2 * a.n_matmul * sum(w.total for w in self.evals))

    def seconds(self) -> tuple[float, float]:
        tr, ev = self.flops()
        compute = (tr + ev) / (PEAK[self.precision] * mfu(self.arch.n))
        steps = sum(w.rows / w.times * w.tokens for w in self.decode)
        return compute, steps * self.arch.n * self.weight_bytes / (HBM * HBM_EFF)

    def hours(self) -> float:
        return self.copies * sum(self.seconds()) / 3600

    def memory(self) -> tuple[float, list[str]]:
        """(peak GB, the terms)."""
        a = self.arch
        terms = [("weights", a.n * self.weight_bytes, f"{sci(a.n)} × {self.weight_bytes} B")]
        if self.train:
            terms.append(("grads + AdamW", self.trainable * 12, f"{num(self.trainable)} trainable × 12 B"))
            per = 34 * (2 if self.precision in ("fp32", "tf32") else 1)
            terms.append(
                (
                    "activations",
                    a.layers * self.batch * self.seq * a.d * per,
                    f"{a.layers} layers × {self.batch} × {num(self.seq)} tokens × {a.d} × {per} B",
                )
            )
            if a.vocab:
                terms.append(
                    (
                        "logits",
                        8 * self.batch * self.seq * a.vocab,
                        f"8 B × {self.batch} × {num(self.seq)} × {num(a.vocab)}",
                    )
                )
        elif self.decode:
            w = self.decode[0]
            ctx = self.seq or 2048
            terms.append(
                (
                    "KV cache",
                    2 * a.layers * a.kv * ctx * w.times * 4,
                    f"2 × {a.layers} layers × {a.kv} × {num(ctx)} tokens × {num(w.times)} rows × 4 B",
                )
            )
        gb = sum(t[1] for t in terms) / 1e9
        return gb, [f"{name} {b / 1e9:.1f} GB ({how})" for name, b, how in terms]

    def lines(self) -> str:
        """The arithmetic of this run, one sentence."""
        tr, ev = self.flops()
        compute, decode = self.seconds()
        peak, rate = PEAK[self.precision] / 1e12, mfu(self.arch.n)
        k = 6 if self.full else 4
        out = [w.text() for w in (*self.train, *self.evals)]
        if tr:
            out.append(
                f"train {k} × N {sci(self.arch.n_matmul)} × T {sci(sum(w.total for w in self.train))} = {sci(tr)} FLOP"
            )
        if ev:
            out.append(f"forward-only 2 × N × {sci(sum(w.total for w in self.evals))} = {sci(ev)} FLOP")
        out.append(f"{sci(tr + ev)} FLOP / ({rate:.0%} × {peak:g} TFLOP/s {self.precision}) = {hrs(compute / 3600)} h")
        for w in self.decode:
            out.append(
                f"decode {num(w.rows)} rows / batch {num(w.times)} × {num(w.tokens)} new tokens × "
                f"{self.arch.n * self.weight_bytes / 1e9:.1f} GB / {HBM * HBM_EFF / 1e12:.3g} TB/s "
                f"= {hrs(decode / 3600)} h"
            )
        gb, terms = self.memory()
        copies = f" (× {self.copies} runs)" if self.copies > 1 else ""
        return (
            f"*{self.label}*{copies}: " + "; ".join(out) + f"; = {hrs(self.hours() / self.copies)} GPU-h per run; "
            "peak ≈ " + " + ".join(terms) + f" = {gb:.1f} GB."
        )


def hrs(x: float) -> str:
    return f"{x:.2g}" if x < 10 else f"{x:,.0f}"


class Estimate:
    """The runs one ledger row needs, built on first use (building reads parameter counts); rows that
    share runs share the key and the object (counted once)."""

    def __init__(self, key: str, build, note: str = ""):
        self.key, self.build, self.note, self.ref = key, build, note, ""
        self._runs = None

    @property
    def runs(self) -> list:
        if self._runs is None:
            self._runs = list(self.build())
        return self._runs

    def hours(self) -> float:
        return sum(r.hours() for r in self.runs)

    def peak(self) -> float:
        return max((r.memory()[0] for r in self.runs), default=0.0)

    def summary(self) -> str:
        if not self.runs:
            return f"{self.note} [{self.ref or self.key}]"
        h, gb = self.hours(), self.peak()
        hours = hrs(h)
        fits = "" if gb <= GPU_GB else f"; over {GPU_GB} GB: model.dtype=bfloat16 or more GPUs"
        return (
            f"≈ {hours} GPU-h, ≈ {gb:.2g} GB peak{fits} [{self.ref or self.key}]"
            if gb < 10
            else f"≈ {hours} GPU-h, ≈ {gb:.0f} GB peak{fits} [{self.ref or self.key}]"
        )

    def text(self) -> str:
        if not self.runs:
            return self.note
        body = " ".join(r.lines() for r in self.runs)
        return f"{body}{' ' + self.note if self.note else ''} Total ≈ {hrs(self.hours())} GPU-h."
