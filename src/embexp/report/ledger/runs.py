"""The runs behind the ledger's GPU rows, as embexp's recipes run them (conf/experiment, conf/trainer,
conf/task), and their GPU estimates: arithmetic, not measurements (the rest of this docstring is
docs/reproduction.md's "How the GPU estimates are made").

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

import math
from dataclasses import dataclass
from functools import lru_cache

from embexp.report.ledger import sources

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


@lru_cache(maxsize=None)
def arch(model: str) -> Arch:
    """The shape of a stored architecture (models/specs.py) for an estimate."""
    from embexp.models.specs import SPECS

    c = sources.spec_config(model)
    decoder = SPECS[model]["kind"] == "decoder"
    d = getattr(c, "hidden_size", None) or c.n_embd
    layers = getattr(c, "num_hidden_layers", None) or c.n_layer
    emb_dim = getattr(c, "embedding_size", d)
    total = sources.count(model, "method=full_ft", num_labels=0)["total"]
    table = c.vocab_size * emb_dim
    tied = bool(getattr(c, "tie_word_embeddings", False)) and decoder
    heads = getattr(c, "num_attention_heads", None) or c.n_head
    kv = (getattr(c, "num_key_value_heads", None) or heads) * (getattr(c, "head_dim", None) or d // heads)
    return Arch(model, total, total - table + (table if tied else 0), d, layers, c.vocab_size if decoder else 0, kv)

# Tasks: sizes are the hub datasets' (their cards); tokens per row are estimates (stated with each task):
# ≈1.3 subword tokens per English word, ≈2 per Czech word (the TinyTE paper's footnote 2), plus the prompt
# template. Each estimate says which numbers it used.
@dataclass(frozen=True)
class Task:
    """One task as a recipe trains and evaluates it."""

    name: str
    train: int  # training rows
    tokens: int  # tokens per training row (prompt + target)
    eval: int  # evaluation rows
    prompt: int  # tokens per evaluation prompt
    new: int  # decode budget per evaluation row (0: scored without generating)
    seq: int  # the longest training sequence (activation memory)
    select: int = 0  # rows of the periodic selection loss
    choices: int = 0  # log-likelihood multiple choice: continuations scored per row (no decode)


TASKS = {
    # CNN/DM 3.0.0: 287,113 train / 13,368 validation / 11,490 test (capped at 2,500); article 781 + highlights 56 words
    "cnndm": Task("CNN/DM", 287_113, 1_100, 2_500, 1_030, 256, 2_208, select=2_500),
    # WMT16 cs-en: 997,240 train, newstest2015 (2,656) selects, newstest2016 (2,999) is reported;
    # ≈20 Czech + 23 English words
    "wmt16": Task("WMT16 cs-en", 997_240, 110, 2_999, 70, 256, 384, select=2_656),
    "boolq": Task("BoolQ", 9_427, 150, 3_270, 140, 32, 512, select=50, choices=2),
    "cb": Task("CB", 250, 90, 56, 85, 32, 512, select=50, choices=3),
    "copa": Task("COPA", 400, 25, 100, 20, 32, 512, select=50, choices=2),
    "rte_sg": Task("RTE", 2_490, 80, 277, 75, 32, 512, select=50, choices=2),
    "wic": Task("WiC", 5_428, 45, 638, 40, 32, 512, select=50, choices=2),
    # Alpaca: 52,002 rows, 2,500 held out for evaluation and 500 for selection; ≈130 words per row + template
    "alpaca": Task("Alpaca", 49_002, 170, 2_500, 70, 512, 1_024, select=500),
    # BeaverTails 30k_train: ≈15,000 unsafe rows of 27,186; 1,000 test requests
    "bsd": Task("BSD", 15_000, 150, 1_000, 40, 512, 1_024, select=500),
    "advbench": Task("AdvBench", 0, 0, 520, 30, 512, 0),
}
SUPERGLUE = ("boolq", "copa", "cb", "rte_sg", "wic")
TINYTE_BATCH, TINYTE_EVERY, DECODE_BATCH = 32, 100, 16  # conf/trainer/tinyte_paper.yaml: 1 x 32, eval_every 100


def select_passes(task: Task, epochs: float, batch: int, every: int) -> int:
    """Periodic selection-loss passes: one per `every` optimizer steps."""
    return math.floor(task.train * epochs / batch / every)


def tinyte_run(label: str, model: str, task: str, trainable: int, epochs: float = 1, train: bool = True) -> Run:
    """A TinyTE-recipe run (tf32, batch 1 x 32, selection loss every 100 steps, greedy decoding)."""
    t, a = TASKS[task], arch(model)
    works, evals = (), [Work(f"eval prompts ({t.name})", t.eval, t.prompt)]
    if train and t.train:
        works = (Work(f"train ({t.name})", t.train, t.tokens, epochs),)
        passes = select_passes(t, epochs, TINYTE_BATCH, TINYTE_EVERY)
        if passes and t.select:
            evals.append(Work("selection loss", t.select, t.tokens, passes))
    decode = (Work("decode", t.eval, t.new, DECODE_BATCH),) if t.new else ()
    return Run(label, a, "tf32", trainable, False, works, tuple(evals), decode, seq=t.seq, batch=1)


def loglik_run(label: str, model: str, task: str) -> Run:
    """Zero-shot log-likelihood multiple choice (lm-eval prompts): a forward pass per choice."""
    t, a = TASKS[task], arch(model)
    return Run(label, a, "tf32", evals=(Work(f"{t.name} choices", t.eval * t.choices, t.prompt + 5),), seq=t.prompt)


def judge_arch(name: str) -> Arch:
    """The judges' sizes (hub cards): HarmBench's Llama-2-13B classifier, T5-XXL TRUE NLI."""
    if name == "harmbench":
        return Arch("cais/HarmBench-Llama-2-13b-cls", 13_015_864_320, 12_852_024_320, 5_120, 40, 32_000, 5_120)
    return Arch("google/t5_xxl_true_nli_mixture", 11_307_321_344, 11_174_000_000, 4_096, 48, 0, 4_096)


def judge_run(label: str, judge: str, rows: int, tokens: int) -> Run:
    """A judge scoring `rows` texts of `tokens` tokens, one forward pass each, weights in bf16."""
    return Run(label, judge_arch(judge), "bf16", evals=(Work("judged rows", rows, tokens),), seq=tokens, weight_bytes=2)


_EST: dict = {}


def estimate(key: str, build, note: str = "") -> Estimate:
    """One Estimate per key (rows that need the same runs share it)."""
    if key not in _EST:
        _EST[key] = Estimate(key, build, note)
    return _EST[key]


def derived(key: str, note: str) -> Estimate:
    """The estimate of a GPU row with no run of its own (a mean or a ratio of other rows): its note."""
    return estimate(key, lambda: [], note)


# GLUE: training rows (PEMA Table 7), validation rows (MNLI: matched + mismatched), tokens per row as a batch
# pads them (≈ 1.5 × the mean length of the pair, capped at 128; ours)
GLUE = {
    "cola": (8_551, 1_043, 20),
    "mnli": (392_702, 19_647, 60),
    "mrpc": (3_668, 408, 70),
    "qnli": (104_743, 5_463, 75),
    "qqp": (363_846, 40_430, 50),
    "rte": (2_490, 277, 110),
    "sst2": (67_349, 872, 35),
    "stsb": (5_749, 1_500, 45),
    "wnli": (635, 71, 55),
}


def encoder_arch(name: str, n: int, table: int, d: int, layers: int) -> Arch:
    return Arch(name, n, n - table, d, layers, 0, d)


def glue_run(
    label: str,
    arch: Arch,
    task: str,
    precision: str,
    trainable: int,
    full: bool,
    epochs: float,
    batch: int,
    copies: int = 1,
    select: tuple = (0, 0),
    key: str = "",
) -> Run:
    """An encoder fine-tuned on a GLUE task; `select` = (rows, passes) of a periodic selection pass."""
    train, val, tok = GLUE[task]
    evals = [Work(f"validation ({task})", val, tok)]
    if select[1]:
        evals.append(Work("selection passes", select[0], tok, select[1]))
    return Run(
        label,
        arch,
        precision,
        trainable,
        full,
        (Work(f"train ({task})", train, tok, epochs),),
        tuple(evals),
        seq=min(512, 2 * tok),
        batch=batch,
        copies=copies,
        key=key,
    )
