"""TinyTE (papers/tinyte.md): the score cells, which need a GPU, with the runs embexp's recipes make
for them (ledger/runs.py) and their estimates. The printed cells are ledger/printed/tinyte.csv."""

from __future__ import annotations

from embexp.report.ledger import lookups, measure
from embexp.report.ledger.core import Compute
from embexp.report.ledger.runs import SUPERGLUE, TASKS, estimate, loglik_run, tinyte_run
from embexp.report.ledger.tinyte import METHODS, MODELS, NAMES, T1_METHODS, T2_METHODS, T11_METHODS, slug

# Table 3's method rows: (label, id tag)
T3_ROWS = (
    ("Zero-shot", "zero-shot"),
    ("Prompt Tuning (Individual, 1 tok)", "prompt-indiv"),
    ("Prompt Tuning (Multitask, 1 tok)", "prompt-multi"),
    ("TinyTE-all (Individual)", "tinyte-all-indiv"),
    ("TinyTE-all (Multitask)", "tinyte-all-multi"),
)
T3_TASKS = ("boolq", "copa", "cb", "rte_sg", "wic")
NOTES = {
    "Table 1": "Every score needs the run of its model and method on CNN/DM (R-L) and on WMT16 cs-en (BLEU-4, TER); "
    "the runs are Table 11's (the same cells with standard errors).",
    "Table 2": "Six cells differ from Table 11's for the same runs: Gemma-2 PT (tk=1) R-L 30.06 vs 30.10, Qwen-2.5 PT "
    "BLEU-4 24.20 vs 24.24 and 25.40 vs 25.44, Llama-3.1 LoRA BLEU-4 27.70 vs 27.78, PT (tk=1) 29.20 vs 29.25, "
    "PT (tk=2) R-L 33.89 vs 33.90.",
    "Table 3": "Individual: one run per task (COPA 50 epochs, the others 20); multitask: one run on the five; "
    "zero-shot: lm-eval's log-likelihood multiple choice. '*' = the paper's manual extraction.",
}


def method_of(method: str) -> tuple:
    name, ov = METHODS[method]
    return (f"method={name}", *ov)


def nlg_estimate(model: str, method: str, task: str):
    """The run of one Table 1/2/11 cell group (its key shared by the three tables and Table 5)."""

    def build():
        label = f"{NAMES[model]} + {method}, {TASKS[task].name}"
        if method == "base":
            return [tinyte_run(f"{NAMES[model]} zero-shot, {TASKS[task].name}", model, task, 0, train=False)]
        return [tinyte_run(label, model, task, measure.tp(model, *method_of(method)))]

    return estimate(f"tinyte.{model}.{method}.{task}", build)


def nlg_computes(t: str, model: str, method: str, wmt: tuple) -> dict:
    """The CNN/DM (R-L) and WMT16 (`wmt`'s metrics) runs of one cell of Table 1, 2 or 11."""
    tag = slug(method)
    return {
        f"tinyte.{t}.{model}.{tag}.cnndm": Compute(
            gpu=nlg_estimate(model, method, "cnndm"), measure=lookups.tinyte_nlg(model, method, ("R-L",))
        ),
        f"tinyte.{t}.{model}.{tag}.wmt16": Compute(
            gpu=nlg_estimate(model, method, "wmt16"), measure=lookups.tinyte_nlg(model, method, wmt)
        ),
    }


def t1_t2_t11_computes() -> dict:
    out = {}
    for t, methods, wmt in (("t1", T1_METHODS, ("BLEU-4", "TER")), ("t2", T2_METHODS, ("BLEU-4",)),
                            ("t11", T11_METHODS, ("BLEU-4", "TER"))):
        for model in MODELS:
            for m in methods:
                out.update(nlg_computes(t, model, m, wmt))
    return out


def sg_estimate(model: str, method: str, task: str):
    """One Table 3 run: zero-shot log-likelihood, an individual task (COPA 50 epochs) or the multitask run."""

    def build():
        name = "TinyTE-full" if method.startswith("TinyTE") else "PT (1 tok)"
        tp = measure.tp(model, *method_of(name)) if method != "Zero-shot" else 0
        if method == "Zero-shot":
            return [loglik_run(f"{NAMES[model]} zero-shot, {TASKS[t].name}", model, t) for t in SUPERGLUE]
        if task == "multitask":
            return [
                tinyte_run(f"{NAMES[model]} + {name} multitask, {TASKS[t].name}", model, t, tp, 20) for t in SUPERGLUE
            ]
        return [
            tinyte_run(f"{NAMES[model]} + {name}, {TASKS[task].name}", model, task, tp, 50 if task == "copa" else 20)
        ]

    return estimate(f"tinyte.{model}.{method}.{task}", build)


def t3_computes() -> dict:
    out = {}
    for model in MODELS:
        for method, tag in T3_ROWS:
            if "Individual" in method:
                for t in T3_TASKS:
                    out[f"tinyte.t3.{model}.{tag}.{t}"] = Compute(
                        gpu=sg_estimate(model, method, t),
                        measure=lookups.tinyte_superglue(model, method, (T3_TASKS.index(t),)),
                    )
                note = "no run of its own: the mean of the five cells above"
                out[f"tinyte.t3.{model}.{tag}.avg"] = Compute(
                    gpu=estimate(f"tinyte.{model}.{method}.avg", lambda: [], note),
                    measure=lookups.tinyte_superglue(model, method, (5,)),
                )
            else:
                key = "multitask" if "Multi" in method else "zero-shot"
                out[f"tinyte.t3.{model}.{tag}"] = Compute(
                    gpu=sg_estimate(model, method, key),
                    measure=lookups.tinyte_superglue(model, method, tuple(range(6))),
                )
    return out


def computes() -> dict:
    return {**t1_t2_t11_computes(), **t3_computes()}
