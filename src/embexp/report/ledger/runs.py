"""The runs behind the ledger's GPU rows, as embexp's recipes run them (conf/experiment, conf/trainer,
conf/task): tasks' sizes and token counts, and the builders of ``gpu.Run``.

Sizes are the hub datasets' (their cards); tokens per row are estimates (stated with each task):
≈1.3 subword tokens per English word, ≈2 per Czech word (the TinyTE paper's footnote 2), plus the
prompt template. Each estimate says which numbers it used."""

from __future__ import annotations

import math
from dataclasses import dataclass

from embexp.report.ledger import measure
from embexp.report.ledger.gpu import Arch, Estimate, Run, Work


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
    t, a = TASKS[task], measure.arch(model)
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
    t, a = TASKS[task], measure.arch(model)
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
