"""Turn task examples into token features and padded batches (the only place that tokenises).

A run builds one :class:`Featurizer`, and it tokenises each text once: ``run.build``'s features,
generation, log-likelihood scoring of the choices and the compression metrics of every evaluation
(the final one and each ``trainer.curve_at`` point) read the same ids (``Featurizer.encode``)."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import torch

from embexp import EmbexpError
from embexp.tasks.base import MASK, Example

log = logging.getLogger("embexp")

IGNORE = -100
PROMPT_LENGTH = "prompt_length"    # decoder feature: number of prompt ids at the start of input_ids
PROMPT_LENGTHS = "prompt_lengths"  # its batch tensor [batch], read by methods, never given to the backbone
MASK_POSITION = "mask_position"    # encoder cloze feature: index of the mask token in input_ids
MASK_POSITIONS = "mask_positions"  # its batch tensor [batch] (read by embexp.objectives.cloze, never by the backbone)


@dataclass
class Lengths:
    """What featurising one example kept: the source (prompt, or an encoder's input) and the target
    (decoders), in tokens before and after the cut (the target without the EOS the trainer adds)."""

    source: int
    source_kept: int
    target: int = 0
    target_kept: int = 0

    @property
    def source_cut(self) -> bool:
        return self.source_kept < self.source

    @property
    def target_cut(self) -> bool:
        return self.target_kept < self.target


# a token spans at most this many characters in practice (whitespace runs, long words): Featurizer.bounded
CHARS_PER_TOKEN = 64


@dataclass
class Featurizer:
    """Tokenises examples for one backbone; decoders get prompt/target ids, encoders text pairs."""

    tokenizer: object
    is_decoder: bool
    max_source_tokens: int = 512
    max_target_tokens: int = 128
    chat_template: bool = False
    loss_on: str = "target"  # decoders: target (prompt labels -100) or all (every token of prompt + target)
    separate: bool = False  # encoders, sentence-embedding tasks: the texts of an example are two sequences
    # every encoding made so far, keyed by its kind and text: one tokenisation per text per featurizer (per run).
    # Costs a reference per token of each featurised text (~8 bytes), beside the features themselves.
    _memo: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    def bounded(self, text: str, tokens: int, keep_end: bool = False) -> str:
        """``text`` cut to ``CHARS_PER_TOKEN`` characters per token kept (its start, or its end where the cut
        keeps the end) before it is tokenised, so one huge row costs memory in proportion to what is kept, not to
        its size; a row that long is cut anyway, and its length before the cut then counts the kept part."""
        most = tokens * CHARS_PER_TOKEN
        if not isinstance(text, str) or len(text) <= most:
            return text
        return text[-most:] if keep_end else text[:most]

    def encode(self, text: str, special: bool = True) -> list[int]:
        """The tokenizer's ids of `text`, with its special tokens unless `special` is false; each
        text is tokenised once per featurizer (the list returned is the caller's own)."""
        key = ("special" if special else "plain", text)
        ids = self._memo.get(key)
        if ids is None:
            ids = self._memo[key] = tuple(self.tokenizer(text, add_special_tokens=special)["input_ids"])
        return list(ids)

    def prompt_ids(self, prompt: str) -> list[int]:
        return self._prompt(prompt)[0]

    def target_ids(self, target: str) -> list[int]:
        return self._target(target)[0]

    def train_features(self, ex: Example) -> dict:
        return self.features(ex)[0]

    def _prompt(self, prompt: str) -> tuple[list[int], int]:
        """The prompt's ids, cut to ``max_source_tokens``, and its length before the cut."""
        tok = self.tokenizer
        prompt = self.bounded(prompt, self.max_source_tokens, keep_end=True)
        ids = self._chat_ids(prompt) if self.chat_template else self.encode(prompt)
        n, full = self.max_source_tokens, len(ids)
        if len(ids) > n:  # keep the leading BOS and the end of the prompt (where the question is)
            keep_bos = tok.bos_token_id is not None and ids[0] == tok.bos_token_id
            ids = ids[:1] + ids[len(ids) - n + 1:] if keep_bos else ids[len(ids) - n:]
        return ids, full

    def _chat_ids(self, prompt: str) -> list[int]:
        """The prompt as the user's turn of the tokenizer's chat template, with the reply's opening."""
        key = ("chat", prompt)  # the rendered text, once per prompt; its ids are encode's
        if key not in self._memo:
            tok = self.tokenizer
            if not getattr(tok, "chat_template", None):
                raise EmbexpError("model.chat_template=true but the tokenizer has no chat template")
            self._memo[key] = tok.apply_chat_template([{"role": "user", "content": prompt}], tokenize=False,
                                                      add_generation_prompt=True)
        return self.encode(self._memo[key], special=False)

    def _target(self, target: str) -> tuple[list[int], int]:
        """The target's ids cut to ``max_target_tokens``, then EOS; and its length before the cut."""
        ids = self.encode(self.bounded(target, self.max_target_tokens), special=False)
        return ids[: self.max_target_tokens] + [self.tokenizer.eos_token_id], len(ids)

    def features(self, ex: Example) -> tuple[dict, Lengths]:
        """The training/evaluation features of one example and its :class:`Lengths` (what was cut)."""
        if not self.is_decoder:
            return self._encoder(ex)
        (p, np_), (t, nt) = self._prompt(ex.prompt), self._target(ex.target)
        labels = p + t if self.loss_on == "all" else [IGNORE] * len(p) + t
        # prompt_length: how many leading ids are the prompt, whatever carries the loss (collate
        # passes it on as "prompt_lengths"; the backbone never receives it)
        return {"input_ids": p + t, "labels": labels, PROMPT_LENGTH: len(p)}, Lengths(np_, len(p), nt, len(t) - 1)

    def encoder_features(self, ex: Example) -> dict:
        return self._encoder(ex)[0]

    def _cut(self, *text: str):
        """The tokenizer's encoding of one text or a pair, truncated to ``max_source_tokens`` (its
        longest_first strategy for a pair), and the length before the cut (once per text or pair)."""
        text = tuple(self.bounded(t, self.max_source_tokens) for t in text)
        key = ("cut", self.max_source_tokens, text)
        if key not in self._memo:
            enc = whole = self.tokenizer(*text)
            n = len(whole["input_ids"])
            if n > self.max_source_tokens:
                enc = self.tokenizer(*text, truncation=True, max_length=self.max_source_tokens)
            self._memo[key] = ({k: tuple(v) for k, v in enc.items()}, n)
        enc, n = self._memo[key]
        return {k: list(v) for k, v in enc.items()}, n

    def _encoder(self, ex: Example) -> tuple[dict, Lengths]:
        if ex.cloze:
            return self._cloze(ex)
        if self.separate:  # text pairs for sentence embeddings: input_ids / input_ids_b (embexp.objectives.sentence)
            cut = [self._cut(t) for t in ex.text]
            ids = [list(enc["input_ids"]) for enc, _ in cut]
            out = {"input_ids": ids[0], "input_ids_b": ids[1]}
            if ex.label is not None:
                out["labels"] = ex.label
            worst = max(range(len(cut)), key=lambda i: cut[i][1] - len(ids[i]))  # the text that lost the most
            return out, Lengths(cut[worst][1], len(ids[worst]))
        enc, n = self._cut(*ex.text)
        out = {k: list(v) for k, v in enc.items() if k in ("input_ids", "token_type_ids")}
        out["labels"] = ex.label
        return out, Lengths(n, len(out["input_ids"]))

    # ---- cloze (PET's pattern-verbalizer pairs, embexp.objectives.cloze) ------------------------------------
    def _cloze(self, ex: Example) -> tuple[dict, Lengths]:
        """PET's ``PVP.encode``: every part of the two segments is tokenised on its own (no special
        tokens), the mask part becomes the mask token, the shortenable parts are cut to
        ``max_source_tokens`` (PET's ``truncate``: one token at a time from the last shortenable
        part of the segment with more shortenable tokens, segment b on ties), and the tokenizer's
        own special tokens are put around the segments (its template for one or two sequences)."""
        tok = self.tokenizer
        if tok.mask_token_id is None:
            raise EmbexpError("cloze tasks need a tokenizer with a mask token (an encoder with a masked-LM head)")
        segs = [[(([tok.mask_token_id] if text == MASK else self.encode(text, special=False)), short)
                 for text, short in parts if text] for parts in ex.cloze]
        segs = [s for s in segs if s]
        pieces, types = special_template(tok, len(segs))
        n_special = sum(len(p) for p in pieces)
        length = lambda seg, only=False: sum(len(x) for x, s in seg if s or not only)  # noqa: E731
        whole = sum(length(s) for s in segs) + n_special
        for _ in range(sum(length(s) for s in segs) + n_special - self.max_source_tokens):
            short = [length(s, True) for s in segs]
            if not any(short):
                raise EmbexpError(f"cloze example does not fit task.max_source_tokens={self.max_source_tokens} "
                                  "even with its shortenable texts removed")
            seg = segs[0] if len(segs) == 1 or short[0] > short[1] else segs[1]
            last = max(i for i, (x, s) in enumerate(seg) if s and x)
            seg[last] = (seg[last][0][:-1], True)
        ids, tt = list(pieces[0]), list(types[0])
        for k, seg in enumerate(segs):
            flat = [i for x, _ in seg for i in x]
            ids += flat + list(pieces[k + 1])
            tt += [types[-1][k]] * len(flat) + list(types[k + 1])
        if ids.count(tok.mask_token_id) != 1:
            raise EmbexpError(f"cloze example has {ids.count(tok.mask_token_id)} mask tokens after tokenisation "
                              "(expected 1)")
        out = {"input_ids": ids, MASK_POSITION: ids.index(tok.mask_token_id), "labels": ex.label}
        if "token_type_ids" in tok.model_input_names:
            out["token_type_ids"] = tt
        return out, Lengths(whole, len(ids))

    def verbalizer_ids(self, words) -> list[int]:
        """One token id per verbalizer word (PET's ``get_verbalization_ids``); a word of several tokens is
        scored by its first token (ours: docs/methods_tinyattn.md, "Verbalizer tokens")."""
        ids = []
        for w in words:
            got = self.encode(w, special=False)
            if not got or got[0] == self.tokenizer.unk_token_id:
                raise EmbexpError(f"verbalizer {w!r} has no token in this tokenizer")
            if len(got) > 1:
                log.warning("verbalizer %r is %d tokens under this tokenizer: scored by its first token "
                            "(ours; PET needs one)", w, len(got))
            ids.append(got[0])
        if len(set(ids)) != len(ids):
            raise EmbexpError(f"verbalizers {list(words)} do not map to distinct tokens under this tokenizer ({ids})")
        return ids


def special_template(tok, n: int) -> tuple[list[list[int]], list[list[int]]]:
    """The tokenizer's special tokens around ``n`` (1 or 2) sequences, read off its own output for
    mask tokens: (n + 1 lists of ids: before, [between,] after; n + 1 lists of their token types,
    plus a last list with each sequence's token type). ``[CLS] a [SEP] b [SEP]`` for BERT/ALBERT,
    ``<s> a </s></s> b </s>`` for RoBERTa."""
    m = tok.mask_token
    enc = tok(*([m] * n))
    ids = list(enc["input_ids"])
    tt = list(enc.get("token_type_ids") or [0] * len(ids))
    at = [i for i, x in enumerate(ids) if x == tok.mask_token_id]
    if len(at) != n:
        raise EmbexpError(f"cannot read the tokenizer's special-token template: {ids}")
    bounds = [-1] + at + [len(ids)]
    pieces = [ids[bounds[k] + 1:bounds[k + 1]] for k in range(n + 1)]
    types = [tt[bounds[k] + 1:bounds[k + 1]] for k in range(n + 1)]
    return pieces, types + [[tt[i] for i in at]]


def pad(seqs: list[list[int]], value: int, left: bool = False) -> torch.Tensor:
    n = max(len(s) for s in seqs)
    rows = [([value] * (n - len(s)) + s) if left else (s + [value] * (n - len(s))) for s in seqs]
    return torch.tensor(rows, dtype=torch.long)


def padded(seqs: list[list[int]], value: int, left: bool = False, device=None) -> tuple[torch.Tensor, torch.Tensor]:
    """``pad(seqs, value, left)`` and its attention mask (1 on the real ids), moved to ``device``."""
    return pad(seqs, value, left).to(device), pad([[1] * len(s) for s in seqs], 0, left).to(device)


def collate(features: list[dict], pad_id: int, left: bool = False) -> dict[str, torch.Tensor]:
    """Pad a list of feature dicts: input_ids with pad_id, labels with -100 (or stack scalars).

    Decoder features add ``batch["prompt_lengths"]`` (long [batch]: the prompt ids of each row,
    padding excluded), for methods; ``Method.forward`` removes it before the backbone
    (``methods.base.backbone_batch``)."""
    batch = dict(zip(("input_ids", "attention_mask"), padded([f["input_ids"] for f in features], pad_id, left)))
    if "input_ids_b" in features[0]:  # the second text of a pair (sentence-embedding tasks)
        batch["input_ids_b"], batch["attention_mask_b"] = padded([f["input_ids_b"] for f in features], pad_id, left)
    if "token_type_ids" in features[0]:
        batch["token_type_ids"] = pad([f["token_type_ids"] for f in features], 0, left)
    if "labels" in features[0]:
        labels = [f["labels"] for f in features]
        if isinstance(labels[0], list):
            batch["labels"] = pad(labels, IGNORE, left)
        else:
            dtype = torch.float32 if any(isinstance(x, float) for x in labels) else torch.long
            batch["labels"] = torch.tensor(labels, dtype=dtype)
    if MASK_POSITION in features[0]:
        batch[MASK_POSITIONS] = torch.tensor([f[MASK_POSITION] for f in features], dtype=torch.long)
    if PROMPT_LENGTH in features[0]:
        batch[PROMPT_LENGTHS] = torch.tensor([f[PROMPT_LENGTH] for f in features], dtype=torch.long)
    return batch


def token_lists(feature: dict) -> list[list[int]]:
    """The token id sequences of one feature (two for a text pair)."""
    return [feature[k] for k in ("input_ids", "input_ids_b") if k in feature]


def n_tokens(batch: dict[str, torch.Tensor]) -> int:
    """Tokens of the input as tokenised (a method may feed the backbone more or fewer)."""
    return int(batch["attention_mask"].sum()) + (int(batch["attention_mask_b"].sum())
                                                 if "attention_mask_b" in batch else 0)
