"""TinyTE (papers/tinyte.md): the ledger's rows of the paper, whose printed cells are
ledger/printed/tinyte.csv. The trainable-parameter columns (Tables 1, 2, 8, 11; the §4.1 text on Fig. 3)
are computed on the meta device; every score needs a GPU, with the runs embexp's recipes make for it and
their estimates (ledger/runs.py): Tables 1–3 and 11, the studies of Tables 4–6 and 8–10 and the §4.2
ranking study. The scores of Tables 1–3 and 11 are read from finished runs (ledger/measured.py)."""

from __future__ import annotations

from functools import partial

from embexp.report.ledger import core, measured, sources
from embexp.report.ledger.core import Compute
from embexp.report.tinyte import TABLE1, TABLE2, TABLE11
from embexp.studies.params import LORA_ALL

MODELS = {"gemma2": "Gemma-2", "qwen25": "Qwen-2.5", "llama31": "Llama-3.1"}
# label: (the cell of its runs in report/tinyte.py's tables: (method, tag), the overrides of its parameter count)
METHODS = {
    "base": (("zero_shot", ""), ()),
    "TinyTE-full": (("tinyte_full", ""), ()),
    "TinyTE-half": (("tinyte_half", ""), ()),
    "TinyTE-gated": (("tinyte_gated", ""), ()),
    "TinyTE-hybrid": (("tinyte_hybrid", ""), ()),
    "Emb. Tuning": (("emb_tuning", ""), ()),
    "LoRA (r=8)": (("lora", ""), (f"method.target_modules=[{LORA_ALL}]",)),
    "PT (1 tok)": (("prompt_tuning", "tk1"), ()),
    "PT (2 toks)": (("prompt_tuning", "tk2"), ("method.num_virtual_tokens=2",)),
    "PT (20 toks)": (("prompt_tuning", "tk20"), ("method.num_virtual_tokens=20",)),
    "Repeating the question": (("repeat_prompt", ""), ()),
}
LABEL = {cell: label for label, (cell, _) in METHODS.items()}
# Tables 1, 2 and 11's method rows: the report's (report/tinyte.py), by their labels here
TABLES = {
    "t1": [LABEL[c] for c in TABLE1],
    "t2": [LABEL[c] for c in TABLE2],
    "t11": [LABEL[c] for _, cells in TABLE11 for c in cells],
}
PEFT_DEFAULT = "q_proj,v_proj"  # peft's default LoRA targets for the Llama, Qwen-2 and Gemma-2 families
# Table 3's method rows: (label, id tag)
T3_ROWS = (
    ("Zero-shot", "zero-shot"),
    ("Prompt Tuning (Individual, 1 tok)", "prompt-indiv"),
    ("Prompt Tuning (Multitask, 1 tok)", "prompt-multi"),
    ("TinyTE-all (Individual)", "tinyte-all-indiv"),
    ("TinyTE-all (Multitask)", "tinyte-all-multi"),
)
T3_TASKS = ("boolq", "copa", "cb", "rte_sg", "wic")
GRID, SAMPLES = 12, 250  # studies/ablation.py: p in 0 (the reference), .01, .05, .1, .2, ..., .9; 250 rows
INTRO = (
    "Tables 1–6 and 8–11 and the numbers of the text (§4.1–§4.2, App. A). Not listed: Table 7 (example "
    "outputs), the figures (Figs. 5–7 draw Tables 4, 9 and 10; Fig. 3's parameter counts are rows; Figs. 1, 2, 4 "
    "and 8 print no values), the model sizes in row names (2B, 7B, 8B: names, not counts), and numbers that are "
    "arithmetic on the paper's own (§4.1: 78.9%, 76.7%, 65.9% from Table 5)."
)
NOTES = {
    "Table 1": "Every score needs the run of its model and method on CNN/DM (R-L) and on WMT16 cs-en (BLEU-4, TER); "
    "the runs are Table 11's (the same cells with standard errors).",
    "Table 2": "Six cells differ from Table 11's for the same runs: Gemma-2 PT (tk=1) R-L 30.06 vs 30.10, Qwen-2.5 PT "
    "BLEU-4 24.20 vs 24.24 and 25.40 vs 25.44, Llama-3.1 LoRA BLEU-4 27.70 vs 27.78, PT (tk=1) 29.20 vs 29.25, "
    "PT (tk=2) R-L 33.89 vs 33.90.",
    "Table 3": "Individual: one run per task (COPA 50 epochs, the others 20); multitask: one run on the five; "
    "zero-shot: lm-eval's log-likelihood multiple choice. '*' = the paper's manual extraction.",
    "Table 4": f"One ablation run per model and dataset: {GRID} values of p (0, the reference outputs, and the paper's "
    f"grid) × {SAMPLES} rows, greedy decoding; no training.",
    "Table 6": "The paper prints the vanilla ASRs as fractions (0.02) and the tuned ones as percentages (86.9).",
    "Table 9": "The judge (google/t5_xxl_true_nli_mixture) reads Table 4's generations: no new decoding.",
}


def tp(model: str, method: str) -> Compute:
    """The trainable parameters of a method (its Table 1 label) on a model."""
    (name, _), overrides = METHODS[method]
    return Compute(lambda _d, m=model, o=(f"method={name}", *overrides): sources.tp(m, *o))


def peft_default(model: str) -> Compute:
    """The LoRA (r=8) count under PEFT's default targets, beside the calibrated targets' row (no printed value)."""
    return Compute(lambda _d, m=model: sources.tp(m, "method=lora", f"method.target_modules=[{PEFT_DEFAULT}]"))


def slug(method: str) -> str:
    return method.lower().replace(" ", "").replace("(", "").replace(")", "").replace(".", "").replace("=", "")


def param_computes() -> dict:
    """Every parameter-count row of the printed cells: ``tinyte.<table>.<model>.<method>.tp`` (the method by its
    label's slug; ``clean``: Table 8's TinyTE-full) and ``...lorar8.peft_default``."""
    methods = {slug(m): m for m in METHODS} | {"clean": "TinyTE-full"}
    out = {}
    for c in core.sheet("tinyte"):
        _, _, model, method, col = (c["id"].split(".") + ["", ""])[:5]
        if col == "tp":
            out[c["id"]] = tp(model, methods[method])
        elif col == "peft_default":
            out[c["id"]] = peft_default(model)
    return out


def repeat_rl(data_dir) -> float:
    """R-L of 'repeating the question' (method=repeat_prompt's answer) on the local Alpaca sample."""
    from embexp.methods.baselines import question

    task = sources.task("alpaca", "", data_dir, train_split="train_sample2000", eval_split="train_sample2000")
    exs = task.examples("eval")
    return task.score_text([e.target for e in exs], [question(e) for e in exs], exs)["rougeL"]


def nlg_computes(t: str, model: str, method: str, wmt: tuple) -> dict:
    """The lookups of the CNN/DM (R-L) and WMT16 (`wmt`'s metrics) runs of one cell of Table 1, 2 or 11."""
    tag, look = slug(method), partial(measured.tinyte_nlg, model, METHODS[method][0])
    return {
        f"tinyte.{t}.{model}.{tag}.cnndm": Compute(measure=partial(look, ("R-L",))),
        f"tinyte.{t}.{model}.{tag}.wmt16": Compute(measure=partial(look, wmt)),
    }


def t1_t2_t11_computes() -> dict:
    out = {}
    for t, methods in TABLES.items():
        wmt = ("BLEU-4",) if t == "t2" else ("BLEU-4", "TER")  # Table 2 prints no TER
        for model in MODELS:
            for m in methods:
                out.update(nlg_computes(t, model, m, wmt))
    return out


def t3_computes() -> dict:
    """The lookups of Table 3: an individual row's cells one by one, the others whole."""
    out = {}
    for model in MODELS:
        for method, tag in T3_ROWS:
            look = partial(measured.tinyte_superglue, model, method)
            if "Individual" in method:
                for i, t in enumerate(T3_TASKS + ("avg",)):
                    out[f"tinyte.t3.{model}.{tag}.{t}"] = Compute(measure=partial(look, (i,)))
            else:
                out[f"tinyte.t3.{model}.{tag}"] = Compute(measure=partial(look, tuple(range(6))))
    return out


def computes() -> dict:
    repeat = Compute(repeat_rl, data=("tatsu-lab/alpaca/train_sample2000.jsonl",))
    return {**param_computes(), "tinyte.t8.repeat.rl": repeat, **t1_t2_t11_computes(), **t3_computes()}

