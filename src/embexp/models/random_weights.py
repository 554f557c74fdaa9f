"""Real shapes with random weights (``model.init=random``): the architecture of a paper model stored in
``models/specs.py``, built with its real transformers class and random weights, on any device and in
any dtype, without the hub; and a tokenizer that downloads nothing (:class:`HashTokenizer`). What such a
model answers and what a run on it records: docs/running.md, "Real shapes, random weights"
(tests/test_random_weights.py checks every stored architecture against the counts the reproduction ledger uses).
"""

from __future__ import annotations

import zlib

import torch
from transformers import PreTrainedTokenizer

from embexp import EmbexpError
from embexp.models.offline import from_config
from embexp.models.specs import SPECS, architecture

DECODER_SPECIALS = {"pad_token": "<pad>", "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}
ENCODER_SPECIALS = {"pad_token": "[PAD]", "cls_token": "[CLS]", "sep_token": "[SEP]", "unk_token": "[UNK]",
                    "mask_token": "[MASK]"}


class HashTokenizer(PreTrainedTokenizer):
    """Synthetic token ids over a real vocabulary size: every whitespace-separated word is one token (and a
    text of whitespace alone one token), ``t<k>`` (what :meth:`decode` writes) is id k, any other word the
    CRC-32 of its bytes modulo the ids after the special tokens (ids 0.., :data:`DECODER_SPECIALS` or
    :data:`ENCODER_SPECIALS`). Deterministic, nothing to download, any vocabulary size; the ids carry no
    meaning, which is all a random-weight model can use."""

    model_input_names = ["input_ids", "attention_mask"]

    def __init__(self, vocab_size: int, encoder: bool = False, **kw):
        specials = ENCODER_SPECIALS if encoder else DECODER_SPECIALS
        self._size, self._encoder, self._specials = int(vocab_size), encoder, list(specials.values())
        if self._size <= 2 * len(self._specials):
            raise EmbexpError(f"HashTokenizer: vocab_size={vocab_size} leaves no room for words (> "
                              f"{2 * len(self._specials)} needed)")
        super().__init__(**specials, **kw)

    @property
    def vocab_size(self) -> int:
        return self._size

    def __len__(self) -> int:
        return self._size

    def get_vocab(self) -> dict[str, int]:
        return {t: i for i, t in enumerate(self._specials)}

    def _tokenize(self, text: str, **kw) -> list[str]:
        return text.split() or ([" "] if text else [])  # whitespace alone is one token (K-Token pads with ' ')

    def _convert_token_to_id(self, token: str) -> int:
        n = len(self._specials)
        if token in self._specials:
            return self._specials.index(token)
        if token[:1] == "t" and token[1:].isdigit() and n <= int(token[1:]) < self._size:
            return int(token[1:])
        return n + zlib.crc32(token.encode("utf-8")) % (self._size - n)

    def _convert_id_to_token(self, index: int) -> str:
        return self._specials[index] if index < len(self._specials) else f"t{index}"

    def build_inputs_with_special_tokens(self, a: list[int], b: list[int] | None = None) -> list[int]:
        if self._encoder:
            out = [self.cls_token_id, *a, self.sep_token_id]
            return out + [*b, self.sep_token_id] if b else out
        return [self.bos_token_id, *a, *(b or [])]

    def get_special_tokens_mask(self, a, b=None, already_has_special_tokens: bool = False) -> list[int]:
        if already_has_special_tokens:
            return [int(i < len(self._specials)) for i in a]
        if self._encoder:
            return [1, *[0] * len(a), 1] + ([*[0] * len(b), 1] if b else [])
        return [1, *[0] * (len(a) + len(b or []))]

    def create_token_type_ids_from_sequences(self, a: list[int], b: list[int] | None = None) -> list[int]:
        return [0] * len(self.build_inputs_with_special_tokens(a, b))

    def save_vocabulary(self, save_directory: str, filename_prefix: str | None = None) -> tuple:
        return ()


def check_random(cfg) -> None:
    """model.init=random needs a stored architecture of the model's own kind that ``model.spec`` leaves valid:
    one line otherwise (run.preflight.preflight asks before anything loads)."""
    if cfg.name not in SPECS:
        raise EmbexpError(f"model.init=random: model '{cfg.name}' has no stored architecture in models/specs.py "
                          f"(choose from: {', '.join(SPECS)})")
    if SPECS[cfg.name]["kind"] != cfg.kind:
        raise EmbexpError(f"model.init=random: the stored architecture of '{cfg.name}' is an "
                          f"{SPECS[cfg.name]['kind']}, but model.kind is {cfg.kind}")
    spec = dict(cfg.get("spec") or {})
    check_spec(cfg.name, spec)
    checked_architecture(cfg.name, spec)


def architecture_fields(name: str) -> dict:
    """The fields of ``name``'s stored architecture: its config class's defaults with the stored values over them
    (what ``model.spec`` may replace)."""
    import transformers as tf

    return {**tf.CONFIG_MAPPING[SPECS[name]["family"]]().to_dict(), **SPECS[name]["config"]}


def check_spec(name: str, spec: dict) -> None:
    """``model.spec`` names only fields of the architecture's config class, each of the type of its stored (or
    class default) value, and a size (an integer field whose stored value is positive) stays >= 1: one line
    naming the field and what is valid. transformers' configs take any keyword as an attribute, so a misspelled
    field would otherwise be ignored and the full-size model built."""
    import difflib

    import transformers as tf

    family = SPECS[name]["family"]
    known = architecture_fields(name)
    for key, value in spec.items():
        if key not in known:
            close = difflib.get_close_matches(key, list(known), n=3)
            raise EmbexpError(f"model.spec.{key} is not a field of {name}'s architecture ({family}'s "
                              f"{tf.CONFIG_MAPPING[family].__name__})"
                              + (f"; did you mean {', '.join(close)}?" if close else "")
                              + f" (its sizes: {', '.join(k for k in SIZES if k in known)})")
        stored = known[key]
        if isinstance(stored, bool) or stored is None:
            if isinstance(stored, bool) and not isinstance(value, bool):
                raise EmbexpError(f"model.spec.{key}={value!r} is not true or false")
            continue
        if isinstance(stored, int) and (isinstance(value, bool) or not isinstance(value, int)):
            raise EmbexpError(f"model.spec.{key}={value!r} is not a whole number (valid: an integer, as the stored "
                              f"{stored})")
        if isinstance(stored, float) and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise EmbexpError(f"model.spec.{key}={value!r} is not a number (valid: a number, as the stored {stored})")
        if isinstance(stored, int) and stored > 0 and value < 1:
            raise EmbexpError(f"model.spec.{key}={value} is out of range (valid: >= 1; {name} has {stored})")


SIZES = ("num_hidden_layers", "hidden_size", "intermediate_size", "num_attention_heads", "num_key_value_heads",
         "vocab_size")  # the fields a spec usually shrinks, named in its error line


def check_fits(cfg, device: str, processes: int = 1) -> int:
    """The parameter count of the random-weight model ``cfg.model`` as built (shapes on the meta device, no
    memory); one line with that count and the memory of its float32 weights where they exceed the memory free
    on ``device`` (a process's share on the CPU), before anything is allocated. Returns the count."""
    mcfg = cfg.model
    with torch.device("meta"):
        model, _ = random_model(mcfg, mcfg.kind == "decoder", 2, False, device="meta")
    count = sum(p.numel() for p in model.parameters())
    need, free = 4 * count, free_memory(device) // max(1, processes)
    if free and need > free:
        spec = dict(mcfg.get("spec") or {})
        raise EmbexpError(f"model.init=random: {mcfg.name}{f' with model.spec {spec}' if spec else ''} has "
                          f"{count:,} parameters, {need / 2**30:.1f} GiB of float32 weights as built, more than the "
                          f"{free / 2**30:.1f} GiB free on {device}{' per process' if processes > 1 else ''} "
                          f"(shrink it: +model.spec.num_hidden_layers=N)")
    return count


def free_memory(device: str) -> int:
    """Bytes free on ``device``: the GPU's free memory, else the CPU's available memory (psutil, which
    Accelerate depends on; on Linux /proc/meminfo's MemAvailable)."""
    if device.startswith("cuda") and torch.cuda.is_available():
        return int(torch.cuda.mem_get_info()[0])
    import psutil

    return int(psutil.virtual_memory().available)


def random_model(cfg, is_decoder: bool, num_labels: int, mlm: bool, device=None):
    """(model, tokenizer): the stored architecture of ``cfg.name`` (``model.spec`` overrides its fields, e.g.
    fewer layers to shrink it), random weights drawn from the current RNG state (train.py seeds it with
    ``seed``), built in fp32 on ``device`` (default: the CPU; ``meta``: shapes only), with a
    :class:`HashTokenizer` over its vocabulary. load_backbone casts to ``model.dtype`` afterwards, so a bf16
    and an fp32 copy built with the same seed hold the same weights up to rounding."""
    check_random(cfg)
    spec = dict(cfg.get("spec") or {})
    tok = HashTokenizer(checked_architecture(cfg.name, spec).vocab_size, encoder=not is_decoder)
    fields = {**spec, "pad_token_id": tok.pad_token_id}
    if not is_decoder:
        fields.update({k: getattr(tok, k) for k in ("cls_token_id", "sep_token_id")})
    config = checked_architecture(cfg.name, fields)
    with torch.device(device or "cpu"):
        model = from_config(cfg, config, tok, is_decoder, num_labels, mlm)
    return model, tok


def checked_architecture(name: str, fields: dict):
    """:func:`architecture` with ``fields``; a combination transformers rejects (say a hidden size that the
    heads do not divide) is one line."""
    try:
        return architecture(name, **fields)
    except Exception as e:  # noqa: BLE001  (huggingface_hub's validation errors are of their own types)
        spec = {k: v for k, v in fields.items() if not k.endswith("_token_id")}
        raise EmbexpError(f"model.init=random: the architecture of '{name}' with model.spec {spec} is not valid: "
                          f"{str(e).strip().splitlines()[-1].strip()}") from None
