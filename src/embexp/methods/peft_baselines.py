"""The PEFT baselines of the TinyTE tables, from the ``peft`` library (not hand-written): LoRA and
prompt tuning. Also the prompt-tuning helpers TinyTE-hybrid composes with. How they use peft (task
types, the encoder's head, the scaled virtual tokens, generation): docs/methods_tinyte.md.
``peft`` is imported lazily (it is slow to import).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import torch
from torch import nn

from embexp import EmbexpError
from embexp.core.config import option
from embexp.methods.base import Comparison, Method, MethodConfig
from embexp.methods.registry import register_method
from embexp.models import untie_embeddings

PROMPT_INITS = ("random", "sample_vocab", "text")


@dataclass
class LoRAConfig(MethodConfig):
    r: int = option(8, "LoRA rank (the paper's baseline: r=8).", ge=1)
    alpha: float = option(
        16.0, "lora_alpha; the update is scaled by alpha / r (ours: 16, the paper does not say).", gt=0)
    dropout: float = option(0.05, "Dropout on the LoRA branch input (ours: 0.05).", ge=0, lt=1)
    target_modules: list = option(
        ["all-linear"], "Modules given LoRA: [all-linear] = every nn.Linear inside the pretrained "
        "body (attention and MLP projections of every family; never lm_head or an encoder's head; "
        "ours, the paper does not say), or peft module names/suffixes such as [q_proj,v_proj].")


@dataclass
class PromptTuningMethodConfig(MethodConfig):
    num_virtual_tokens: int = option(1, "Learned prompt tokens prepended to the input (the paper: 1, 2 or 20; tag runs "
                                     "tk<N>).", ge=1)
    init: str = option("sample_vocab", "Initial prompt: random (peft RANDOM, N(0,1)), sample_vocab (peft "
                       "SAMPLE_VOCAB's draw: the embedding rows of random vocabulary ids) or text (the embedding rows "
                       "of init_text's tokens, repeated/truncated to num_virtual_tokens, tokenised with the run's own "
                       "tokenizer). Rows are raw (before Gemma-2's sqrt(d) scale, which the prompt gets when it enters "
                       "the model). Default ours.", choices=PROMPT_INITS)
    init_text: str = option("", "Text for init=text.")


# ---- helpers shared with TinyTE-hybrid ----------------------------------------------------------
def task_type(method: Method) -> str:
    return "CAUSAL_LM" if method.is_decoder else "SEQ_CLS"


def wrap(method: Method, peft_config) -> nn.Module:
    """``get_peft_model`` on the method's backbone, keeping its train/eval mode and its own head."""
    from peft import get_peft_model
    from peft.utils import ModulesToSaveWrapper

    training = method.model.training
    try:
        model = get_peft_model(method.model, peft_config)
    except ValueError as e:
        raise EmbexpError(f"method {method.cfg.name}: peft rejected the config: {str(e).splitlines()[0]}") from e
    for name, mod in list(model.named_modules()):
        if isinstance(mod, ModulesToSaveWrapper):  # SEQ_CLS: peft's copy of the classifier -> the original
            parent, _, child = name.rpartition(".")
            setattr(model.get_submodule(parent), child, mod.original_module)
    model.train(training)
    return model


def prompt_tuning_model(method: Method, n: int, init: str = "random") -> nn.Module:
    """The backbone wrapped by peft prompt tuning with ``n`` virtual tokens, in the raw row space and
    multiplied by ``embed_scale`` as they enter (why, and the ``sample_vocab`` draw: docs/methods_tinyte.md)."""
    from peft import PromptTuningConfig as PeftPromptTuningConfig
    from peft import PromptTuningInit

    model = wrap(method, PeftPromptTuningConfig(task_type=task_type(method), num_virtual_tokens=n,
                                                prompt_tuning_init=PromptTuningInit.RANDOM))
    if init == "sample_vocab":
        init_prompt(model, torch.randint(0, model.get_input_embeddings().weight.shape[0], (n,)).tolist())
    scale = method.embed_scale
    if scale != 1.0:
        model.prompt_encoder[model.active_adapter].register_forward_hook(lambda mod, args, out: out * scale)
    return model


def prompt_parameter(model) -> nn.Parameter:
    return model.prompt_encoder[model.active_adapter].embedding.weight


def init_prompt(model, token_ids: list[int]) -> nn.Parameter:
    """Set the prompt to the raw embedding rows of ``token_ids`` (repeated/truncated to fit); the
    prompt encoder's hook scales them on the way in, as the embedding module scales real tokens."""
    weight = prompt_parameter(model)
    n = weight.shape[0]
    ids = (token_ids * (n // len(token_ids) + 1))[:n]
    rows = model.get_input_embeddings().weight.detach()
    with torch.no_grad():
        weight.copy_(rows[torch.tensor(ids, device=rows.device)].to(weight.dtype))
    return weight


def virtual_tokens(model, batch_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The prompt-learning prefix for the shared path (``Method.prefix``, prefix_mode='prepend'):
    peft's virtual tokens [B, n, d] and their all-ones mask."""
    x = model.get_prompt(batch_size=batch_size)
    return x, torch.ones(x.shape[:2], dtype=torch.long, device=x.device)


def lora_tensors(model) -> dict[str, nn.Parameter]:
    """Every parameter of peft's LoRA layers for the active adapter, by its qualified name."""
    from peft.tuners.lora import LoraLayer

    names = {id(p): n for n, p in model.named_parameters(remove_duplicate=False)}
    out = {}
    for mod in model.modules():
        if not isinstance(mod, LoraLayer):
            continue
        for attr in mod.adapter_layer_names:
            group = getattr(mod, attr, None)
            if group is None or model.active_adapter not in group:
                continue
            obj = group[model.active_adapter]
            for p in [obj] if isinstance(obj, nn.Parameter) else obj.parameters():
                out[names[id(p)]] = p
    return out


def body_linear_names(model: nn.Module) -> list[str]:
    """Every nn.Linear inside the pretrained body (``base_model_prefix``): not lm_head, not a task head."""
    prefix = model.base_model_prefix + "."
    return sorted(n for n, m in model.named_modules() if isinstance(m, nn.Linear) and n.startswith(prefix))


# ---- the methods --------------------------------------------------------------------------------
@register_method("lora")
class LoRA(Method):
    """LoRA (Hu et al., 2022) from peft: B = 0 at init, so the identity. Export merges the update
    into the weights (``merge_and_unload`` on a copy) and gives the plain model."""

    Config = LoRAConfig
    label = "LoRA (r=8)"
    comparison = Comparison(rank=40, lr=1e-3)

    def __init__(self, cfg, backbone):
        from peft import LoraConfig as PeftLoraConfig

        super().__init__(cfg, backbone)
        targets = list(cfg.target_modules)
        if targets == ["all-linear"]:
            targets = body_linear_names(self.model)
        if not targets:
            raise EmbexpError(f"method.target_modules={list(cfg.target_modules)} selects no module of "
                              f"{type(self.model).__name__}")
        self.model = wrap(self, PeftLoraConfig(task_type=task_type(self), r=cfg.r, lora_alpha=cfg.alpha,
                                               lora_dropout=cfg.dropout, target_modules=targets, bias="none"))
        self._lora = lora_tensors(self.model)

    def method_tensors(self):
        return dict(self._lora)

    def export(self):
        model = copy.deepcopy(self.model)
        # tied input/output embeddings: merging LoRA on embed_tokens or lm_head into one shared
        # matrix would apply each update to both; untie first so each gets only its own
        untie_embeddings(model.get_base_model())
        model = model.merge_and_unload()
        model.train(False)
        return model


@register_method("prompt_tuning")
class PromptTuning(Method):
    """Prompt tuning (Lester et al., 2021) from peft: ``num_virtual_tokens`` learned embeddings
    prepended to the input, in the raw row space and scaled on the way in like token rows
    (``prompt_tuning_model``). Not the identity at init (the sequence changes). Decoders go through
    the method contract's shared prefix path (``prefix_mode='prepend'``): logits aligned with
    ``input_ids``, generation that prefills with ``inputs_embeds`` with the virtual tokens after the
    left padding (peft's own generate puts them before it and drops position ids, so answers
    depended on the batch: demo SST-2 EM 68.8 at batch 32 vs 76.6 at batch 1), then continues with
    ids on the KV cache. Encoders use peft's forward. No plain model can hold extra positions:
    export raises."""
    export_blocker = "its virtual tokens are extra input positions, not rows of the embedding table"

    Config = PromptTuningMethodConfig
    label = "PromptT"
    identity_at_init = False  # the virtual tokens are prepended
    comparison = Comparison(rank=50, lr=1e-2)

    def __init__(self, cfg, backbone):
        super().__init__(cfg, backbone)
        self.n = cfg.num_virtual_tokens
        self.model = prompt_tuning_model(self, self.n, cfg.init)
        self.prompt = prompt_parameter(self.model)
        if cfg.init == "text":
            ids = self.tokenizer(cfg.init_text, add_special_tokens=False)["input_ids"] if cfg.init_text else []
            if not ids:
                raise EmbexpError("method.init=text needs a non-empty method.init_text")
            init_prompt(self.model, ids)

    def method_tensors(self):
        return {"prompt": self.prompt}

    prefix_mode = "prepend"

    def prefix(self, input_ids, attention_mask):
        return virtual_tokens(self.model, input_ids.shape[0])
