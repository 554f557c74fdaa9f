"""TinyTE variants (tinyte.md §3) and the peft baselines, beyond the shared matrix in test_methods.py."""

from __future__ import annotations

import math

import pytest
import torch
from safetensors.torch import load_file, save_file

from conftest import smoke
from embexp import EmbexpError
from embexp.featurize import collate
from embexp.methods import build_method
from embexp.methods.tinyte import rank_dims
from embexp.models import load_backbone
from embexp.tasks import build_task

DECODERS = ["tiny_llama", "tiny_qwen2", "tiny_gemma2"]
ENCODERS = ["tiny_roberta", "tiny_deberta"]


def build(method: str, model: str = "tiny_llama", *overrides: str):
    cfg = smoke(f"method={method}", f"model={model}", f"task={'wmt16' if model in DECODERS else 'glue'}", *overrides)
    torch.manual_seed(0)
    bb = load_backbone(cfg.model, num_labels=build_task(cfg.task).num_labels)
    return build_method(cfg.method, bb), bb


def raw_embeddings(bb, ids):
    """What the frozen embedding module returns without any method (weight rows x Gemma's scale)."""
    w = bb.model.get_input_embeddings().weight
    return (w[ids] * bb.embed_scale).detach()


def special_batch(bb):
    tok = bb.tokenizer
    first = tok.bos_token_id if tok.bos_token_id is not None else tok.cls_token_id
    last = tok.eos_token_id if tok.eos_token_id is not None else tok.sep_token_id
    body = tok("hello", add_special_tokens=False)["input_ids"]
    return torch.tensor([[first, *body, last, tok.pad_token_id, tok.pad_token_id]])


@pytest.mark.parametrize("model", DECODERS + ENCODERS)
def test_trainable_counts_on_every_family(model):
    counts = {}
    for name in ("tinyte_full", "tinyte_half", "tinyte_gated", "tinyte_hybrid"):
        method, bb = build(name, model)
        counts[name] = method.n_trainable(include_head=False)
        assert set(method.method_tensors()) == {"tinyte_full": {"bias"}, "tinyte_half": {"bias"},
                                                "tinyte_gated": {"bias", "alpha", "beta"},
                                                "tinyte_hybrid": {"bias", "prompt"}}[name]
        assert not set(method.method_tensors()) & {n for n in method.trainable_tensors() if n.startswith("head.")}
    d = bb.hidden_size
    assert counts == {"tinyte_full": d, "tinyte_half": math.floor(0.5 * d), "tinyte_gated": d + 2,
                      "tinyte_hybrid": 2 * d}
    half, bb = build("tinyte_half", model, "method.p=0.3")
    assert half.n_trainable(include_head=False) == math.floor(0.3 * bb.hidden_size) == half.bias.numel()


@pytest.mark.parametrize("model", DECODERS + ENCODERS)
def test_peft_counts_match_peft(model):
    for name, ov in [("lora", ()), ("prompt_tuning", ()), ("prompt_tuning", ("method.num_virtual_tokens=20",))]:
        method, bb = build(name, model, *ov)
        peft_count = method.model.get_nb_trainable_parameters()[0]
        assert method.n_trainable(include_head=True) == peft_count  # encoders: peft counts our head too
        if name == "prompt_tuning":
            assert method.n_trainable(include_head=False) == method.cfg.num_virtual_tokens * bb.hidden_size
        else:
            assert method.n_trainable(include_head=False) > 0 and all("lora_" in n for n in method.method_tensors())
    lora, bb = build("lora", DECODERS[0], "method.target_modules=[q_proj,v_proj]")
    cfg = bb.model.config
    q, v = cfg.num_attention_heads * cfg.head_dim, cfg.num_key_value_heads * cfg.head_dim  # out features
    per_layer = 8 * (cfg.hidden_size + q) + 8 * (cfg.hidden_size + v)  # r * (in + out) per LoRA pair
    assert lora.n_trainable(include_head=False) == cfg.num_hidden_layers * per_layer


@pytest.mark.parametrize("name", ["tinyte_full", "tinyte_half", "tinyte_gated", "tinyte_hybrid"])
@pytest.mark.parametrize("model", ["tiny_gemma2", "tiny_roberta"])
def test_special_tokens_are_never_shifted(name, model):
    method, bb = build(name, model, *(["method.beta_init=30"] if name == "tinyte_gated" else []))
    with torch.no_grad():
        method.bias.copy_(torch.arange(1, method.bias.numel() + 1, dtype=torch.float32) / 10)
    ids = special_batch(bb)
    special = torch.tensor([[i in bb.special_ids() for i in row] for row in ids.tolist()])
    assert special.sum() >= 3 and (~special).sum() >= 3  # bos/cls, eos/sep, pads and real tokens
    with torch.no_grad():
        got = method.model.get_input_embeddings()(ids) - raw_embeddings(bb, ids)
    assert torch.equal(got[special], torch.zeros_like(got[special]))
    want = method.delta() if name != "tinyte_gated" else method.bias * (1 - method.gate(torch.tensor([5])))[0]
    want = bb.embed_scale * want  # b lives in the raw row space; the module's output is scaled
    torch.testing.assert_close(got[~special], want.expand_as(got[~special]), atol=1e-5, rtol=0)
    if name == "tinyte_half":  # only the k ranked dims move
        moved = (got[~special] != 0).any(0)
        assert moved.sum() == method.k and set(moved.nonzero().squeeze(-1).tolist()) == set(method.dims().tolist())


def test_variance_ranking_on_a_hand_made_matrix():
    w = torch.tensor([[100.0, 0.0, 0.0, 0.0],   # a special row: excluded, else dim 0 would rank highest
                      [1.0, 0.0, 5.0, 2.0],
                      [1.0, 1.0, -5.0, 0.0],
                      [1.0, 2.0, 5.0, 2.0],
                      [1.0, 3.0, -5.0, 0.0]])
    rows = torch.tensor([1, 2, 3, 4])
    # variances over rows 1-4: dim0 0, dim1 1.67, dim2 33.3, dim3 1.33
    assert rank_dims(w, rows, "variance").tolist() == [0, 3, 1, 2]
    assert rank_dims(w, rows, "variance", "highest").tolist() == [2, 1, 3, 0]
    assert rank_dims(w, torch.arange(5), "variance").tolist() == [3, 1, 2, 0]  # with the special row
    tie = torch.tensor([[1.0, 0.0, 1.0], [0.0, 0.0, 0.0]])
    assert rank_dims(tie, torch.tensor([0, 1]), "variance").tolist() == [1, 0, 2]  # stable: lower index first
    r = rank_dims(w, rows, "random", seed=3)
    assert sorted(r.tolist()) == [0, 1, 2, 3] and torch.equal(r, rank_dims(w, rows, "random", seed=3))
    with pytest.raises(EmbexpError, match="choose from"):
        rank_dims(w, rows, "entropy")


def test_half_uses_the_lowest_variance_non_special_dims():
    method, bb = build("tinyte_half", "tiny_qwen2")
    w = bb.model.get_input_embeddings().weight.detach()
    keep = ~bb.special_mask()
    var = w[keep].double().var(0)
    assert set(method.dims().tolist()) == set(torch.argsort(var)[: method.k].tolist())
    high, _ = build("tinyte_half", "tiny_qwen2", "method.select=highest")
    assert set(high.dims().tolist()) == set(torch.argsort(var, descending=True)[: method.k].tolist())
    with pytest.raises(EmbexpError, match="method.p"):
        build("tinyte_half", "tiny_qwen2", "method.p=0.001")


def test_saved_ranking_round_trips(tmp_path):
    method, bb = build("tinyte_half", "tiny_llama", "method.ranking=random", "method.rank_seed=3")
    with torch.no_grad():
        method.bias.normal_()
    save_file(method.trainable_state(), tmp_path / "adapter.safetensors")
    state = load_file(tmp_path / "adapter.safetensors")
    assert set(state) == {"bias", "ranking"} and torch.equal(state["ranking"], method.ranking)
    fresh, _ = build("tinyte_half", "tiny_llama")  # variance ranking: other dims
    assert not torch.equal(fresh.dims(), method.dims())
    fresh.load_trainable_state(state)
    assert torch.equal(fresh.dims(), method.dims()) and torch.equal(fresh.delta(), method.delta())
    ids = special_batch(bb)
    with torch.no_grad():
        assert torch.equal(fresh(input_ids=ids).logits, method(input_ids=ids).logits)
    with pytest.raises(EmbexpError, match="ranking"):
        fresh.load_trainable_state({"bias": state["bias"]})
    with pytest.raises(EmbexpError, match="permutation"):
        fresh.load_trainable_state({**state, "ranking": torch.zeros_like(state["ranking"])})
    gated, _ = build("tinyte_gated", "tiny_llama", "method.ranking=random")
    gstate = gated.trainable_state()
    assert set(gstate) == {"bias", "alpha", "beta", "ranking"}
    other, _ = build("tinyte_gated", "tiny_llama")
    other.load_trainable_state(gstate)
    assert torch.equal(other.position, gated.position)


def test_gate_extremes_and_ordering():
    method, bb = build("tinyte_gated", "tiny_llama")
    d, lengths = bb.hidden_size, torch.tensor([7, 300])
    rank_of = torch.empty(d, dtype=torch.long)
    rank_of[method.ranking] = torch.arange(d)
    with torch.no_grad():
        method.beta.fill_(30.0)  # p -> 1: G ~ 0, every dim modified (the last ranked one half: d_d = 1)
        g = method.gate(lengths)
        assert (g[:, rank_of < d - 1] < 1e-6).all() and torch.allclose(g[:, rank_of == d - 1], torch.tensor(0.5))
        method.beta.fill_(-30.0)  # p -> 0: G ~ 1, nothing modified
        assert (method.gate(lengths) > 1 - 1e-6).all()
        method.beta.fill_(math.log(0.25 / 0.75))  # p = 0.25: the first quarter of the ranking is modified
        g = method.gate(lengths)[0]
        assert (g[rank_of < d // 4 - 1] < 1e-3).all() and (g[rank_of >= d // 4] > 1 - 1e-3).all()
        method.alpha.fill_(-0.01)  # alpha < 0: longer inputs modify fewer dims (the paper's finding)
        method.beta.fill_(2.0)
        shifted = (method.gate(lengths) < 0.5).sum(-1)
        assert shifted[0] > shifted[1]
        assert shifted[0] == math.floor(torch.sigmoid(torch.tensor(-0.07 + 2.0)).item() * d)  # l in tokens (Eq. 4)
    hundreds, _ = build("tinyte_gated", "tiny_llama", "method.length_scale=100")  # the option: l / 100
    with torch.no_grad():
        hundreds.alpha.fill_(-1.0)
        hundreds.beta.fill_(2.0)
        torch.testing.assert_close(hundreds.p(lengths), torch.sigmoid(torch.tensor([-0.07 + 2.0, -3.0 + 2.0])))


def test_gate_parameters_receive_gradients():
    method, bb = build("tinyte_gated", "tiny_llama")
    ids = collate([{"input_ids": [1, 70, 71, 72, 73], "labels": [-100, -100, -100, 72, 73]},
                   {"input_ids": [1, 80, 81], "labels": [-100, -100, 81]}], bb.tokenizer.pad_token_id)
    assert method.lengths(ids).tolist() == [3, 2]  # the prompt: non-pad positions not trained on
    method.zero_grad()
    method(**ids).loss.backward()
    assert method.alpha.grad == 0 and method.beta.grad == 0  # b = 0: nothing to gate yet
    with torch.no_grad():
        method.bias.normal_()
    method.zero_grad()
    method(**ids).loss.backward()
    for p in (method.alpha, method.beta, method.bias):
        assert torch.isfinite(p.grad).all() and p.grad.abs().sum() > 0
    values = method.log_values()
    assert set(values) == {"alpha", "beta", "p_mean"} and values["p_mean"] == pytest.approx(0.5)


def test_gated_generation_keeps_the_prompt_length():
    method, bb = build("tinyte_gated", "tiny_llama")
    seen = []
    gate = method.gate
    method.gate = lambda lengths: (seen.append(lengths.tolist()), gate(lengths))[1]
    prompts = collate([{"input_ids": [1, 70, 71, 72]}, {"input_ids": [1, 80]}], bb.tokenizer.pad_token_id, left=True)
    method.generate(**prompts, max_new_tokens=4, do_sample=False, min_new_tokens=4,
                    pad_token_id=bb.tokenizer.pad_token_id)
    assert len(seen) >= 4 and all(s == [4, 2] for s in seen)


def test_non_exportable_variants_say_why():
    for name, why in [("tinyte_gated", "length"), ("tinyte_hybrid", "prompt token"),
                      ("prompt_tuning", "virtual tokens")]:
        method, _ = build(name, "tiny_llama")
        with pytest.raises(EmbexpError, match=why):
            method.export()


def test_hybrid_at_init_only_prepends_its_token():
    method, bb = build("tinyte_hybrid", "tiny_gemma2")
    emb = bb.model.get_input_embeddings()
    bos = torch.tensor([bb.tokenizer.bos_token_id])
    assert torch.equal(method.prompt.detach(), emb.weight[bos].detach())  # the raw row; scaled on the way in
    batch = collate([{"input_ids": [1, 70, 71, 72, 2]}, {"input_ids": [1, 80, 81]}], bb.tokenizer.pad_token_id)
    with torch.no_grad():
        got = method(**batch).logits
        x = torch.cat([(method.prompt * bb.embed_scale).expand(2, 1, -1), emb(batch["input_ids"])], 1)
        mask = torch.cat([torch.ones(2, 1, dtype=torch.long), batch["attention_mask"]], 1)
        want = method.model.get_base_model()(inputs_embeds=x, attention_mask=mask).logits[:, 1:]
    assert got.shape[:2] == batch["input_ids"].shape and torch.equal(got, want)


def test_hybrid_shifts_generated_tokens():
    method, bb = build("tinyte_hybrid", "tiny_llama")
    with torch.no_grad():
        method.bias.fill_(0.5)
    emb, calls = bb.model.get_input_embeddings(), []
    handle = emb.register_forward_hook(lambda m, a, out: calls.append((a[0].clone(), out.clone())))
    prompts = collate([{"input_ids": [1, 70, 71, 72]}], bb.tokenizer.pad_token_id, left=True)
    method.generate(**prompts, max_new_tokens=3, min_new_tokens=3, do_sample=False, use_cache=True,
                    pad_token_id=bb.tokenizer.pad_token_id)
    handle.remove()
    steps = [(ids, out) for ids, out in calls if ids.shape[-1] == 1]  # decoding with the KV cache
    assert len(steps) == 2
    for ids, out in steps:
        shifted = method.shift_mask[ids].unsqueeze(-1)
        torch.testing.assert_close(out - raw_embeddings(bb, ids), shifted * method.bias, atol=1e-6, rtol=0)


def test_prompt_tuning_text_init_and_aligned_logits():
    method, bb = build("prompt_tuning", "tiny_qwen2", "method.num_virtual_tokens=3", "method.init=text",
                       "method.init_text=ab")
    ids = bb.tokenizer("ab", add_special_tokens=False)["input_ids"]
    assert torch.equal(method.prompt.detach(), raw_embeddings(bb, torch.tensor((ids * 2)[:3])))
    batch = collate([{"input_ids": [1, 70, 71], "labels": [-100, 71, 72]}], bb.tokenizer.pad_token_id)
    out = method(**batch)
    assert out.logits.shape[:2] == batch["input_ids"].shape
    want = torch.nn.functional.cross_entropy(out.logits[0, :-1], batch["labels"][0, 1:], ignore_index=-100)
    torch.testing.assert_close(out.loss, want)
    with pytest.raises(EmbexpError, match="init_text"):
        build("prompt_tuning", "tiny_qwen2", "method.init=text")


def test_integrated_gradients_ranking_matches_a_hand_computation():
    method, bb = build("tinyte_half", "tiny_llama", "method.ranking=integrated_gradients", "method.ig_steps=2",
                       "method.ig_batch_size=2", "method.ig_batches=1")
    with pytest.raises(EmbexpError, match="setup"):
        method(input_ids=torch.tensor([[1, 70]]))
    seqs = [[1, 70, 71, 72, 2], [1, 80, 81]]
    scores = method.ig_scores(seqs)
    # by hand: midpoint Riemann sum of the gradient along mean-embedding -> input, times (input - baseline)
    model, w, keep_rows = bb.model, bb.model.get_input_embeddings().weight.detach(), ~bb.special_mask()
    batch = collate([{"input_ids": s} for s in seqs], bb.tokenizer.pad_token_id)
    ids, mask = batch["input_ids"], batch["attention_mask"]
    x, base = w[ids], w[keep_rows].mean(0).expand(*ids.shape, -1)
    labels = ids.masked_fill(mask == 0, -100)
    grads = torch.zeros_like(x)
    for a in (0.25, 0.75):
        z = (base + a * (x - base)).requires_grad_(True)
        logits = model(inputs_embeds=z, attention_mask=mask).logits
        ce = torch.nn.functional.cross_entropy(logits[:, :-1].transpose(1, 2), labels[:, 1:], reduction="none")
        keep = (labels[:, 1:] != -100).float()
        ((ce * keep).sum(1) / keep.sum(1)).sum().backward()
        grads += z.grad / 2
    attr = ((x - base) * grads).abs() * (mask.bool() & keep_rows[ids]).unsqueeze(-1)
    torch.testing.assert_close(scores, attr.sum((0, 1)), rtol=1e-4, atol=1e-7)
    method.setup({"train": seqs, "eval": []})
    assert torch.equal(method.ranking, torch.sort(scores, stable=True).indices)
    from embexp.run.preflight import preflight  # on an encoder: refused by the pre-flight, before the model loads

    cfg = smoke("method=tinyte_half", "model=tiny_roberta", "task=glue", "method.ranking=integrated_gradients")
    with pytest.raises(EmbexpError) as e:
        preflight(cfg)
    assert str(e.value) == ("method.ranking=integrated_gradients needs a decoder; model tiny_roberta is an encoder "
                            "(choose from: variance, random)")


def test_lora_on_tied_embeddings_exports_exactly(tmp_path):
    from transformers import AutoModelForCausalLM

    method, bb = build("lora", "tiny_gemma2", "method.target_modules=[q_proj,v_proj,lm_head,embed_tokens]")
    assert bb.model.config.tie_word_embeddings
    batch = collate([{"input_ids": [1, 70, 71, 72], "labels": [-100, 71, 72, 73]}], bb.tokenizer.pad_token_id)
    inputs = {k: v for k, v in batch.items() if k != "labels"}
    with torch.no_grad():
        before = method(**inputs).logits
    opt = torch.optim.Adam(method.trainable_tensors().values(), lr=5e-2)
    for _ in range(2):
        method(**batch).loss.backward()
        opt.step()
        opt.zero_grad()
    with torch.no_grad():
        want = method(**inputs).logits
    assert not torch.allclose(want, before, atol=1e-3)
    method.export().save_pretrained(tmp_path)  # one shared matrix would take both updates: untied first
    with torch.no_grad():
        got = AutoModelForCausalLM.from_pretrained(tmp_path)(**inputs).logits
    torch.testing.assert_close(got, want, atol=1e-5, rtol=0)



# ---- where b and the virtual tokens enter: the raw row space, then the embedding scale -------------
def first_layer_input(method, bb, run):
    """The hidden states entering the first decoder layer while ``run()`` runs (each call's, in order)."""
    seen = []

    def grab(mod, args, kwargs):
        seen.append((args[0] if args else kwargs["hidden_states"]).detach().clone())

    handle = bb.model.model.layers[0].register_forward_pre_hook(grab, with_kwargs=True)
    try:
        with torch.no_grad():
            run()
    finally:
        handle.remove()
    return seen


def test_embed_scale_is_read_from_the_embedding_module():
    for model, want in [("tiny_gemma2", math.sqrt(64)), ("tiny_llama", 1.0), ("tiny_qwen2", 1.0),
                        ("tiny_roberta", 1.0)]:
        _, bb = build("tinyte_full", model)
        assert bb.embed_scale == want, model
        x = torch.tensor([[70, 71]])
        with torch.no_grad():
            torch.testing.assert_close(bb.model.get_input_embeddings()(x),
                                       bb.model.get_input_embeddings().weight[x] * want, atol=0, rtol=0)


@pytest.mark.parametrize("name", ["tinyte_full", "tinyte_half", "tinyte_gated"])
@pytest.mark.parametrize("model", ["tiny_gemma2", "tiny_llama"])
def test_shift_enters_the_first_layer_as_scale_times_b(name, model):
    """As on transformers 4.x (Gemma-2 scaled after the lookup): the first layer sees (e + b) * scale."""
    method, bb = build(name, model, *(["method.beta_init=30"] if name == "tinyte_gated" else []))
    batch = collate([{"input_ids": [1, 70, 71, 72, 2]}], bb.tokenizer.pad_token_id)
    (before,) = first_layer_input(method, bb, lambda: method(**batch))
    with torch.no_grad():
        method.bias.normal_()
    (after,) = first_layer_input(method, bb, lambda: method(**batch))
    scale = math.sqrt(bb.hidden_size) if model == "tiny_gemma2" else 1.0
    delta = method.delta(method.lengths(batch) if name == "tinyte_gated" else None).detach().reshape(-1)
    shifted = method.shift_mask[batch["input_ids"][0]]
    assert shifted.tolist() == [False, True, True, True, False]
    torch.testing.assert_close(after[0, shifted] - before[0, shifted], (scale * delta).expand(3, -1), atol=1e-5, rtol=0)
    assert torch.equal(after[0, ~shifted], before[0, ~shifted])


@pytest.mark.parametrize("model", ["tiny_gemma2", "tiny_llama"])
def test_export_adds_b_itself_to_the_rows(model):
    method, bb = build("tinyte_full", model)
    with torch.no_grad():
        method.bias.normal_()
    rows = method.export().get_input_embeddings().weight
    w = bb.model.get_input_embeddings().weight
    ids = torch.tensor([70, 71, bb.tokenizer.bos_token_id])
    torch.testing.assert_close(rows[ids[:2]] - w[ids[:2]], method.bias.detach().expand(2, -1), atol=1e-6, rtol=0)
    assert torch.equal(rows[ids[2]], w[ids[2]])  # special rows untouched


@pytest.mark.parametrize("name", ["prompt_tuning", "tinyte_hybrid"])
@pytest.mark.parametrize("model", ["tiny_gemma2", "tiny_llama"])
def test_virtual_token_enters_the_first_layer_scaled(name, model):
    """Virtual tokens are raw-row parameters multiplied by the embedding scale as they enter (training
    forward and generation alike), as transformers 4.x scaled inputs_embeds, virtual tokens included."""
    method, bb = build(name, model)
    with torch.no_grad():
        method.prompt.normal_()
    scale = math.sqrt(bb.hidden_size) if model == "tiny_gemma2" else 1.0
    want = scale * method.prompt.detach()[0]
    batch = collate([{"input_ids": [1, 70, 71, 72]}], bb.tokenizer.pad_token_id, left=True)
    (train,) = first_layer_input(method, bb, lambda: method(**batch))
    gen = first_layer_input(method, bb,
                            lambda: method.generate(**batch, max_new_tokens=2, min_new_tokens=2, do_sample=False,
                                                    pad_token_id=bb.tokenizer.pad_token_id))
    for x in (train, gen[0]):  # position 0: the virtual token (no padding in a batch of one)
        torch.testing.assert_close(x[0, 0], want, atol=1e-5, rtol=0)
        torch.testing.assert_close(x[0, 1:], raw_embeddings(bb, batch["input_ids"])[0], atol=1e-6, rtol=0)


@pytest.mark.parametrize("model", ["tiny_gemma2", "tiny_llama"])
def test_prompt_inits_are_raw_rows(model):
    from peft import PromptTuningConfig, PromptTuningInit, get_peft_model

    method, bb = build("prompt_tuning", model, "method.num_virtual_tokens=3", "method.init=text", "method.init_text=ab")
    w = bb.model.get_input_embeddings().weight.detach()
    ids = bb.tokenizer("ab", add_special_tokens=False)["input_ids"]
    assert torch.equal(method.prompt.detach(), w[torch.tensor((ids * 2)[:3])])
    # sample_vocab: peft SAMPLE_VOCAB's own draw (the same ids at the same RNG state), as raw rows
    ours, bb = build("prompt_tuning", model, "method.num_virtual_tokens=4")
    theirs = get_peft_model(load_backbone(smoke(f"model={model}").model).model,
                            PromptTuningConfig(task_type="CAUSAL_LM", num_virtual_tokens=4,
                                               prompt_tuning_init=PromptTuningInit.SAMPLE_VOCAB))
    peft_rows = theirs.prompt_encoder["default"].embedding.weight.detach()  # peft: the scaled module output
    torch.testing.assert_close(ours.prompt.detach() * bb.embed_scale, peft_rows, atol=0, rtol=0)


def test_untie_embeddings_gives_the_head_its_own_copy():
    from embexp.models import untie_embeddings

    _, bb = build("zero_shot", "tiny_gemma2")
    model = bb.model
    w = model.get_input_embeddings().weight
    assert model.get_output_embeddings().weight is w and model.config.tie_word_embeddings
    assert untie_embeddings(model)
    head = model.get_output_embeddings().weight
    assert head is not w and torch.equal(head, w) and not head.requires_grad
    assert model.config.tie_word_embeddings is False and model.config.get_text_config().tie_word_embeddings is False
    assert not untie_embeddings(model)
    _, llama = build("zero_shot", "tiny_llama")
    assert not untie_embeddings(llama.model)
