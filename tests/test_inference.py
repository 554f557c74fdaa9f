"""Evaluation's featurisation and scoring: each text is tokenised once per run (the pipeline's
features, generation, log-likelihood choices and compression metrics share it), and scoring reads
the LM head only at the positions that predict a continuation, with the numbers of a full forward."""

from __future__ import annotations

from collections import Counter

import pytest
import torch
from transformers.tokenization_utils_base import PreTrainedTokenizerBase

from conftest import smoke
from embexp.methods import base
from embexp.run.build import build
from embexp.run.predict import score_rows


@pytest.fixture
def tokenised(monkeypatch):
    """Every text any tokenizer encodes while the test runs, in order."""
    texts: list = []
    call = PreTrainedTokenizerBase.__call__

    def counting(self, text=None, *args, **kw):
        texts.append(text if not args or not isinstance(args[0], str) else (text, args[0]))
        return call(self, text, *args, **kw)

    monkeypatch.setattr(PreTrainedTokenizerBase, "__call__", counting)
    return texts


@pytest.mark.parametrize("method,model,task", [
    ("zero_shot", "tiny_llama", "glue"),          # generation + log-likelihood choices
    ("ktoken", "tiny_llama", "tree"),             # prompts ending in a space; compression metrics
    ("tinyte_full", "tiny_qwen2", "superglue"),  # BoolQ: passages, two choices
    ("tinyte_full", "tiny_roberta", "glue"),      # an encoder's head predictions
])
def test_each_prompt_and_choice_is_tokenised_once_per_run(tokenised, method, model, task):
    """Two evaluations after the pipeline's features (the final one and a trainer.curve_at point):
    no text is tokenised twice, the first evaluation encodes only prompt + choice (and a prompt
    without its trailing spaces, lm-eval's split), the second nothing."""
    cfg = smoke(f"method={method}", f"model={model}", f"task={task}", "do_train=false", "task.max_eval_samples=5")
    c = build(cfg, torch.device("cpu"))
    built = len(tokenised)
    score_rows(c.method, c.task, c.eval_examples, c.featurizer, 2, torch.device("cpu"), progress=False)
    first = tokenised[built:]
    score_rows(c.method, c.task, c.eval_examples, c.featurizer, 2, torch.device("cpu"), progress=False)
    assert tokenised[built + len(first):] == []
    assert max(Counter(map(repr, tokenised)).values()) == 1, Counter(map(repr, tokenised)).most_common(3)
    exs = c.eval_examples
    if not c.featurizer.is_decoder:
        assert first == [] and all(tuple(ex.text) in tokenised or ex.text[0] in tokenised for ex in exs)
        return
    assert all(ex.prompt in tokenised and ex.target in tokenised for ex in exs)
    want = [ex.prompt.rstrip() for ex in exs if ex.prompt != ex.prompt.rstrip()]
    want += [ex.prompt + ch for ex in exs for ch in ex.choices]
    assert sorted(first) == sorted(dict.fromkeys(want))


@pytest.mark.parametrize("method,overrides", [
    ("zero_shot", ()), ("lora", ()), ("tinyte_hybrid", ()), ("prompt_tuning", ("method.num_virtual_tokens=3",)),
    ("ktoken", ()), ("prompt_compress", ()),
])
def test_scoring_on_kept_positions_equals_the_full_logits(monkeypatch, method, overrides):
    """logits_to_keep (the LM head on the positions that predict a continuation) against the full
    logits sliced afterwards: the same scores to 1e-6, in every prefix layout, one- and
    multi-token continuations, shared contexts and a batch of rows of several lengths."""
    cfg = smoke(f"method={method}", "model=tiny_llama", "task=wmt16", "do_train=false", *overrides)
    c = build(cfg, torch.device("cpu"))
    with torch.no_grad():
        for p in c.method.trainable_tensors().values():
            p.add_(torch.randn_like(p, generator=torch.Generator().manual_seed(0)) * 0.05)
    ids = [c.featurizer.prompt_ids(ex.prompt) for ex in c.eval_examples]
    requests = [(x[:n], x[n:n + k]) for x in ids for n, k in ((len(x) // 2, 1), (len(x) // 2, 3), (len(x) - 4, 4))]
    kept = c.method.score_continuations(requests, 4)
    monkeypatch.setattr(base, "keeps_logits", lambda model: False)
    full = c.method.score_continuations(requests, 4)
    assert kept == pytest.approx(full, abs=1e-6, rel=0)
