"""Load a backbone and its tokenizer (:func:`load_backbone`): hub ids and local folders, the offline
models (``models.offline``), an encoder's task head (``model.head``), and the quirks of each family
that a method must know (:class:`Backbone`: Gemma-2's embedding scale, special ids, the head's
parameters; :func:`untie_embeddings`)."""

from __future__ import annotations

import functools
import inspect
import logging
from dataclasses import dataclass

import torch
from torch import nn

from embexp import EmbexpError
from embexp.models.offline import attn_kwargs, auto_class, minilm_path, scratch_model, smollm2_path, tiny_model

log = logging.getLogger(__name__)


@dataclass
class Backbone:
    model: nn.Module
    tokenizer: object
    cfg: object  # ModelConfig
    is_decoder: bool
    mlm: bool = False  # an encoder loaded with its masked-LM head (cloze tasks, embexp.objectives.cloze)

    @property
    def hidden_size(self) -> int:
        """From the model config, so it holds after a method replaces the embedding module."""
        return int(text_config(self.model).hidden_size)

    @property
    def vocab_size(self) -> int:
        return int(text_config(self.model).vocab_size)

    @property
    def embed_scale(self) -> float:
        """The factor the input embedding module multiplies its rows by: sqrt(d) for Gemma-2 (and
        the other families whose module has ``scalar_embed_scale``/``embed_scale``), 1.0 elsewhere.

        In transformers 4.x Gemma-2 scaled in the model's forward, after ``inputs_embeds``; in 5.x
        the scaling sits inside the embedding module. Methods that add to embeddings work in the
        raw row space and multiply by this factor themselves, so they behave as on 4.x.
        """
        emb = self.model.get_input_embeddings()
        s = getattr(emb, "scalar_embed_scale", None)
        if s is None:
            s = getattr(emb, "embed_scale", 1.0)
        return float(s.item() if torch.is_tensor(s) else s)

    def special_ids(self) -> list[int]:
        """Token ids that embedding methods never shift: every special token the tokenizer knows."""
        ids = set(self.tokenizer.all_special_ids)
        for tok in getattr(self.tokenizer, "added_tokens_decoder", {}).values():
            if getattr(tok, "special", False):
                ids.add(self.tokenizer.convert_tokens_to_ids(tok.content))
        return sorted(i for i in ids if i is not None and 0 <= i < self.vocab_size)

    def special_mask(self) -> torch.Tensor:
        mask = torch.zeros(self.vocab_size, dtype=torch.bool)
        mask[self.special_ids()] = True
        return mask

    def head_parameters(self) -> list[tuple[str, nn.Parameter]]:
        """An encoder's task head: every parameter outside the pretrained base model
        (classifier; DeBERTa's context pooler). Trained by every method except zero_shot.
        A base model without a head (sentence-embedding tasks) has none, and neither has a
        masked-LM model: its head is pretrained and stays frozen, the verbalizers take the place of
        a classifier (ours: PET trains the whole model, the Tiny-Attention paper only says the
        prompts "replace the classification head")."""
        if self.is_decoder or self.mlm or self.model.base_model is self.model:
            return []
        base = self.model.base_model_prefix + "."
        return [(n, p) for n, p in self.model.named_parameters() if not n.startswith(base)]


def cache_kwarg(model: nn.Module) -> str:
    """The keyword a transformers model's forward takes its KV cache by: ``cache`` from transformers 5.24 on
    (``past_key_values`` still works there, with a FutureWarning per call site), ``past_key_values`` before."""
    return _cache_kwarg(type(model))


@functools.cache  # read once per model class: greedy decoding asks at every generated token
def _cache_kwarg(cls: type) -> str:
    return "cache" if "cache" in inspect.signature(cls.forward).parameters else "past_key_values"


def output_cache(out):
    """The KV cache a forward with ``use_cache=True`` returned, under either name (see :func:`cache_kwarg`)."""
    return out["cache"] if "cache" in out else out["past_key_values"]


def untie_embeddings(model: nn.Module) -> bool:
    """Give a tied output head its own frozen copy of the input embedding matrix, in place.

    Sets ``tie_word_embeddings=False`` on the config (and its text config), so a saved model stays
    untied. Looks through peft's wrappers (``base_layer``). Returns whether the two were tied.
    """
    emb, out = model.get_input_embeddings(), model.get_output_embeddings()
    if out is None:
        return False
    weight, head = getattr(emb, "base_layer", emb).weight, getattr(out, "base_layer", out)
    if head.weight is not weight:
        return False
    head.weight = nn.Parameter(weight.detach().clone(), requires_grad=False)
    config = model.config
    for c in (config, getattr(config, "get_text_config", lambda: None)()):
        if c is not None:
            c.tie_word_embeddings = False
    return True


def text_config(model: nn.Module):
    """The config that describes the language model (multimodal configs nest it)."""
    cfg = model.config
    return getattr(cfg, "get_text_config", lambda: cfg)() or cfg


def resolve_dtype(name: str) -> torch.dtype:
    table = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
    if name == "auto":
        return torch.float32  # trainable math in fp32; speed comes from autocast (trainer.mixed_precision)
    if name not in table:
        raise EmbexpError(f"unknown model.dtype '{name}' (choose from: auto, {', '.join(table)})")
    return table[name]


LINEAR_HEAD_FAMILIES = ("roberta", "xlm-roberta", "bert")


class FirstTokenLinear(nn.Module):
    """``model.head=linear`` (what it is: its help in core/config.py), initialised as transformers initialises a
    Linear (normal(0, initializer_range), bias 0), as the Tiny-Attention authors' ``post_init`` does."""

    def __init__(self, config, num_labels: int):
        super().__init__()
        p = getattr(config, "classifier_dropout", None)
        self.dropout = nn.Dropout(config.hidden_dropout_prob if p is None else p)
        self.out_proj = nn.Linear(config.hidden_size, num_labels)
        nn.init.normal_(self.out_proj.weight, std=config.initializer_range)
        nn.init.zeros_(self.out_proj.bias)

    def forward(self, features, **kw):
        return self.out_proj(self.dropout(features[:, 0]))


class FirstToken(nn.Module):
    """Stands in for BERT's pooler (dense + tanh) under ``model.head=linear``: the first token as is."""

    def forward(self, hidden_states):
        return hidden_states[:, 0]


def check_linear_head(family: str) -> None:
    if family and family not in LINEAR_HEAD_FAMILIES:
        raise EmbexpError(f"model.head=linear is not defined for model family '{family}' "
                          f"(families: {', '.join(LINEAR_HEAD_FAMILIES)}; else model.head=transformers)")


def use_linear_head(model: nn.Module, num_labels: int) -> None:
    """Replace an encoder's sequence-classification head by :class:`FirstTokenLinear` (in place)."""
    config = text_config(model)
    check_linear_head(config.model_type)
    ref = next(model.parameters())
    if config.model_type == "bert":  # classifier = dropout + Linear(d, n) on the pooler: drop the pooler's dense + tanh
        model.base_model.pooler = FirstToken()
        head = FirstTokenLinear(config, num_labels)
        model.classifier = head.out_proj
    else:  # RobertaClassificationHead reads the token states
        model.classifier = FirstTokenLinear(config, num_labels)
    model.classifier.to(device=ref.device if not ref.is_meta else "meta", dtype=ref.dtype)


def load_backbone(cfg, num_labels: int = 0, sentence: bool = False, mlm: bool = False, device=None) -> Backbone:
    """Load model + tokenizer as configured. Encoders get a head with ``num_labels`` outputs, none
    with ``sentence=True`` (the base model, for sentence-embedding tasks), or their pretrained
    masked-LM head with ``mlm=True`` (cloze tasks; ``num_labels`` is then unused). ``device``: where
    a ``model.init=random`` model is built (an 8B model is drawn on the GPU in seconds, not on the CPU
    in minutes; ``meta``: shapes only); other models load on the CPU and the caller moves them."""
    dtype = resolve_dtype(cfg.dtype)  # cfg: validated (model.kind, model.source inside their schema domains)
    is_decoder = cfg.kind == "decoder"
    if sentence and is_decoder:
        raise EmbexpError(f"model {cfg.name} is a decoder: sentence-embedding tasks need model.kind=encoder")
    if mlm and is_decoder:
        raise EmbexpError(f"model {cfg.name} is a decoder: cloze tasks (task.cloze=true) need an encoder "
                          "with a masked-LM head")
    if sentence or mlm:
        num_labels = 0
    elif not is_decoder and num_labels <= 0:
        raise EmbexpError(f"model {cfg.name} is an encoder: it needs a classification, regression "
                          "or sentence-embedding task")
    linear_head = cfg.head == "linear" and not is_decoder and num_labels > 0
    if linear_head:
        check_linear_head(cfg.family)  # before the weights load, where the family is configured
    if cfg.init == "random":
        from embexp.models.random_weights import random_model

        model, tok = random_model(cfg, is_decoder, num_labels, mlm, device)
    elif cfg.source == "tiny":
        model, tok = tiny_model(cfg, num_labels, mlm)
    elif cfg.source == "scratch":
        model, tok = scratch_model(cfg, is_decoder, num_labels, mlm)
    else:  # hub, minilm, smollm2
        path = {"hub": lambda: cfg.id, "minilm": minilm_path, "smollm2": smollm2_path}[cfg.source]()
        if not path:
            raise EmbexpError(f"model {cfg.name}: model.id is empty (a hub id or local folder)")
        model, tok = pretrained_model(cfg, str(path), is_decoder, num_labels, dtype, mlm)
    if linear_head:
        use_linear_head(model, num_labels)
    if not is_decoder and "token_type_ids" not in inspect.signature(model.forward).parameters:
        # e.g. ModernBERT with the BERT tokenizer: never feed the model an input it does not read
        tok.model_input_names = [n for n in tok.model_input_names if n != "token_type_ids"]
    model.to(dtype=dtype)
    model.eval()  # from_config leaves dropout on; the trainer switches to train() itself
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    if is_decoder:
        tok.padding_side = "left"
        model.generation_config.pad_token_id = tok.pad_token_id
    model.config.pad_token_id = tok.pad_token_id
    if cfg.gradient_checkpointing:
        model.gradient_checkpointing_enable()
        model.enable_input_require_grads()
    return Backbone(model=model, tokenizer=tok, cfg=cfg, is_decoder=is_decoder, mlm=mlm)


def pretrained_model(cfg, path: str, is_decoder: bool, num_labels: int, dtype: torch.dtype, mlm: bool = False):
    from transformers import AutoTokenizer

    kw = dict(revision=cfg.revision, trust_remote_code=cfg.trust_remote_code)
    cls, fields = auto_class(is_decoder, num_labels, mlm)
    try:
        tok = AutoTokenizer.from_pretrained(path, **kw)
        model, info = cls.from_pretrained(path, dtype=dtype, output_loading_info=True, **fields, **attn_kwargs(cfg),
                                          **kw)
    except OSError as e:
        raise EmbexpError(f"could not load model '{path}': {str(e).splitlines()[0]}") from e
    if mlm and info.get("missing_keys"):  # e.g. MiniLM (a sentence-transformers checkpoint): no MLM head stored
        log.warning("model %s has no pretrained masked-LM head: %s initialised at random",
                    cfg.name, ", ".join(sorted(info["missing_keys"])[:4]))
    return model, tok
