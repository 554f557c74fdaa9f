"""TinyTE (papers/tinyte.md): the ledger's rows of the paper, whose printed cells are
ledger/printed/tinyte.csv. The trainable-parameter columns (Tables 1, 2, 8, 11; the §4.1 text on Fig. 3)
are computed on the meta device; every score needs a GPU, with the runs embexp's recipes make for it
(ledger/runs.py) and their estimates: Tables 1–3 and 11, the studies of Tables 4–6 and 8–10 and the §4.2
ranking study."""

from __future__ import annotations

from embexp.report.ledger import measured, sources
from embexp.report.ledger.core import Compute
from embexp.report.ledger.runs import (
    DECODE_BATCH,
    SUPERGLUE,
    TASKS,
    Run,
    Work,
    arch,
    derived,
    estimate,
    judge_run,
    loglik_run,
    tinyte_run,
)
from embexp.studies.params import LORA_ALL

MODELS = {"gemma2": "Gemma-2", "qwen25": "Qwen-2.5", "llama31": "Llama-3.1"}
METHODS = {  # label: (params' method, overrides)
    "base": ("zero_shot", ()),
    "TinyTE-full": ("tinyte_full", ()),
    "TinyTE-half": ("tinyte_half", ()),
    "TinyTE-gated": ("tinyte_gated", ()),
    "TinyTE-hybrid": ("tinyte_hybrid", ()),
    "Emb. Tuning": ("emb_tuning", ()),
    "LoRA (r=8)": ("lora", (f"method.target_modules=[{LORA_ALL}]",)),
    "PT (1 tok)": ("prompt_tuning", ()),
    "PT (2 toks)": ("prompt_tuning", ("method.num_virtual_tokens=2",)),
    "PT (20 toks)": ("prompt_tuning", ("method.num_virtual_tokens=20",)),
    "Repeating the question": ("repeat_prompt", ()),
}
T1_METHODS = ("base", "TinyTE-full", "TinyTE-half", "TinyTE-gated", "TinyTE-hybrid")
T2_METHODS = ("LoRA (r=8)", "Emb. Tuning", "PT (1 tok)", "PT (2 toks)", "TinyTE-gated", "TinyTE-hybrid")
T11_METHODS = ("base", "Emb. Tuning", "LoRA (r=8)", "PT (1 tok)", "PT (2 toks)", "PT (20 toks)") + T1_METHODS[1:]
PEFT_DEFAULT = "q_proj,v_proj"  # peft's default LoRA targets for the Llama, Qwen-2 and Gemma-2 families
NAMES = {**MODELS, "llama2": "Llama-2-7b", "gptj": "GPT-J-6b", "qwen25_05b": "Qwen-2.5-0.5b"}
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
ORDER = ("gemma2", "llama31", "qwen25")  # the ablation tables' row order
T5 = ("LoRA (r=8)", "PT (1 tok)", "TinyTE-full", "TinyTE-half", "TinyTE-hybrid", "TinyTE-gated")  # its rows
# the §4.2 study's orders of Gemma-2's dimensions (the first is Table 1's TinyTE-half)
RANKING = (
    "variance, lowest half (Table 1's TinyTE-half)",
    "variance, highest half",
    "random",
    "integrated gradients, lowest half",
    "integrated gradients, highest half",
)
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


def method_of(method: str) -> tuple:
    """The overrides of a method (its Table 1 label)."""
    name, ov = METHODS[method]
    return (f"method={name}", *ov)


def tp(model: str, method: str) -> Compute:
    """The trainable parameters of a method (its Table 1 label) on a model."""
    return Compute(lambda _d, m=model, o=method_of(method): sources.tp(m, *o))


def peft_default(model: str) -> Compute:
    """The LoRA (r=8) count under PEFT's default targets, beside the calibrated targets' row (no printed value)."""
    return Compute(lambda _d, m=model: sources.tp(m, "method=lora", f"method.target_modules=[{PEFT_DEFAULT}]"))


def slug(method: str) -> str:
    return method.lower().replace(" ", "").replace("(", "").replace(")", "").replace(".", "").replace("=", "")


def param_computes() -> dict:
    out = {}
    for t, methods in (("t1", T1_METHODS), ("t2", T2_METHODS), ("t11", T11_METHODS)):
        out.update({f"tinyte.{t}.{model}.{slug(m)}.tp": tp(model, m) for model in MODELS for m in methods})
    out.update({f"tinyte.t2.{model}.lorar8.peft_default": peft_default(model) for model in MODELS})
    for model, m in (("llama2", "TinyTE-full"), ("llama2", "Repeating the question"), ("gptj", "TinyTE-full"),
                     ("qwen25_05b", "TinyTE-full")):
        out[f"tinyte.t8.{model}.{slug(m)}.tp"] = tp(model, m)
    return {
        **out,
        "tinyte.t8.qwen25_05b.clean.tp": tp("qwen25_05b", "TinyTE-full"),
        "tinyte.fig3.llama2.tinyte-gated.tp": tp("llama2", "TinyTE-gated"),
        "tinyte.fig3.llama2.lorar8.tp": tp("llama2", "LoRA (r=8)"),
        "tinyte.fig3.llama2.lorar8.peft_default": peft_default("llama2"),
    }


def repeat_rl(data_dir) -> float:
    """R-L of 'repeating the question' (method=repeat_prompt's answer) on the local Alpaca sample."""
    from embexp.methods.baselines import question

    task = sources.task("alpaca", "", data_dir, train_split="train_sample2000", eval_split="train_sample2000")
    exs = task.examples("eval")
    return task.score_text([e.target for e in exs], [question(e) for e in exs], exs)["rougeL"]


def nlg_estimate(model: str, method: str, task: str):
    """The run of one Table 1/2/11 cell group (its key shared by the three tables and Table 5)."""

    def build():
        label = f"{NAMES[model]} + {method}, {TASKS[task].name}"
        if method == "base":
            return [tinyte_run(f"{NAMES[model]} zero-shot, {TASKS[task].name}", model, task, 0, train=False)]
        return [tinyte_run(label, model, task, sources.tp(model, *method_of(method)))]

    return estimate(f"tinyte.{model}.{method}.{task}", build)


def nlg_computes(t: str, model: str, method: str, wmt: tuple) -> dict:
    """The CNN/DM (R-L) and WMT16 (`wmt`'s metrics) runs of one cell of Table 1, 2 or 11."""
    tag = slug(method)
    return {
        f"tinyte.{t}.{model}.{tag}.cnndm": Compute(
            gpu=nlg_estimate(model, method, "cnndm"), measure=measured.tinyte_nlg(model, method, ("R-L",))
        ),
        f"tinyte.{t}.{model}.{tag}.wmt16": Compute(
            gpu=nlg_estimate(model, method, "wmt16"), measure=measured.tinyte_nlg(model, method, wmt)
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
        tp = sources.tp(model, *method_of(name)) if method != "Zero-shot" else 0
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
                        measure=measured.tinyte_superglue(model, method, (T3_TASKS.index(t),)),
                    )
                note = "no run of its own: the mean of the five cells above"
                out[f"tinyte.t3.{model}.{tag}.avg"] = Compute(
                    gpu=derived(f"tinyte.{model}.{method}.avg", note),
                    measure=measured.tinyte_superglue(model, method, (5,)),
                )
            else:
                key = "multitask" if "Multi" in method else "zero-shot"
                out[f"tinyte.t3.{model}.{tag}"] = Compute(
                    gpu=sg_estimate(model, method, key),
                    measure=measured.tinyte_superglue(model, method, tuple(range(6))),
                )
    return out


def ablation(model: str, task: str, sorting: str, points: int = GRID, samples: int = SAMPLES):
    t = TASKS[task]

    def build():
        a = arch(model)
        rows = points * samples
        return [
            Run(
                f"{NAMES[model]} ablation ({sorting}), {t.name}",
                a,
                "tf32",
                evals=(Work(f"prompts × {points} values of p", rows, t.prompt),),
                decode=(Work("decode", rows, t.new, DECODE_BATCH),),
                seq=t.prompt + t.new,
            )
        ]

    return estimate(f"tinyte.ablation.{model}.{task}.{sorting}.{points}", build)


def nli(model: str, task: str, sorting: str):
    rows = (GRID - 1) * SAMPLES
    return estimate(
        f"tinyte.nli.{model}.{task}.{sorting}",
        lambda: [judge_run(f"NLI judge on {NAMES[model]}'s ablated outputs, {TASKS[task].name}", "nli", rows, 2 * 128)],
        "Reuses the generations of the BLEU-4 rows' run.",
    )


def curve_computes(t: str, metric: str, est) -> dict:
    return {
        f"tinyte.{t}.{model}.{task}.{metric}": Compute(gpu=est(model, task))
        for model in ORDER
        for task in ("wmt16", "cnndm")
    }


def ablation_computes() -> dict:
    return {
        **curve_computes("t4", "bleu-4", lambda m, t: ablation(m, t, "random")),
        **curve_computes("t9", "nli", lambda m, t: nli(m, t, "random")),
        **curve_computes("t10", "bleu-4", lambda m, t: ablation(m, t, "variance")),
        **curve_computes("t10", "nli", lambda m, t: nli(m, t, "variance")),
    }


def t5_t6_computes() -> dict:
    short = {"LoRA (r=8)": "lorar8", "PT (1 tok)": "pt1tok"}
    out = {f"tinyte.t5.{short.get(m, m.lower())}": Compute(gpu=nlg_estimate("gemma2", m, "cnndm")) for m in T5}
    for model in ORDER:
        out[f"tinyte.t6.{model}.vanilla"] = Compute(gpu=safety(model, False))
        out[f"tinyte.t6.{model}.gated"] = Compute(gpu=safety(model, True))
    gold = estimate("tinyte.bsd.gold", lambda: [judge_run("HarmBench judge on BSD's gold responses", "harmbench",
                                                          1_000, 600)])
    out["tinyte.t6.gold"] = Compute(gpu=gold)
    return out


def safety(model: str, tuned: bool):
    def build():
        if not tuned:
            return [
                tinyte_run(f"{NAMES[model]} zero-shot, BSD", model, "bsd", 0, train=False),
                judge_run("HarmBench judge, BSD", "harmbench", 1_000, 600),
            ]
        tp = sources.tp(model, "method=tinyte_gated")
        return [
            tinyte_run(f"{NAMES[model]} + TinyTE-gated, BSD (20 epochs)", model, "bsd", tp, 20),
            tinyte_run(f"{NAMES[model]} + TinyTE-gated, AdvBench", model, "advbench", 0, train=False),
            judge_run("HarmBench judge, BSD + AdvBench", "harmbench", 1_520, 600),
        ]

    return estimate(f"tinyte.safety.{model}.{tuned}", build)


def alpaca(model: str):
    return estimate(
        f"tinyte.alpaca.{model}",
        lambda: [
            tinyte_run(
                f"{NAMES[model]} + TinyTE-full, Alpaca (5 epochs)",
                model,
                "alpaca",
                sources.tp(model, "method=tinyte_full"),
                5,
            )
        ],
    )


def t8_computes() -> dict:
    out = {}
    for model in ("llama2", "gptj", "qwen25_05b"):
        out[f"tinyte.t8.{model}.ablation"] = Compute(gpu=ablation(model, "alpaca", "variance", points=2))
        out[f"tinyte.t8.{model}.rl"] = Compute(gpu=alpaca(model))
    return out


def ranking_computes() -> dict:
    out = {"tinyte.s42.ranking.0": Compute(gpu=nlg_estimate("gemma2", "TinyTE-half", "cnndm"))}
    for i, label in enumerate(RANKING[1:], start=1):
        out[f"tinyte.s42.ranking.{i}"] = Compute(
            gpu=estimate(
                f"tinyte.ranking.{i}",
                lambda lb=label: [
                    tinyte_run(
                        f"Gemma-2 + TinyTE-half ({lb}), CNN/DM",
                        "gemma2",
                        "cnndm",
                        sources.tp("gemma2", "method=tinyte_half"),
                    )
                ],
            )
        )
    return out


def computes() -> dict:
    repeat = Compute(repeat_rl, data=("tatsu-lab/alpaca/train_sample2000.jsonl",))
    return {**param_computes(), "tinyte.t8.repeat.rl": repeat, **t1_t2_t11_computes(), **t3_computes(),
            **ablation_computes(), **t5_t6_computes(), **t8_computes(), **ranking_computes()}

