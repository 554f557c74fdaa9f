"""Sharded training, ``trainer.strategy=fsdp``: PyTorch FSDP2 (``fully_shard``) through Accelerate's plugin.

The method is sharded as one module: every layer of the backbone its own FSDP unit, everything else the root
unit (frozen and trainable parameters share units: FSDP2 keeps ``requires_grad`` per parameter). Gathers and
reductions are fp32 and mixed precision is the loop's autocast, as under DDP; checkpoints hold whole tensors,
and after training the trained tensors are gathered into a fresh single-process copy of the method
(:func:`gather`, :func:`load_whole`). The units, the numerics and what leaves the sharded world:
docs/running.md, "Past one GPU's memory".

Accelerate honours an FSDP plugin only on accelerator devices; on CPU processes (gloo) the state is
switched to FSDP by ``run.accelerate_compat.shard_on_cpu`` (that module holds what embexp assumes of
Accelerate's internals), so the same path runs, and is tested, offline, with two gloo processes.
"""

from __future__ import annotations

import gc
import logging

import torch

from embexp import EmbexpError
from embexp.run.accelerate_compat import FSDP_ENV  # noqa: F401  (preflight and train read it here)

log = logging.getLogger("embexp")


def wants(trainer_cfg) -> bool:
    return trainer_cfg.strategy == "fsdp"


def make_plugin(trainer_cfg):
    """Accelerate's FSDP2 plugin: per-layer units (classes set in :func:`prepare`), full resharding
    after forward, fp32 gathers and reductions (autocast does mixed precision, as under DDP)."""
    from accelerate.utils import FullyShardedDataParallelPlugin
    from torch.distributed.fsdp import MixedPrecisionPolicy

    return FullyShardedDataParallelPlugin(
        fsdp_version=2, auto_wrap_policy="transformer_based_wrap", reshard_after_forward=True,
        activation_checkpointing=bool(trainer_cfg.activation_checkpointing),
        mixed_precision_policy=MixedPrecisionPolicy(), state_dict_type="FULL_STATE_DICT",
        cpu_ram_efficient_loading=False)


def active(acc) -> bool:
    return bool(getattr(acc, "is_fsdp2", False))


def layer_classes(method) -> list[str]:
    """The backbone's layer class names (one FSDP unit per layer)."""
    from embexp.models import attention_sites

    try:
        layers = attention_sites(method.backbone_model)[1]
    except EmbexpError as e:
        raise EmbexpError(f"trainer.strategy=fsdp wraps each layer of the backbone: {e}") from None
    return sorted({type(layer).__name__ for layer in layers})


def check_recompute(method) -> None:
    """Accelerate's FSDP2 activation checkpointing recomputes a layer without restoring the RNG, so
    dropout would draw other masks in the backward pass than in the forward: refused in one line."""
    from embexp.models import attention_sites

    was = method.training
    method.train()  # what the loop trains in (a method may keep the frozen layers in eval mode)
    drops = [m.p for layer in attention_sites(method.backbone_model)[1] for m in layer.modules()
             if isinstance(m, torch.nn.Dropout) and m.training and m.p > 0]
    method.train(was)
    if drops:
        raise EmbexpError(f"trainer.activation_checkpointing=true recomputes layers with dropout {drops[0]} under new "
                          "random masks: use model.gradient_checkpointing=true (restores the RNG), or a backbone "
                          "without dropout")


def fqns(method, tensors: dict) -> dict[str, str]:
    """Trainable tensor name -> its parameter's name in the method module (FSDP shards registered
    parameters only; a tied tensor goes by its first name)."""
    by_id = {id(p): n for n, p in method.named_parameters()}
    missing = [n for n, p in tensors.items() if id(p) not in by_id]
    if missing:
        raise EmbexpError(f"method {method.cfg.name} trains tensors that are not parameters of its module: "
                          f"{missing[:3]} (FSDP shards registered parameters; use trainer.strategy=ddp)")
    return {n: by_id[id(p)] for n, p in tensors.items()}


def live_parameters(model) -> dict:
    """The module's parameters by name, without the wrappers' name parts (activation checkpointing)."""
    return {n.replace("._checkpoint_wrapped_module", ""): p for n, p in model.named_parameters()}


def lift_scalars(method, optimizer) -> None:
    """``fully_shard`` refuses 0-d parameters (TinyTE-gated's alpha and beta): each becomes a
    1-element 1-d parameter in its module and in the optimizer. The method's arithmetic broadcasts
    alike; what leaves the sharded world is reshaped back (``Trainer.shapes``), so adapters and
    checkpoints keep the 0-d shapes."""
    new = {}
    for mod in method.modules():
        for name, p in list(mod._parameters.items()):
            if p is not None and p.dim() == 0:
                new[id(p)] = new.get(id(p)) or torch.nn.Parameter(p.detach().reshape(1).clone(),
                                                                  requires_grad=p.requires_grad)
                mod._parameters[name] = new[id(p)]
    for group in optimizer.param_groups:
        group["params"] = [new.get(id(p), p) for p in group["params"]]


def prepare(acc, method, optimizer, names: list[str]):
    """Shard ``method`` (per-layer units + root) and switch ``optimizer`` to the sharded parameters.
    Returns (model, optimizer, the sharded trainable parameters in ``names`` order, their names)."""
    tensors = method.trainable_tensors()
    names_fqn = fqns(method, {n: tensors[n] for n in names})
    lift_scalars(method, optimizer)
    plugin = acc.state.fsdp_plugin
    plugin.transformer_cls_names_to_wrap = layer_classes(method)
    if plugin.activation_checkpointing:
        check_recompute(method)
        # a recomputed layer would append its keys to the forward's KV cache again (twice the length):
        # no cache while training, as transformers' own gradient checkpointing does (the unsharded copy
        # that evaluates is built afresh, with its cache)
        method.backbone_model.config.use_cache = False
    model, optimizer = acc.prepare(method, optimizer)
    live = live_parameters(model)
    return model, optimizer, [live[names_fqn[n]] for n in names], [names_fqn[n] for n in names]


def full(t: torch.Tensor) -> torch.Tensor:
    """The whole tensor of a shard (a collective: every process calls it), else ``t``."""
    from torch.distributed.tensor import DTensor

    return t.full_tensor() if isinstance(t, DTensor) else t


def local(t: torch.Tensor) -> torch.Tensor:
    from torch.distributed.tensor import DTensor

    return t.to_local() if isinstance(t, DTensor) else t


def place(t: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """A whole tensor sharded like ``like`` (each process keeps its own part, no communication);
    ``t`` itself when ``like`` is not sharded or has another shape (an optimizer's step count)."""
    from torch.distributed.tensor import DTensor, distribute_tensor

    if not isinstance(like, DTensor) or tuple(t.shape) != tuple(like.shape):
        return t
    return distribute_tensor(t.to(like.to_local().device, like.dtype), like.device_mesh, like.placements,
                             src_data_rank=None)


def gather(trainer) -> dict[str, torch.Tensor]:
    """After sharded training: the trained tensors, whole, by parameter name (every process takes part;
    the main process keeps them, for ``train.fit``'s unsharded copy), and the sharded model's memory released."""
    state = trainer.full_state()
    trainer.release()
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    return state


def load_whole(method, state: dict[str, torch.Tensor]) -> None:
    """Copy gathered tensors (:func:`gather`) into an unsharded method, by parameter name."""
    params = dict(method.named_parameters())
    with torch.no_grad():
        for name, t in state.items():
            params[name].copy_(t.reshape(params[name].shape).to(params[name].device, params[name].dtype))
    log.info("gathered %d trained tensors into an unsharded copy for evaluation", len(state))
