"""The shared test matrix: every method x tiny families, through the real configs.

Every registered method gets a row from its class (``Method.identity_at_init``, ``export_blocker``,
``model_kinds``, ``trains``): a new method file is in the matrix without an edit here. ROWS holds the
rows that run a method with other overrides instead (or besides), each stating only what those
overrides change (e.g. tinyattn with method.init_scale=0 is the exact identity).
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass

import pytest
import torch

from conftest import smoke
from embexp.featurize import Featurizer, collate
from embexp.methods import build_method
from embexp.methods.registry import METHODS, registered
from embexp.models import load_backbone
from embexp.tasks import build_task


@dataclass
class Case:
    method: str
    overrides: tuple = ()
    identity: bool | None = None  # outputs equal the backbone's at init, bit for bit in fp32 (None: the class says)

    @property
    def cls(self) -> type:
        return METHODS.get_class(self.method)

    @property
    def is_identity(self) -> bool:
        return self.cls.identity_at_init if self.identity is None else self.identity

    @property
    def exportable(self) -> bool:  # export() gives a plain transformers model
        return not self.cls.export_blocker

    @property
    def decoder_only(self) -> bool:
        return "encoder" not in self.cls.model_kinds

    @property
    def encoder_only(self) -> bool:
        return "decoder" not in self.cls.model_kinds

    @property
    def trains(self) -> bool:
        return self.cls.trains

    def __str__(self):
        return self.method + ("[" + ",".join(self.overrides) + "]" if self.overrides else "")


ROWS = [
    # PEMA swaps in a partial embedding matrix at setup; it preserves the outputs for every input
    # (kept rows are copies, other ids read their original rows), so identity holds after setup.
    Case("pema"),
    Case("pema", ("method.inner=emb_tuning",)),
    Case("prompt_tuning", ("method.num_virtual_tokens=20",)),
    # Tiny-Attention: modules inside every layer (no plain-model export); init_scale=0 is the exact
    # identity, the default x0.01 output projection and a 4-module parallel variant are not.
    Case("tinyattn", ("method.init_scale=0",), identity=True),
    Case("tinyattn"),
    Case("tinyattn", ("method.heads=4", "method.head_dim=2", "method.placement=parallel", "method.mha_proj=true")),
    # K-Token merging with another inner method and K
    Case("ktoken"),
    Case("ktoken", ("method.k=3", "method.inner=tinyte_full")),
]


def matrix_cases() -> list[Case]:
    """A row per registered method (its ROWS where it has some, else its default config), in
    registration order: read when called, so a method registered later is in it."""
    return [c for name in registered() for c in ([r for r in ROWS if r.method == name] or [Case(name)])]


CASES = matrix_cases()
DECODERS = ["tiny_llama", "tiny_qwen2", "tiny_gemma2"]
ENCODERS = ["tiny_roberta", "tiny_deberta"]


def setup_case(case: Case, model: str, task: str = "wmt16", twin: bool = False):
    """(cfg, method, ref, batch): the method set up on six training rows; ref, an untouched twin of its
    backbone (same weights), only where asked for (the identity test; it costs a second model)."""
    task = task if model in DECODERS else "glue"
    cfg = smoke(f"method={case.method}", f"model={model}", f"task={task}", *case.overrides)
    t = build_task(cfg.task)
    torch.manual_seed(0)
    bb = load_backbone(cfg.model, num_labels=t.num_labels)
    ref = load_backbone(cfg.model, num_labels=t.num_labels) if twin else None  # same seed
    if twin:
        ref.model.load_state_dict(bb.model.state_dict())
    method = build_method(cfg.method, bb)
    enc = Featurizer(bb.tokenizer, bb.is_decoder, 128, 32)
    feats = [enc.train_features(e) for e in t.examples("train")[:6]]
    method.setup({"train": [f["input_ids"] for f in feats], "eval": []})
    batch = collate(feats, bb.tokenizer.pad_token_id)
    return cfg, method, ref, batch


# Identity and export run on every family; the costlier checks on one family per quirk
# (Llama: untied; Gemma-2: tied + scaled embeddings; RoBERTa: encoder head).
CORE = ["tiny_llama", "tiny_gemma2", "tiny_roberta"]


def params(case_filter=lambda c: True, decoders=True, encoders=True, every_family=False):
    models = (DECODERS if decoders else []) + (ENCODERS if encoders else [])
    models = [m for m in models if every_family or m in CORE]
    return [pytest.param(c, m, id=f"{c}-{m}") for c in CASES if case_filter(c) for m in models
            if not (c.decoder_only and m in ENCODERS) and not (c.encoder_only and m in DECODERS)]


def step(method, batch, lr=1e-2, n=1):
    opt = torch.optim.Adam(method.trainable_tensors().values(), lr=lr)
    losses = []
    method.train()
    for _ in range(n):
        loss = method(**batch).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    method.eval()
    return losses


@pytest.mark.parametrize("case,model", params(lambda c: c.is_identity, every_family=True))
def test_identity_at_init(case, model):
    _, method, ref, batch = setup_case(case, model, twin=True)
    inputs = {k: v for k, v in batch.items() if k != "labels"}
    with torch.no_grad():
        assert torch.equal(method(**inputs).logits, ref.model(**inputs).logits)


@pytest.mark.parametrize("case,model", params(lambda c: c.trains))
def test_only_method_tensors_change(case, model):
    _, method, ref, batch = setup_case(case, model)
    before = {n: p.detach().clone() for n, p in method.named_parameters()}
    own = {id(p) for p in method.trainable_tensors().values()}
    step(method, batch)
    changed_own = False
    for n, p in method.named_parameters():
        if id(p) in own:
            changed_own |= not torch.equal(before[n], p)
        else:
            assert torch.equal(before[n], p), f"{n} is not the method's but changed"
    assert changed_own


@pytest.mark.parametrize("case,model",
                         [p for p in params(lambda c: c.trains, encoders=False) if p.values[1] == "tiny_llama"])
def test_training_lowers_the_loss(case, model):
    # 10 steps: every row's loss is already 0.11 or more below its first (prompt tuning's is the smallest
    # drop, and 30 steps add only 0.01 to it), over twice the 0.05 asked for
    _, method, _, batch = setup_case(case, model)
    losses = step(method, batch, lr=3e-2 if case.method.startswith("tinyte") else 1e-2, n=10)
    assert min(losses[-5:]) < losses[0] - 0.05, losses


@pytest.mark.parametrize("case,model", params(lambda c: c.trains))
def test_save_load_round_trip(case, model):
    cfg, method, _, batch = setup_case(case, model)
    step(method, batch)
    state = method.trainable_state()
    _, fresh, _, _ = setup_case(case, model)
    fresh.load_trainable_state(state)
    inputs = {k: v for k, v in batch.items() if k != "labels"}
    with torch.no_grad():
        assert torch.equal(method(**inputs).logits, fresh(**inputs).logits)


@pytest.mark.parametrize("case,model", params(lambda c: c.exportable, every_family=True))
def test_export_is_a_plain_model(case, model):
    from transformers import AutoModelForCausalLM, AutoModelForSequenceClassification

    cfg, method, _, batch = setup_case(case, model)
    if case.trains:
        step(method, batch, lr=5e-2)
    inputs = {k: v for k, v in batch.items() if k != "labels"}
    with torch.no_grad():
        want = method(**inputs).logits
    with tempfile.TemporaryDirectory() as d:
        method.export().save_pretrained(d)
        cls = AutoModelForCausalLM if model in DECODERS else AutoModelForSequenceClassification
        plain = cls.from_pretrained(d)
        with torch.no_grad():
            got = plain(**inputs).logits
    torch.testing.assert_close(got, want, atol=1e-5, rtol=0)


@pytest.mark.parametrize("case,model", params(decoders=True, encoders=False))
def test_generate_with_kv_cache(case, model):
    cfg, method, _, batch = setup_case(case, model)
    if case.trains:
        step(method, batch, lr=5e-2)
    tok = method.tokenizer
    prompts = collate([{"input_ids": ids[:12]} for ids in batch["input_ids"].tolist()[:3]], tok.pad_token_id, left=True)
    kw = dict(max_new_tokens=6, do_sample=False, pad_token_id=tok.pad_token_id)
    cached = method.generate(**prompts, use_cache=True, **kw)
    plain = method.generate(**prompts, use_cache=False, **kw)
    assert cached.shape[1] > prompts["input_ids"].shape[1]
    assert torch.equal(cached, plain)


@pytest.mark.parametrize("case,model", params(decoders=True, encoders=False))
def test_left_padded_row_generates_as_if_alone(case, model):
    """Batched evaluation must not depend on the batch: a short prompt left-padded next to a long
    one gets the same next-token scores as alone (peft's prompt-tuning generate failed this)."""
    cfg, method, _, batch = setup_case(case, model)
    if case.trains:
        step(method, batch, lr=5e-2)
    pad = method.tokenizer.pad_token_id
    short, long = batch["input_ids"][0, :5].tolist(), batch["input_ids"][1, :12].tolist()
    kw = dict(max_new_tokens=3, min_new_tokens=3, do_sample=False, use_cache=True, pad_token_id=pad,
              return_dict_in_generate=True, output_scores=True)
    together = method.generate(**collate([{"input_ids": short}, {"input_ids": long}], pad, left=True), **kw)
    alone = method.generate(**collate([{"input_ids": short}], pad, left=True), **kw)
    assert together.sequences[0, :12].tolist() == [pad] * 7 + short
    assert together.sequences[0, 12:].tolist() == alone.sequences[0, 5:].tolist()
    for step_together, step_alone in zip(together.scores, alone.scores):
        torch.testing.assert_close(step_together[0], step_alone[0], atol=1e-5, rtol=0)


@pytest.mark.parametrize("case,model", params(lambda c: c.trains, encoders=False))
def test_finite_loss_in_bf16(case, model):
    _, method, _, batch = setup_case(case, model)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = method(**batch).loss
    loss.backward()
    assert torch.isfinite(loss)
    assert all(torch.isfinite(p.grad).all() for p in method.trainable_tensors().values() if p.grad is not None)


@pytest.mark.parametrize("case,model", params(lambda c: c.trains))
def test_gradients_on_exactly_for_the_trainable_tensors(case, model):
    """build_method switches gradients on once, after construction: for the method's tensors only."""
    _, method, _, _ = setup_case(case, model)
    own = {id(p) for p in method.trainable_tensors().values()}
    assert own
    for n, p in method.named_parameters():
        assert p.requires_grad == (id(p) in own), n


def test_repeat_prompt_generations_are_the_question_else_the_prompt():
    """repeat_prompt's evaluation outputs: meta["question"] where set, else the prompt; scored by the task."""
    from embexp import EmbexpError
    from embexp.run.predict import score_rows
    from embexp.tasks.base import Example

    cfg, method, _, _ = setup_case(Case("repeat_prompt"), "tiny_llama")
    task = build_task(cfg.task)
    enc = Featurizer(method.tokenizer, True, 128, 32)
    examples = [Example("Translate: ahoj\nEnglish:", "hello", meta={"question": "ahoj"}),
                Example("Translate: svět\nEnglish:", "world"),
                Example("Translate: pes\nEnglish:", "dog", meta={"question": ""})]
    metrics, records = score_rows(method, task, examples, enc, 2, "cpu", progress=False)
    want = ["ahoj", "Translate: svět\nEnglish:", "Translate: pes\nEnglish:"]
    assert [r["generation"] for r in records] == want
    assert metrics["bleu"] == pytest.approx(task.score_text([e.target for e in examples], want, examples)["bleu"])
    cls_cfg = smoke("method=repeat_prompt", "model=tiny_llama", "task=superglue", "task.subset=boolq")
    with pytest.raises(EmbexpError, match="needs a generation task"):
        score_rows(method, build_task(cls_cfg.task), examples[:1], enc, 2, "cpu", progress=False)
