"""PET-style cloze classification (task.cloze=true; embexp/objectives/cloze.py): PET's patterns and
truncation, the masked-LM logits of the verbalizers at the mask as class logits, Tiny-Attention
adapters inside a masked-LM model, an end-to-end run, bad input."""

from __future__ import annotations

import pytest
import torch

from conftest import run_train, smoke
from embexp import EmbexpError
from embexp.core.config import validate
from embexp.featurize import MASK_POSITIONS, Featurizer, collate
from embexp.methods import build_method
from embexp.models import load_backbone
from embexp.objectives.cloze import ClozeObjective
from embexp.tasks import build_task

ROW = {"premise": "Anna found a cat in the barn on Monday.", "hypothesis": "A cat was found in the barn.",
       "idx": 0, "label": 0}


def cloze_task(subset="rte", pattern=3):
    return build_task(smoke("model=tiny_albert", "task=superglue", f"task.subset={subset}", "task.cloze=true",
                            f"task.pattern={pattern}").task)


def albert(mlm=True):
    torch.manual_seed(0)
    return load_backbone(smoke("model=tiny_albert").model, num_labels=2, mlm=mlm)


def ids(tok, text):
    return tok(text, add_special_tokens=False)["input_ids"]


def tokenizer(name: str):
    if name == "tiny":
        return albert().tokenizer
    from transformers import AutoTokenizer

    from embexp.models import minilm_path

    return AutoTokenizer.from_pretrained(str(minilm_path()))  # BERT's WordPiece, with token types


@pytest.mark.parametrize("tok_name", ["tiny", "minilm"])
@pytest.mark.parametrize("pattern", [0, 3, 4])
def test_pet_patterns_encode_as_pet_does(pattern, tok_name):
    tok = tokenizer(tok_name)
    cls, sep, mask = tok.cls_token_id, tok.sep_token_id, tok.mask_token_id
    feat = Featurizer(tok, False, max_source_tokens=512).encoder_features(cloze_task("rte", pattern).format(ROW))
    h, p = ids(tok, "A cat was found in the barn"), ids(tok, ROW["premise"])  # h: final punctuation removed
    if pattern == 3:  # [CLS] h ? [SEP] [MASK] . p [SEP], every part tokenised on its own
        a, b = h + ids(tok, "?"), [mask] + ids(tok, ".") + p
    elif pattern == 0:
        a, b = ids(tok, '"') + h + ids(tok, '" ?'), [mask] + ids(tok, ', "') + p + ids(tok, '"')
    else:  # one segment: p question: h' True or False? answer: [MASK]
        a, b = (p + ids(tok, " question: ") + ids(tok, ROW["hypothesis"]) + ids(tok, " True or False? answer:")
                + [mask]), None
    want = [cls] + a + [sep] + (b + [sep] if b else [])
    assert feat["input_ids"] == want
    assert feat["mask_position"] == want.index(mask) and feat["labels"] == 0
    if tok_name == "minilm":  # segment a with [CLS] and its [SEP]: type 0; segment b and its [SEP]: type 1
        assert feat["token_type_ids"] == [0] * (len(a) + 2) + ([1] * (len(b) + 1) if b else [])
    else:  # the byte tokenizer has no token types (its model inputs do not list them)
        assert "token_type_ids" not in feat


def test_truncation_cuts_the_longer_shortenable_text_and_keeps_the_mask():
    tok = albert().tokenizer
    ex = cloze_task("cb").format({**ROW, "label": 2})
    full = Featurizer(tok, False, max_source_tokens=512).encoder_features(ex)["input_ids"]
    h = len(ids(tok, "A cat was found in the barn"))
    n = len(full) - 10
    feat = Featurizer(tok, False, max_source_tokens=n).encoder_features(ex)
    assert len(feat["input_ids"]) == n and feat["input_ids"][feat["mask_position"]] == tok.mask_token_id
    # the premise (longer) loses its last 10 tokens; the hypothesis keeps all of its tokens
    assert feat["input_ids"][1:1 + h] == full[1:1 + h]
    assert feat["input_ids"][-11:-1] != full[-11:-1] and feat["input_ids"][-1] == tok.sep_token_id


def test_verbalizers_are_pets_and_multi_token_words_use_their_first_token():
    assert cloze_task("cb").verbalizers == ("Yes", "No", "Maybe")  # entailment, contradiction, neutral
    assert cloze_task("rte").verbalizers == ("Yes", "No")
    assert cloze_task("rte", 4).verbalizers == ("true", "false")
    enc = Featurizer(albert().tokenizer, False)
    assert enc.verbalizer_ids(["Yes", "No", "Maybe"]) == [ids(enc.tokenizer, w)[0] for w in ("Yes", "No", "Maybe")]
    with pytest.raises(EmbexpError, match="distinct tokens"):
        enc.verbalizer_ids(["Yes", "Yonder"])


def cloze_batch(task, enc, rows):
    return collate([enc.encoder_features(task.format(r)) for r in rows], enc.tokenizer.pad_token_id)


def test_class_logits_are_the_mlm_logits_of_the_verbalizers_at_the_mask():
    bb = albert()
    assert bb.head_parameters() == []  # the pretrained masked-LM head stays frozen: no classifier
    task, enc = cloze_task("cb"), Featurizer(bb.tokenizer, False)
    m = build_method(smoke("method=tinyattn").method, bb)
    verb = enc.verbalizer_ids(task.verbalizers)
    m.attach_objective(ClozeObjective(verb))
    rows = [ROW, {**ROW, "premise": "Ben said nothing at all about it.", "label": 2}]
    batch = cloze_batch(task, enc, rows)
    out = m(**batch)
    plain = {k: v for k, v in batch.items() if k not in (MASK_POSITIONS, "labels")}
    with torch.no_grad():
        mlm = m(**plain).logits  # [B, T, V]
    want = torch.stack([mlm[i, int(batch[MASK_POSITIONS][i]), verb] for i in range(2)])
    assert out.logits.shape == (2, 3) and torch.allclose(out.logits, want)
    assert torch.allclose(out.loss, torch.nn.functional.cross_entropy(want, batch["labels"]))
    out.loss.backward()  # gradients reach the adapters only
    assert all(p.grad is not None for p in m.method_tensors().values())
    assert all(p.grad is None for p in bb.model.parameters())


AUTHORS_SET = ["albert.encoder.embedding_hidden_mapping_in", "predictions.dense",
               "predictions.LayerNorm", "predictions.bias"]


def test_the_authors_trainable_set_and_full_vocabulary_loss():
    """train_few_shot.py freezes ALBERT's embeddings and its shared layer (adapter aside) only, so
    embedding_hidden_mapping_in and the masked-LM head's dense/LayerNorm/bias train too, and the
    loss is the masked-LM cross-entropy over the whole vocabulary at the mask."""
    bb = albert()
    task, enc = cloze_task("cb"), Featurizer(bb.tokenizer, False)
    m = build_method(smoke("method=tinyattn", f"method.train_backbone=[{','.join(AUTHORS_SET)}]").method, bb)
    verb = enc.verbalizer_ids(task.verbalizers)
    m.attach_objective(ClozeObjective(verb, "vocabulary"))
    names = {n for n in m.trainable_tensors() if n.startswith("backbone.")}
    assert names == {"backbone." + n for n in ("albert.encoder.embedding_hidden_mapping_in.weight",
                                               "albert.encoder.embedding_hidden_mapping_in.bias",
                                               "predictions.dense.weight", "predictions.dense.bias",
                                               "predictions.LayerNorm.weight", "predictions.LayerNorm.bias",
                                               "predictions.bias")}
    cfg = bb.model.config
    extra = ((cfg.embedding_size + 1) * cfg.hidden_size + (cfg.hidden_size + 1) * cfg.embedding_size
             + 2 * cfg.embedding_size + cfg.vocab_size)
    assert m.n_trainable() == m.n_trainable(include_head=False) + extra
    rows = [ROW, {**ROW, "premise": "Ben said nothing at all about it.", "label": 2}]
    batch = cloze_batch(task, enc, rows)
    out = m(**batch)
    plain = {k: v for k, v in batch.items() if k not in (MASK_POSITIONS, "labels")}
    with torch.no_grad():
        mlm = m(**plain).logits
    at_mask = torch.stack([mlm[i, int(batch[MASK_POSITIONS][i])] for i in range(2)])  # [2, V]
    target = torch.tensor([verb[0], verb[2]])
    assert torch.allclose(out.loss, torch.nn.functional.cross_entropy(at_mask, target))
    assert not torch.allclose(out.loss, torch.nn.functional.cross_entropy(at_mask[:, verb], batch["labels"]))
    assert torch.allclose(out.logits, at_mask[:, verb])  # prediction: the verbalizers, as before
    out.loss.backward()
    trained = {id(p) for p in m.trainable_tensors().values()}
    assert all(p.grad is not None for p in m.trainable_tensors().values())
    # embeddings, the shared layer, the tied decoder
    assert all(p.grad is None for p in bb.model.parameters() if id(p) not in trained)
    assert bb.model.predictions.decoder.weight.grad is None


def test_table1_experiment_trains_the_authors_set_saves_it_and_reevaluates(tmp_path):
    """The Table 1 experiment file (the authors' trainable set and loss) end to end on tiny ALBERT:
    one adapter module set for all depths, the backbone tensors saved with it and read back."""
    from embexp.eval import reevaluate

    cfg = smoke("experiment=tinyattn_fewglue_cb", "model=tiny_albert", "trainer.max_steps=4")
    assert cfg.task.cloze_loss == "vocabulary" and list(cfg.method.train_backbone) == AUTHORS_SET
    metrics = run_train(cfg, tmp_path / "run")
    d, e, v = 64, 32, 261  # tiny ALBERT: hidden, embedding size, vocabulary (models.TINY, byte tokenizer)
    assert metrics["n_method_params"] == 2 * d + (3 * d + 3) + 2 * d  # one module set, not one per depth
    assert metrics["n_trainable_params"] - metrics["n_method_params"] == (e + 1) * d + (d + 1) * e + 2 * e + v
    new, recorded = reevaluate(tmp_path / "run", cpu=True)
    assert {k: v for k, v in new.items() if not k.endswith("seconds")} == {k: v for k, v in recorded.items()
                                                                           if not k.endswith("seconds")}


def test_a_train_backbone_name_that_matches_nothing_is_one_line():
    with pytest.raises(EmbexpError, match="method.train_backbone: 'predictions.dens' names no parameter") as e:
        build_method(smoke("method=tinyattn", "method.train_backbone=[predictions.dens]").method, albert())
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("family", ["albert", "bert"])
def test_tinyattn_adapters_work_inside_the_masked_lm_model(family):
    torch.manual_seed(0)
    bb = load_backbone(smoke("model=tiny_albert", f"model.family={family}").model, mlm=True)
    batch = collate([{"input_ids": list(range(10, 21))}, {"input_ids": list(range(30, 37))}], bb.tokenizer.pad_token_id)
    with torch.no_grad():
        want = bb.model(**batch).logits
    m = build_method(smoke("method=tinyattn", "method.init_scale=0").method, bb)
    with torch.no_grad():
        assert torch.equal(m(**batch).logits, want)
        m.out_bias.copy_(torch.linspace(-0.2, 0.2, m.out_bias.numel()).view_as(m.out_bias))
        assert not torch.allclose(m(**batch).logits, want)


def test_cloze_run_end_to_end_trains_only_the_adapters(tmp_path):
    cfg = smoke("method=tinyattn", "model=tiny_albert", "task=superglue", "task.subset=cb", "task.cloze=true",
                "task.select_split=''")
    metrics = run_train(cfg, tmp_path / "run")
    assert set(metrics["metrics"]) >= {"accuracy", "f1"}
    assert metrics["n_trainable_params"] == metrics["n_method_params"] > 0
    assert metrics["train"]["final_train_loss"] > 0
    from embexp.eval import reevaluate

    new, recorded = reevaluate(tmp_path / "run", cpu=True)  # the saved adapter, the same cloze path
    assert {k: v for k, v in new.items() if not k.endswith("seconds")} == {k: v for k, v in recorded.items()
                                                                           if not k.endswith("seconds")}


def test_zero_shot_scores_the_pretrained_masked_lm_head(tmp_path):
    cfg = smoke("method=zero_shot", "model=tiny_albert", "task=superglue", "task.subset=rte", "task.cloze=true",
                "task.select_split=''")
    metrics = run_train(cfg, tmp_path / "run")
    assert metrics["n_trainable_params"] == 0 and "accuracy" in metrics["metrics"]


@pytest.mark.parametrize("args,needle", [
    (("task.subset=boolq",), "not task.subset=boolq (choose from: cb, rte)"),
    (("task.subset=rte", "task.pattern=7"), "task.pattern"),
])
def test_bad_cloze_input_is_one_clear_line(args, needle):
    with pytest.raises(EmbexpError, match=needle.replace("(", r"\(").replace(")", r"\)")) as e:
        # the pattern: refused when composed
        cfg = smoke("model=tiny_albert", "task=superglue", "task.cloze=true", *args)
        validate(cfg)
        build_task(cfg.task)
    assert "\n" not in str(e.value)


def test_cloze_on_a_decoder_is_refused():
    with pytest.raises(EmbexpError, match="cloze tasks .* need an encoder with a masked-LM head"):
        load_backbone(smoke("model=tiny_llama").model, mlm=True)
