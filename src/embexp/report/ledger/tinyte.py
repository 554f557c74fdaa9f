"""TinyTE (papers/tinyte.md): the trainable-parameter columns (Tables 1, 2, 8, 11; the §4.1 text on
Fig. 3), computed on the meta device; every score needs a GPU (ledger/tinyte_scores.py). The printed
cells are ledger/printed/tinyte.csv."""

from __future__ import annotations

from embexp.report.ledger import measure
from embexp.report.ledger.core import Compute
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


def tp(model: str, method: str) -> Compute:
    """The trainable parameters of a method (its Table 1 label) on a model."""
    name, overrides = METHODS[method]
    return Compute(lambda _d, m=model, o=(f"method={name}", *overrides): measure.tp(m, *o))


def peft_default(model: str) -> Compute:
    """The LoRA (r=8) count under PEFT's default targets, beside the calibrated targets' row (no printed value)."""
    return Compute(lambda _d, m=model: measure.tp(m, "method=lora", f"method.target_modules=[{PEFT_DEFAULT}]"))


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
    from embexp.report.ledger import data

    task = data.task("alpaca", "", data_dir, train_split="train_sample2000", eval_split="train_sample2000")
    exs = task.examples("eval")
    return task.score_text([e.target for e in exs], [question(e) for e in exs], exs)["rougeL"]


INTRO = (
    "Tables 1–6 and 8–11 and the numbers of the text (§4.1–§4.2, App. A). Not listed: Table 7 (example "
    "outputs), the figures (Figs. 5–7 draw Tables 4, 9 and 10; Fig. 3's parameter counts are rows; Figs. 1, 2, 4 "
    "and 8 print no values), the model sizes in row names (2B, 7B, 8B: names, not counts), and numbers that are "
    "arithmetic on the paper's own (§4.1: 78.9%, 76.7%, 65.9% from Table 5)."
)


def computes() -> dict:
    repeat = Compute(repeat_rl, data=("tatsu-lab/alpaca/train_sample2000.jsonl",))
    return {**param_computes(), "tinyte.t8.repeat.rl": repeat}
