"""The runs behind the ledger's GPU rows and their GPU estimates: arithmetic, not measurements, and one
function for every paper (``estimate``) over a table of run sets, ledger/estimates/*.csv (the rest of this
docstring is docs/reproduction.md's "How the GPU estimates are made").

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

import csv
import re
from dataclasses import dataclass
from functools import cached_property, lru_cache
from pathlib import Path

from embexp.report.ledger import sources

PEAK = {"fp32": 67e12, "tf32": 494.7e12, "bf16": 989.4e12, "fp16": 989.4e12}
HBM, HBM_EFF, GPU_GB = 3.35e12, 0.5, 80


def mfu(n: float) -> float:
    return 0.40 if n >= 1e9 else 0.30 if n >= 1e8 else 0.10


def sci(x: float) -> str:
    return f"{x:.2e}".replace("e+0", "e").replace("e+", "e")


def num(x: float) -> str:
    return f"{x:,.0f}" if x >= 100 else f"{x:g}"


def hrs(x: float) -> str:
    return f"{x:.2g}" if x < 10 else f"{x:,.0f}"


@dataclass(frozen=True)
class Arch:
    """What an estimate needs of a model."""

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
    key: str = ""  # its id in estimates/runs.csv: a run in two sets (a table's row and another's) is counted once

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


class Estimate:
    """The runs one ledger row needs, built on first use (building reads parameter counts); rows that
    share a set share the key and the object (counted once)."""

    def __init__(self, key: str, build, note: str = ""):
        self.key, self.build, self.note, self.ref = key, build, note, ""

    @cached_property
    def runs(self) -> list:
        return list(self.build())

    def hours(self) -> float:
        return sum(r.hours() for r in self.runs)

    def peak(self) -> float:
        return max((r.memory()[0] for r in self.runs), default=0.0)

    def summary(self) -> str:
        if not self.runs:
            return f"{self.note} [{self.ref or self.key}]"
        gb = self.peak()
        fits = "" if gb <= GPU_GB else f"; over {GPU_GB} GB: model.dtype=bfloat16 or more GPUs"
        size = f"{gb:.2g}" if gb < 10 else f"{gb:.0f}"
        return f"≈ {hrs(self.hours())} GPU-h, ≈ {size} GB peak{fits} [{self.ref or self.key}]"

    def text(self) -> str:
        if not self.runs:
            return self.note
        body = " ".join(r.lines() for r in self.runs)
        return f"{body}{' ' + self.note if self.note else ''} Total ≈ {hrs(self.hours())} GPU-h."


# The table of run sets: estimates/runs.csv, a run a line (its id, label, ``model`` (``arch``), ``trainable``
# (0, ``all``: every weight, or the method overrides ``studies.params`` counts it under), precision, the
# tokens it trains on, evaluates and decodes (``works``), the longest training sequence, batch, copies (seeds)
# and weight bytes), and estimates/sets.csv, a set of several runs or with a note (a set of no runs: a row
# that is a mean or a ratio of other rows). A GPU row names its set or its one run (the ``runs`` column of
# ledger/printed/<paper>.csv). The runs are embexp's recipes for each table:
# - tasks: sizes are the hub datasets' (their cards): CNN/DM 3.0.0 287,113 train / 13,368 validation /
#   11,490 test (capped at 2,500); WMT16 cs-en 997,240 train, newstest2015 (2,656) selects, newstest2016
#   (2,999) is reported; BoolQ, CB, COPA, RTE, WiC (SuperGLUE); Alpaca 52,002 rows (2,500 held out for
#   evaluation and 500 for selection); BeaverTails 30k_train ≈ 15,000 unsafe rows, 1,000 test requests;
#   AdvBench 520; GLUE: training rows (PEMA Table 7), validation rows (MNLI: matched + mismatched). Tokens
#   per row are estimates: ≈ 1.3 subword tokens per English word, ≈ 2 per Czech word (the TinyTE paper's
#   footnote 2), plus the prompt template (CNN/DM: article 781 + highlights 56 words; WMT16 ≈ 20 Czech + 23
#   English words; Alpaca ≈ 130 words); GLUE pairs as a batch pads them (≈ 1.5 × the mean length of the
#   pair, capped at 128; ours), the sequence 2 × that.
# - TinyTE (conf/trainer/tinyte_paper.yaml): tf32, batch 1 × 32, the selection loss every 100 optimizer steps
#   (passes = ⌊training rows × epochs / 32 / 100⌋), greedy decoding in batches of 16; Table 3: COPA 50
#   epochs, the others 20, zero-shot a forward pass per choice; the ablations 12 values of p × 250 rows (Table
#   8: 2); the judges read 600 tokens (HarmBench) or 2 × 128 (the NLI judge) per row.
# - Tiny-Attention (conf/trainer/tinyattn_paper.yaml): fp32, 20 epochs, batch 16, selection on 10% of the
#   training rows (at most 1,000) twice per epoch; FewGLUE: the sweep spec's seeds.
# - PEMA (conf/trainer/pema_paper.yaml): fp32 full fine-tuning, 3 epochs, batch 32, 5 seeds.
# - PETE (make pete_table's paper recipe): fp16, 122,700 steps × 128 pairs of two ≈ 32-token sentences.
# - K-Token (src/embexp/sweep/papers/ktoken.py): bf16 LoRA (r=4, every projection and lm_head), 3 seeds;
#   prompts shrink by K, or for a token-dropping baseline by 1 / (1 − the length reduction the paper
#   measured for it, ``ledger.ktoken.rate``); Table 1: the tree curriculum's questions (the paper's
#   19.6–34.6M auxiliary samples, the upper end, at ≈ 100 tokens, + x3large's 2.45M at ≈ 600; 50k test),
#   batch 16; Table 2: Amazon Fashion (10% of the 2.45M training reviews, the authors' sample, ≈ 100 tokens;
#   50k test); Table 3: CommitPackFT python (50.4k, old code + message ≈ 800 tokens compressed, new code
#   ≈ 700 not; 5.6k test), batch 3.
DIR = Path(__file__).parent / "estimates"
# the judges' sizes (hub cards): HarmBench's Llama-2-13B classifier, T5-XXL TRUE NLI
JUDGES = {
    "harmbench": Arch(13_015_864_320, 12_852_024_320, 5_120, 40, 32_000, 5_120),
    "nli": Arch(11_307_321_344, 11_174_000_000, 4_096, 48, 0, 4_096),
}
SCRATCH_TABLE = 30_522 * 512  # conf/model/scratch_encoder.yaml's token table (PETE replaces it)


@lru_cache(maxsize=None)
def spec_arch(model: str) -> Arch:
    """The shape of a stored architecture (models/specs.py)."""
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
    return Arch(total, total - table + (table if tied else 0), d, layers, c.vocab_size if decoder else 0, kv)


def pema_arch(model: str) -> Arch:
    """A PEMA registry encoder (studies/vocab.py MODELS) with a 2-class head."""
    from embexp.studies import vocab

    rows, dim, n = sources.shape(model)
    c = vocab.model_config(model, 2)
    return Arch(n, n - rows * dim, dim, getattr(c, "num_hidden_layers", None) or c.n_layers, 0, dim)


def pete_arch(method: str) -> Arch:
    """conf/model/scratch_encoder (2 layers, d = 512) under `method`, without a task head."""
    n = sources.tp("scratch_encoder", f"method={method}", num_labels=0)
    return Arch(n, n - (0 if method == "pete" else SCRATCH_TABLE), 512, 2, 0, 512)


ARCHS = {"": spec_arch, "pema": pema_arch, "pete": pete_arch, "judge": JUDGES.__getitem__}


def arch(model: str) -> Arch:
    """A run's ``model``: a stored architecture's name, ``pema:<model>``, ``pete:<method>`` or ``judge:<name>``."""
    kind, _, name = model.rpartition(":")
    return ARCHS[kind](name)


@lru_cache(maxsize=None)
def table(name: str) -> dict:
    """estimates/<name>.csv by its first column."""
    with (DIR / f"{name}.csv").open(encoding="utf-8", newline="") as fh:
        reader = csv.DictReader(fh)
        return {r[reader.fieldnames[0]]: r for r in reader}


def number(text: str) -> float:
    return float(text) if "." in text else int(text)


def works(text: str) -> tuple:
    """'what: rows × tokens [× times]; ...' -> the Works."""
    out = []
    for part in filter(None, text.split("; ")):
        what, _, sizes = part.rpartition(": ")
        out.append(Work(what, *(number(x) for x in re.split(" × ", sizes))))
    return tuple(out)


@lru_cache(maxsize=None)
def run(key: str) -> Run:
    """The run of estimates/runs.csv with this id (its parameters counted on the meta device)."""
    r = table("runs")[key]
    a, spec = arch(r["model"]), r["trainable"]
    trainable = a.n if spec == "all" else int(spec) if spec.isdigit() else sources.tp(r["model"], *spec.split())
    return Run(r["label"], a, r["precision"], trainable, spec == "all", works(r["train"]), works(r["evals"]),
               works(r["decode"]), **{k: int(r[k]) for k in ("seq", "batch", "copies", "weight_bytes")}, key=key)


@lru_cache(maxsize=None)
def estimate(key: str) -> Estimate:
    """The runs of a set of estimates/sets.csv, or the one run of estimates/runs.csv with this id: one
    Estimate per key (rows that need the same runs share it and count it once)."""
    sets, runs = table("sets"), table("runs")
    if key not in sets and key not in runs:
        raise ValueError(f"ledger: no run set or run {key!r} in {DIR.name}/sets.csv or {DIR.name}/runs.csv")
    ids, note = (sets[key]["runs"].split(), sets[key]["note"]) if key in sets else ([key], "")
    return Estimate(key, lambda: [run(i) for i in ids], note)
