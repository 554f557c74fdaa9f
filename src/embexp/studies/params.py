"""Trainable-parameter table: every method x the real models, offline, from the real code.

    python -m embexp.analyze params                                   # all methods x all models
    python -m embexp.analyze params models=[gemma2,qwen25,llama31] out=tables/params

The hub is unreachable here, so the architectures come from the config fields in
``models/specs.py``: each model is instantiated with its real transformers class on the ``meta``
device (shapes only; :func:`meta_backbone`), the method is built on it as ``python -m embexp.train``
builds it, and its trainable tensors are counted. A byte-level tokenizer stands in for the real one
(only its special ids are read). Encoders get a 2-class head (ours: GLUE/SuperGLUE binary tasks),
counted in "#TP"; "method" excludes it. A method that cannot be built on a model shows its
one-line reason. The papers' #TP are printed alongside (the TinyTE paper's Tables 1, 2 and 11).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import torch

from embexp import EmbexpError
from embexp.core import cli
from embexp.core.cli import compose_train
from embexp.core.config import option
from embexp.core.tables import markdown, write_table
from embexp.models.specs import SPECS
from embexp.studies import printed_cell

# The papers' #TP beside ours: per model, a row label -> the id of the row of report/ledger/printed/<paper>.csv that
# prints it (the paper: the id's first part) and what the column adds to the printed cell. The TinyTE paper's Table 11
# for its three models (TINYTE_ROWS: the id's method part), else as noted.
TINYTE_ROWS = {"tinyte_full": "tinyte-full", "tinyte_half": "tinyte-half", "tinyte_gated": "tinyte-gated",
               "tinyte_hybrid": "tinyte-hybrid", "lora": "lorar8", "emb_tuning": "embtuning", "prompt_tuning": "pt1tok",
               "prompt_tuning (tk=2)": "pt2toks", "prompt_tuning (tk=20)": "pt20toks", "zero_shot": "base"}
PRINTED_TP = {
    **{m: {label: (f"tinyte.t11.{m}.{row}.tp", "") for label, row in TINYTE_ROWS.items()}
       for m in ("gemma2", "qwen25", "llama31")},
    # the Tiny-Attention Adapter paper's Table 8
    "roberta": {"tinyattn (authors' head)": ("tinyattn.t8.1h.tp", " (incl. head)"),
                "tinyattn (4H, authors' head)": ("tinyattn.t8.4h.tp", " (incl. head)")},
    "llama2": {"tinyte_full": ("tinyte.t8.llama2.tinyte-full.tp", ""),
               "tinyte_gated": ("tinyte.fig3.llama2.tinyte-gated.tp", " (Sec. 4.1 text)"),
               "lora": ("tinyte.fig3.llama2.lorar8.tp", " (Fig. 3 text)")},
    # the PETE paper's Table 2 (total parameters of the 2L/2H d=512 encoders; docs/methods_pete.md: the difference)
    "scratch_encoder": {"full_ft": ("pete.t2.baseline.params", ""), "pete": ("pete.t2.pete.params", ""),
                        "pete (variant=code)": ("pete.t2.pete.params", "")},
}
SIC = {"tinyte.t11.qwen25.pt20toks.tp": " (sic; 20 x 3584 = 71,680)"}  # a printed count that is a typo


def paper_tp(model: str, label: str) -> str:
    """The #TP the paper prints for a row of the table (LoRA's variants: LoRA's), '' where it prints none."""
    rid, note = PRINTED_TP.get(model, {}).get("lora" if label.startswith("lora") else label, ("", ""))
    if not rid:
        return ""
    return printed_cell(rid.split(".")[0], rid).replace(" million", "M") + SIC.get(rid, "") + note


LORA_ALL = "q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj,lm_head,embed_tokens"
MODELS = ["gemma2", "qwen25", "llama31", "llama2", "smollm2", "roberta", "deberta", "minilm"]


def known_models() -> tuple[str, ...]:
    """What params can count: the stored architectures and the source=scratch models of conf/model."""
    from embexp.judge.backends import model_config

    scratch = [m for m in cli.choices("model") if model_config(m).source == "scratch"]
    return tuple(SPECS) + tuple(m for m in scratch if m not in SPECS)


@dataclass
class Config:
    models: list = option(
        MODELS, "Model config names with a stored architecture (models/specs.py): " + ", ".join(SPECS),
        choices=known_models)
    methods: list = option([], "Method config names (conf/method); [] = every one.")
    variants: dict = option({"prompt_tuning (tk=2)": ["method=prompt_tuning", "method.num_virtual_tokens=2"],
                             "prompt_tuning (tk=20)": ["method=prompt_tuning", "method.num_virtual_tokens=20"],
                             "lora (+lm_head, embed_tokens)": ["method=lora", f"method.target_modules=[{LORA_ALL}]"],
                             "tinyattn (4H)": ["method=tinyattn", "method.heads=4"],
                             "tinyattn (authors' MHA)": ["method=tinyattn", "method.mha_proj=true"],
                             "tinyattn (per_depth)": ["method=tinyattn", "method.layer_modules=per_depth"],
                             "tinyattn (authors' head)": ["method=tinyattn", "model.head=linear"],
                             "tinyattn (4H, authors' head)": ["method=tinyattn", "method.heads=4", "model.head=linear"],
                             "pete (variant=code)": ["method=pete", "method.variant=code"]},
                            "Extra rows: label -> train-config overrides (the paper's prompt-tuning sizes; LoRA also "
                            "on the output head and input embedding, which reproduces the paper's LoRA #TP, decoders "
                            "only; Tiny-Attention with 4 modules per layer, with the authors' nn.MultiheadAttention "
                            "in/out projections, and with a module set per depth on ALBERT's shared layer, and with "
                            "the authors' head (model.head=linear, the tinyattn GLUE experiments' setting: Linear(d, "
                            "n) on the first token); PETE's code variant).")
    num_labels: int = option(2, "Classes of the encoders' task head (counted in #TP); 0 = no head, the base encoder as "
                                "the sentence-embedding tasks load it (the PETE comparison: models=[scratch_encoder] "
                                "num_labels=0).", ge=0)
    breakdown: bool = option(
        False, "Also print, per model and method, the parameters of the built model grouped by module "
               "(first two levels of the module path), trainable or not: the terms behind a total.")
    rank_random: bool = option(True, "Build ranked TinyTE variants (method.ranking) with ranking=random: the order of "
                               "the dims never changes a count, and ranking by variance reads the whole (stand-in) "
                               "embedding table, ~2 GB per model. false: exactly as configured.")
    paper: bool = option(True, "Add the paper's #TP next to ours where it reports one.")
    out: str = option("", "Also write <out>.md and <out>.csv ('' = print only).")


def meta_backbone(model_name: str, model_cfg, num_labels: int = 2):
    """The real architecture of `model_name` on the meta device, wrapped as an embexp Backbone.

    Methods that read the embedding values when they attach (TinyTE-half/gated rank dims by their
    variance; prompt tokens start from vocabulary rows) need real numbers there: the input
    embedding becomes a zero-stride all-zero CPU tensor of the real shape (no memory; an output
    head tied to it stays tied), and the embedding module's scalar buffers (Gemma-2's
    embed_scale) are rebuilt on the CPU. Values never change a count.
    """
    import transformers as tf

    from embexp.models import Backbone, byte_tokenizer

    tok = None
    if model_name in SPECS:
        spec = SPECS[model_name]
        is_decoder = spec["kind"] == "decoder"
        config = tf.AutoConfig.for_model(spec["family"], **spec["config"])
    elif getattr(model_cfg, "source", "") == "scratch":  # the architecture is conf/model/<name>.yaml itself
        from embexp.models import scratch_config, scratch_tokenizer

        tok = scratch_tokenizer(model_cfg)
        is_decoder = model_cfg.kind == "decoder"
        config = scratch_config(model_cfg, tok)
    else:
        raise EmbexpError(f"no stored architecture for model '{model_name}' (choose from: {', '.join(SPECS)}, "
                          "or a source=scratch model)")
    with torch.device("meta"):
        if is_decoder:
            model = tf.AutoModelForCausalLM.from_config(config)
        elif num_labels == 0:  # the base encoder, as sentence-embedding tasks load it
            model = tf.AutoModel.from_config(config)
        else:
            config.num_labels = num_labels
            model = tf.AutoModelForSequenceClassification.from_config(config)
            if getattr(model_cfg, "head", "transformers") == "linear":  # the Tiny-Attention authors' head
                from embexp.models import use_linear_head

                use_linear_head(model, num_labels)
    model.eval()
    emb, head = model.get_input_embeddings(), model.get_output_embeddings()
    tied = head is not None and head.weight is emb.weight
    v, d = emb.weight.shape
    emb.weight = torch.nn.Parameter(torch.zeros(1, d).expand(v, d), requires_grad=False)
    if tied:
        head.weight = emb.weight
    for name, buf in list(emb.named_buffers(recurse=False)):
        if buf.is_meta:
            value = getattr(emb, "scalar_embed_scale", 1.0) if buf.dim() == 0 else 0.0
            emb.register_buffer(name, torch.full(buf.shape, float(value), dtype=buf.dtype), persistent=False)
    return Backbone(model=model, tokenizer=tok or byte_tokenizer(encoder=not is_decoder), cfg=model_cfg,
                    is_decoder=is_decoder)


def count(model_name: str, overrides: list[str], num_labels: int = 2, rank_random: bool = True) -> dict:
    """One cell: {"tp": trainable incl. an encoder head, "method": the method's own tensors,
    "total": backbone parameters, "data_dependent": the method prepares itself from data (setup)}."""
    from embexp.methods import Method, build_method
    from embexp.run.build import count_params

    kind = (SPECS[model_name]["kind"] if model_name in SPECS  # else its conf/model (full_ft runs on every kind)
            else compose_train([f"model={model_name}", "method=full_ft"]).model.kind)
    task = "task=wmt16" if kind == "decoder" else "task=glue"
    tcfg = compose_train([f"model={model_name}", task, *overrides])
    if rank_random and "ranking" in tcfg.method:
        tcfg.method.ranking = "random"
    bb = meta_backbone(model_name, tcfg.model, num_labels)
    total = count_params(bb.model)  # before the method adds (LoRA) or replaces (PETE) modules
    method = build_method(tcfg.method, bb)
    trains = getattr(method, "trains", True)
    out = {"tp": method.n_trainable() if trains else 0,
           "method": method.n_trainable(include_head=False) if trains else 0, "total": total,
           "after": count_params(bb.model), "data_dependent": False, "groups": module_groups(bb.model)}
    if type(method).setup is not Method.setup:  # does data change the count? try a few token ids
        try:
            method.setup({"train": [[5, 6, 7, 8]], "eval": [[5, 9]]})
            out["data_dependent"] = method.n_trainable() != out["tp"]
        except Exception:  # noqa: BLE001 - a setup that cannot run on stand-in data needs real data
            out["data_dependent"] = True
    return out


def module_groups(model: torch.nn.Module) -> dict[str, int]:
    """Parameters per module, by the first two levels of the module path (``layers.0``,
    ``embeddings.tok_embeddings``); shared tensors counted once, where first met."""
    out: Counter[str] = Counter()
    for name, p in model.named_parameters():  # named_parameters already skips repeats of a shared tensor
        out[".".join((name.split(".")[:-1] or [name])[:2])] += p.numel()
    return dict(out)


def rows_to_count(cfg: Config) -> list[tuple[str, list[str]]]:
    """(row label, overrides): every method, each followed by its variants."""
    rows = []
    for name in list(cfg.methods) or cli.choices("method"):
        rows.append((name, [f"method={name}"]))
        rows += [(label, list(ov)) for label, ov in (cfg.variants or {}).items() if f"method={name}" in ov]
    return rows


def table(cfg: Config, groups: dict | None = None) -> list[dict]:
    out, totals = [], {}
    for label, overrides in rows_to_count(cfg):
        row = {"Method": label}
        for m in cfg.models:
            try:
                c = count(m, overrides, cfg.num_labels, cfg.rank_random)
                head = c["tp"] - c["method"]
                row[m] = f"{c['tp']} ({c['method']} + head)" if head else c["tp"]
                if c["data_dependent"]:
                    row["Method"] = f"{label} (before setup; data-dependent)"
                totals.setdefault(m, c["total"])  # the model as configured (a row may change its head)
                if groups is not None:
                    groups[(m, label)] = c
            except Exception as e:  # a method that cannot attach to this model: say why, keep going
                msg = str(e).splitlines()[0] if str(e) else type(e).__name__
                row[m] = f"n/a: {msg[:80]}"
            if cfg.paper:
                row[f"{m} (paper)"] = paper_tp(m, label)
        out.append(row)
    out.append({"Method": "(backbone total)", **{m: totals.get(m) for m in cfg.models}})
    return out


def breakdown_rows(groups: dict) -> list[dict]:
    """One row per (model, method) cell and module group: the model's parameters after the method
    is built (trainable or not), so each total can be read term by term."""
    rows = []
    for (m, label), c in groups.items():
        for key, n in c["groups"].items():
            rows.append({"Model": m, "Method": label, "Module": key, "Parameters": n})
        rows.append({"Model": m, "Method": label, "Module": "(model total)", "Parameters": c["after"]})
    return rows


def run(cfg: Config) -> list[dict]:
    groups: dict | None = {} if cfg.breakdown else None
    rows = table(cfg, groups)
    cols = ["Method"] + [c for m in cfg.models for c in ([m, f"{m} (paper)"] if cfg.paper and m in PRINTED_TP else [m])]
    head = "encoders include a %d-class head" % cfg.num_labels if cfg.num_labels else "encoders without a task head"
    title = f"Trainable parameters (#TP; {head})"
    print(write_table(rows, cols, Path(cfg.out), title=title) if cfg.out else markdown(rows, cols, title))
    if groups:
        brows, bcols = breakdown_rows(groups), ["Model", "Method", "Module", "Parameters"]
        title = "Parameters of the built model by module"
        print(write_table(brows, bcols, Path(f"{cfg.out}_breakdown"), title=title) if cfg.out
              else markdown(brows, bcols, title))
    return rows

