"""The method contract's extension points, exercised by test-only toy methods.

- inside the layers: a zero-initialised module placed by ``models.after_attention`` in every tiny
  family leaves outputs bit-identical, and a non-zero one reaches every layer;
- replaced inputs / shorter sequences: a toy method that drops every second prompt token trains,
  generates in left-padded batches as if each row were alone, scores choices by log-likelihood
  like a hand computation, and its run record counts the tokens the backbone saw.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

import pytest
import torch
from torch import nn

from conftest import run_train, smoke
from embexp.core.config import option
from embexp.featurize import Featurizer, collate
from embexp.methods import Method, MethodConfig, build_method, register_method
from embexp.models import DECODER_FAMILIES, TINY, after_attention, attention_sites, load_backbone
from embexp.tasks import build_task


# ---- extension point 2: inside the layers ------------------------------------------------------
def tiny(family: str):
    kind = "decoder" if family in DECODER_FAMILIES else "encoder"
    cfg = smoke("model=tiny_llama", f"model.family={family}", f"model.kind={kind}", "model.name=tiny")
    return load_backbone(cfg.model, num_labels=0 if kind == "decoder" else 2)


def inputs(bb):
    ids = torch.tensor([[bb.tokenizer.bos_token_id or 1] + list(range(10, 20)), [2] + list(range(30, 40))])
    mask = torch.ones_like(ids)
    mask[1, :3] = 0 if bb.is_decoder else 1
    mask[1, -3:] = 1 if bb.is_decoder else 0
    return {"input_ids": ids, "attention_mask": mask}


@pytest.mark.parametrize("family", sorted(TINY))
def test_zero_module_after_attention_is_bit_identical(family):
    bb = tiny(family)
    batch = inputs(bb)
    with torch.no_grad():
        want = bb.model(**batch).logits
    lin = nn.Linear(bb.hidden_size, bb.hidden_size)
    nn.init.zeros_(lin.weight), nn.init.zeros_(lin.bias)
    seen = []

    def fn(h, call):
        seen.append(call.index)
        assert h.shape[-1] == bb.hidden_size and call.layer_input.shape == h.shape
        return lin(h)

    handles = after_attention(bb.model, fn)
    with torch.no_grad():
        got = bb.model(**batch).logits
    n_layers = len(attention_sites(bb.model)[1])
    assert seen == list(range(n_layers)), seen  # every layer, once, in order
    assert torch.equal(got, want)
    # a non-zero module changes the outputs; removing the hooks restores them
    nn.init.normal_(lin.weight, std=0.1)
    with torch.no_grad():
        assert not torch.allclose(bb.model(**batch).logits, want)
    for h in handles:
        h.remove()
    with torch.no_grad():
        assert torch.equal(bb.model(**batch).logits, want)


def test_branch_sites_add_to_the_residual_stream():
    """On a pre-norm decoder the function sees x + attn(x) (the state entering the FFN), and its
    output reaches the layer's output unchanged when the FFN is switched off."""
    bb = tiny("llama")
    layer = bb.model.model.layers[0]
    for p in layer.mlp.parameters():
        nn.init.zeros_(p)  # the FFN adds nothing: layer output = x + attn + delta
    captured = {}
    layer.register_forward_hook(
        lambda m, a, out: captured.__setitem__("out", out[0] if isinstance(out, tuple) else out))

    def fn(h, call):
        if call.index == 0:
            captured["h"] = h.detach().clone()
        return torch.ones_like(h) if call.index == 0 else torch.zeros_like(h)

    after_attention(bb.model, fn)
    with torch.no_grad():
        bb.model(**inputs(bb))
    torch.testing.assert_close(captured["out"], captured["h"] + 1.0)


# ---- extension point 3: replaced inputs and a shorter sequence ---------------------------------
@dataclass
class DropConfig(MethodConfig):
    keep_every: int = option(2, "Keep every n-th prompt token (test-only toy).")


@register_method("_toy_drop_half")
class DropHalf(Method):
    """Test-only: the backbone reads every second prompt token (plus a learned shift) and then the
    target: a method that shortens the sequence, on the shared prefix path."""

    Config = DropConfig
    prefix_mode = "replace"

    def __init__(self, cfg, backbone):
        super().__init__(cfg, backbone)
        self.shift = nn.Parameter(torch.zeros(backbone.hidden_size))
        self.mark_trainable()

    def method_tensors(self):
        return {"shift": self.shift}

    def kept(self, ids: list[int]) -> list[int]:
        return ids[:: self.cfg.keep_every]

    def prefix(self, input_ids, attention_mask):
        rows = [self.kept(r[m.bool()].tolist()) for r, m in zip(input_ids, attention_mask)]
        n = max(len(r) for r in rows)
        ids = torch.tensor([[0] * (n - len(r)) + r for r in rows], device=input_ids.device)
        mask = torch.tensor([[0] * (n - len(r)) + [1] * len(r) for r in rows], device=input_ids.device)
        x = self.backbone_model.get_input_embeddings()(ids) + self.shift
        return x, mask


def toy(model="tiny_llama"):
    cfg = smoke("method=tinyte_full", f"model={model}", "task=wmt16")
    cfg.method = DropConfig(name="_toy_drop_half")
    torch.manual_seed(0)
    bb = load_backbone(cfg.model)
    method = build_method(cfg.method, bb)
    task = build_task(cfg.task)
    enc = Featurizer(bb.tokenizer, True, 64, 16)
    feats = [enc.train_features(e) for e in task.examples("train")[:6]]
    return method, feats


def test_toy_shortening_method_trains_through_the_shared_path():
    method, feats = toy()
    batch = collate(feats, method.tokenizer.pad_token_id)
    opt = torch.optim.Adam([method.shift], lr=5e-2)
    losses = []
    for _ in range(8):
        with method.counting_backbone_tokens() as seen:
            loss = method(**batch).loss
        loss.backward(), opt.step(), opt.zero_grad()
        losses.append(loss.item())
    assert losses[-1] < losses[0]
    plen = batch["prompt_lengths"]
    expected = sum(math.ceil(p / 2) for p in plen.tolist()) + int(batch["attention_mask"].sum() - plen.sum())
    assert seen[0] == expected < int(batch["attention_mask"].sum())
    # the loss is on the target tokens only, as the backbone saw them: equals a per-row computation
    with torch.no_grad():
        total, count = 0.0, 0
        for f_ in feats:
            p = f_["prompt_length"]
            one = collate([f_], method.tokenizer.pad_token_id)
            k = sum(1 for x in f_["labels"][p:] if x != -100)
            total, count = total + method(**one).loss.item() * k, count + k
        # HF's mean is over all target tokens of the batch
        torch.testing.assert_close(torch.tensor(total / count), method(**batch).loss, atol=1e-5, rtol=0)


def test_toy_shortening_method_generates_each_row_as_if_alone():
    method, feats = toy()
    with torch.no_grad():
        method.shift.normal_(std=0.5)
    pad = method.tokenizer.pad_token_id
    short, long = feats[0]["input_ids"][:5], feats[1]["input_ids"][:12]
    kw = dict(max_new_tokens=3, min_new_tokens=3, do_sample=False, use_cache=True, pad_token_id=pad,
              return_dict_in_generate=True, output_scores=True)
    together = method.generate(**collate([{"input_ids": short}, {"input_ids": long}], pad, left=True), **kw)
    alone = method.generate(**collate([{"input_ids": short}], pad, left=True), **kw)
    assert together.sequences[0, 12:].tolist() == alone.sequences[0, 5:].tolist()
    for a, b in zip(together.scores, alone.scores):
        torch.testing.assert_close(a[0], b[0], atol=1e-5, rtol=0)
    cached = method.generate(**collate([{"input_ids": long}], pad, left=True), max_new_tokens=4, do_sample=False,
                             use_cache=True, pad_token_id=pad)
    plain = method.generate(**collate([{"input_ids": long}], pad, left=True), max_new_tokens=4, do_sample=False,
                            use_cache=False, pad_token_id=pad)
    assert torch.equal(cached, plain)


def test_toy_shortening_method_scores_continuations_by_hand():
    method, feats = toy()
    with torch.no_grad():
        method.shift.normal_(std=0.5)
    method.eval()
    requests = [(f_["input_ids"][:k], f_["input_ids"][k:k + n]) for f_, k, n in
                zip(feats, (7, 4, 9, 5, 6, 8), (1, 3, 2, 1, 4, 2))]
    got = method.score_continuations(requests, batch_size=4)
    emb = method.backbone_model.get_input_embeddings()
    with torch.no_grad():
        for (ctx, cont), score in zip(requests, got):
            x = torch.cat([emb(torch.tensor([method.kept(list(ctx))])) + method.shift,
                           emb(torch.tensor([cont[:-1]], dtype=torch.long))], 1)
            logp = torch.log_softmax(method.backbone_model(inputs_embeds=x).logits[0].float(), -1)
            n = len(cont)
            want = sum(float(logp[x.shape[1] - n + j, c]) for j, c in enumerate(cont))
            assert abs(score - want) < 1e-4, (score, want)


def test_toy_shortening_method_run_record_counts_backbone_tokens(tmp_path):
    cfg = smoke("method=tinyte_full", "model=tiny_llama", "task=wmt16", "task.eval_mode=generate")
    cfg.method = DropConfig(name="_toy_drop_half")
    cfg.save_adapter = False
    metrics = run_train(cfg, tmp_path / "run")
    train = metrics["train"]
    assert 0 < train["tokens"] < train["input_tokens"]
    assert json.loads((tmp_path / "run" / "status.json").read_text())["status"] == "complete"
