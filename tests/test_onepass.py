"""Decoder classification in one pass (``Method.score_and_generate``, methods/onepass.py) against the
separate passes it replaces (greedy ``generate``, then ``score_continuations``): the same generations
and predictions, log-likelihoods within 1e-5, for every decoder method of the shared matrix, one- and
multi-token choices, a newline stop, and the cases that keep the separate passes."""

from __future__ import annotations

import pytest

from embexp.featurize import Featurizer
from embexp.methods.onepass import Greedy
from embexp.run import predict as ev
from embexp.tasks import build_task
from embexp.tasks.base import Example
from test_methods import CASES, Case, setup_case, step

PROMPTS = ["Review: a gorgeous, witty film\nSentiment:", "Review: dull\nSentiment:",
           "Review: the plot never quite arrives, and the cast seems to know it\nSentiment:",
           "Review: dull\nSentiment:", "Q: is the sky green?\nA:", "Q: is water wet at room temperature?\nA:"]


def examples(choices: tuple[str, ...]) -> list[Example]:
    return [Example(p, choices[i % len(choices)], label=i % len(choices), choices=choices)
            for i, p in enumerate(PROMPTS)]


def both_paths(monkeypatch, method, task, exs, enc, batch=4):
    """(metrics, records) of the one pass and of the separate passes, and how often the one pass ran."""
    calls = []
    real = type(method).score_and_generate

    def counted(self, *a, **kw):
        calls.append(1)
        return real(self, *a, **kw)

    monkeypatch.setattr(type(method), "score_and_generate", counted)
    new = ev.score_rows(method, task, exs, enc, batch, "cpu", progress=False)
    with monkeypatch.context() as m:
        m.setattr(ev, "one_pass", lambda *a, **kw: (None, None))
        old = ev.score_rows(method, task, exs, enc, batch, "cpu", progress=False)
    return new, old, len(calls)


def same(new, old):
    (mn, rn), (mo, ro) = new, old
    assert [r.get("generation") for r in rn] == [r.get("generation") for r in ro]
    assert [(r.get("em_pred"), r["ll_pred"]) for r in rn] == [(r.get("em_pred"), r["ll_pred"]) for r in ro]
    for a, b in zip(rn, ro):
        assert a["ll_scores"] == pytest.approx(b["ll_scores"], abs=1e-5, rel=0)
    assert {k: v for k, v in mn.items() if k != "length_reduction"} == pytest.approx(
        {k: v for k, v in mo.items() if k != "length_reduction"})


DECODER_CASES = [c for c in CASES if not c.encoder_only and c.cls.trains and c.method != "repeat_prompt"]


@pytest.mark.parametrize("case", [pytest.param(c, id=str(c)) for c in DECODER_CASES + [Case("zero_shot")]])
def test_one_pass_equals_the_separate_passes(monkeypatch, case):
    """Every decoder method of the matrix, trained a step on tiny_llama: one-token choices (a
    repeated prompt among them), generation of up to 6 tokens; then choices of several tokens."""
    from conftest import smoke

    cfg, method, _, batch = setup_case(case, "tiny_llama")
    if case.trains:
        step(method, batch, lr=5e-2)
    task = build_task(smoke("model=tiny_llama", "task=glue", "task.max_new_tokens=6").task)
    enc = Featurizer(method.tokenizer, True, 128, 32)
    single = ("A", "B", "C")  # one byte each under the tiny byte-level tokenizer
    assert all(len(ev.continuation_ids(enc, ex.prompt, c)[1]) == 1 for ex in examples(single) for c in single)
    new, old, calls = both_paths(monkeypatch, method, task, examples(single), enc)
    assert calls == 1
    same(new, old)
    multi = (" no", " yes", " maybe")  # 3, 4 and 6 tokens
    new, old, calls = both_paths(monkeypatch, method, task, examples(multi), enc, batch=3)
    assert calls == (1 if method.shares_prompt_cache else 0)
    same(new, old)


SHORT = ["Q: a?\nA:", "Q: bb?\nA:", "Q: a?\nA:", "Q: ccc c?\nA:"]


@pytest.mark.filterwarnings("error:.*past_key_values.*:FutureWarning")  # the cache by the keyword the model takes
@pytest.mark.parametrize("model", ["tiny_qwen2", "tiny_gemma2"])
@pytest.mark.parametrize("method", ["zero_shot", "prompt_tuning", "ktoken"])
def test_one_pass_on_each_family_and_its_stops(monkeypatch, model, method):
    """Qwen-2 and Gemma-2 (sliding window 32 in the tiny config, soft-capping, eager attention) with
    short prompts, one- and multi-token choices; then generation stopped early at a token the first
    run generated (as if it were the end-of-sequence id: dropped from the text); and on
    Gemma-2 prompts whose batch would cross the window keep the separate passes."""
    from conftest import smoke

    cfg, method_, _, batch = setup_case(Case(method), model)
    if method_.trains:
        step(method_, batch, lr=5e-2)
    task = build_task(smoke(f"model={model}", "task=glue", "task.max_new_tokens=5").task)
    enc = Featurizer(method_.tokenizer, True, 128, 32)
    exs = [Example(p, "A", label=i % 2, choices=("A", " no")) for i, p in enumerate(SHORT)]
    new, old, calls = both_paths(monkeypatch, method_, task, exs, enc, batch=3)
    assert calls == 1
    same(new, old)
    _, gen = method_.score_and_generate([enc.prompt_ids(ex.prompt) for ex in exs], [[[1]]] * len(exs), 3,
                                        Greedy(5, (), method_.tokenizer.pad_token_id))
    assert all(len(g) == 5 for g in gen)
    monkeypatch.setattr(ev, "eos_ids", lambda *a: gen[0][1:2])  # the second token generated ends a row
    new, old, calls = both_paths(monkeypatch, method_, task, exs, enc, batch=3)
    assert calls == 1
    same(new, old)
    _, stopped = method_.score_and_generate([enc.prompt_ids(ex.prompt) for ex in exs], [[[1]]] * len(exs), 3,
                                            Greedy(5, tuple(gen[0][1:2]), method_.tokenizer.pad_token_id))
    assert stopped[0] == gen[0][:gen[0].index(gen[0][1]) + 1]
    if model == "tiny_gemma2":
        long = [Example(p * 4, "A", label=0, choices=("A", "B")) for p in PROMPTS[:2]]
        separate, real = [], ev.generate
        with monkeypatch.context() as m:
            m.setattr(ev, "generate", lambda *a, **kw: separate.append(1) or real(*a, **kw))
            new, old, calls = both_paths(monkeypatch, method_, task, long, enc)
        assert calls == 1 and len(separate) == 2  # the one pass gave way to the window: both runs generated
        same(new, old)


def test_one_pass_blockers(monkeypatch):
    """The separate passes stay for a prompt with trailing spaces (lm-eval moves them to the choice),
    a generation config that processes logits, and a method with its own generate."""
    from conftest import smoke

    cfg, method, _, _ = setup_case(Case("zero_shot"), "tiny_llama")
    enc = Featurizer(method.tokenizer, True, 128, 32)
    exs = examples(("A", "B"))
    pairs = [[ev.continuation_ids(enc, ex.prompt, c) for c in ex.choices] for ex in exs]
    assert ev.one_pass_blocker(method, enc, exs, pairs, True) == ""
    spaced = [Example(ex.prompt + " ", ex.target, ex.label, ex.choices) for ex in exs]
    spaced_pairs = [[ev.continuation_ids(enc, ex.prompt, c) for c in ex.choices] for ex in spaced]
    assert "trailing whitespace" in ev.one_pass_blocker(method, enc, spaced, spaced_pairs, True)
    monkeypatch.setattr(method.backbone_model.generation_config, "repetition_penalty", 1.3)
    assert "repetition_penalty" in ev.one_pass_blocker(method, enc, exs, pairs, True)
    assert ev.one_pass_blocker(method, enc, exs, pairs, False) == ""  # log-likelihoods only: no generation
    monkeypatch.setattr(type(method), "generate", lambda self, **kw: None)
    assert "its own way" in ev.one_pass_blocker(method, enc, exs, pairs, False)
    task = build_task(smoke("model=tiny_llama", "task=glue").task)
    assert task.cfg.eval_mode == "auto"
