"""Sentence-embedding tasks (task=nli_pairs, task=stsb_similarity) for any encoder and method:
pooling, the InfoNCE objective, the fixtures and local files in the hub schema, the run path."""

from __future__ import annotations

import json
import math

import pytest
import torch
import torch.nn.functional as F

from conftest import run_train, smoke
from embexp import EmbexpError
from embexp.featurize import Featurizer, collate
from embexp.objectives.sentence import ContrastiveObjective, mean_pool
from embexp.run.build import build
from embexp.tasks import build_task


def test_mean_pool_ignores_padding():
    h = torch.randn(2, 4, 3)
    mask = torch.tensor([[1, 1, 0, 0], [1, 1, 1, 1]])
    got = mean_pool(h, mask)
    torch.testing.assert_close(got[0], h[0, :2].mean(0))
    torch.testing.assert_close(got[1], h[1].mean(0))


def test_padding_does_not_change_a_sentence_embedding():
    c = build(smoke("method=full_ft", "model=tiny_bert", "task=nli_pairs"), torch.device("cpu"))
    tok = c.backbone.tokenizer
    short, long = tok("a cat")["input_ids"], tok("the big brown dog chased a cat")["input_ids"]
    batch = collate([{"input_ids": short}, {"input_ids": long}], tok.pad_token_id)
    c.method.eval()
    with torch.no_grad():
        together = c.method.embed(batch["input_ids"], batch["attention_mask"])
        alone = c.method.embed(torch.tensor([short]), torch.ones(1, len(short), dtype=torch.long))
    torch.testing.assert_close(together[0], alone[0], atol=1e-5, rtol=0)


class FixedEmbeddings:
    """A stand-in method whose embed() returns given vectors per side."""

    def __init__(self, a, b):
        self.a, self.b = a, b

    def embed(self, ids, mask):
        return self.a if ids.shape[1] == 1 else self.b


def test_symmetric_infonce_by_hand():
    a, b = torch.randn(4, 8), torch.randn(4, 8)
    obj = ContrastiveObjective(0.07)
    out = obj(FixedEmbeddings(a, b), {"input_ids": torch.zeros(4, 1), "attention_mask": None,
                                      "input_ids_b": torch.zeros(4, 2), "attention_mask_b": None})
    s = [[float(F.cosine_similarity(a[i], b[j], dim=0)) / 0.07 for j in range(4)] for i in range(4)]
    rows = -sum(s[i][i] - math.log(sum(math.exp(v) for v in s[i])) for i in range(4)) / 4
    cols = -sum(s[i][i] - math.log(sum(math.exp(s[k][i]) for k in range(4))) for i in range(4)) / 4
    assert abs(out.loss.item() - (rows + cols)) < 1e-4
    out.loss.backward()
    assert obj.log_temperature.grad is not None and obj.log_temperature.grad.abs() > 0
    assert abs(obj.temperature - 0.07) < 1e-7


def test_fixtures_are_in_the_hub_schema_and_only_entailment_is_trained():
    task = build_task(smoke("task=nli_pairs").task)
    task._dataset = "snli"
    snli = task.fixture_rows("train", 50, __import__("random").Random(0))
    assert set(snli[0]) == {"premise", "hypothesis", "label"} and {r["label"] for r in snli} == {-1, 0, 1, 2}
    task._dataset = "mnli"
    assert (set(task.fixture_rows("train", 3, __import__("random").Random(0))[0])
            == {"premise", "hypothesis", "label", "idx"})
    cfg = smoke("task=nli_pairs", "task.max_train_samples=-1")
    task = build_task(cfg.task)
    rows = task.load("train")
    assert rows and all(r["label"] == 0 for r in rows)
    ex = task.examples("train")[0]
    assert ex.text == (rows[0]["premise"], rows[0]["hypothesis"]) and ex.label is None
    sts = build_task(smoke("task=stsb_similarity").task)
    row = sts.load("eval")[0]
    assert set(row) == {"sentence1", "sentence2", "label", "idx"} and 0.0 <= row["label"] <= 5.0
    # nli_pairs evaluates on STS-B
    assert [e.text for e in task.examples("eval")] == [e.text for e in sts.examples("eval")]


def test_local_files_in_the_hub_schema(tmp_path):
    """<data_dir>/snli/plain_text/<split>.jsonl and glue/stsb/validation.jsonl, as in ../shared/data."""
    rows = {"validation": [("A man sleeps .", "A man rests .", 0), ("A man sleeps .", "A man runs .", 2),
                           ("Kids play .", "Children play .", 0), ("x", "y", -1)],
            "test": [("A dog barks .", "An animal makes noise .", 0), ("A dog barks .", "A cat sleeps .", 1)]}
    for split, rs in rows.items():
        (tmp_path / "snli" / "plain_text").mkdir(parents=True, exist_ok=True)
        (tmp_path / "snli" / "plain_text" / f"{split}.jsonl").write_text(
            "".join(json.dumps({"premise": p, "hypothesis": h, "label": y}) + "\n" for p, h, y in rs))
    (tmp_path / "glue" / "stsb").mkdir(parents=True)
    (tmp_path / "glue" / "stsb" / "validation.jsonl").write_text(
        "".join(json.dumps({"sentence1": s, "sentence2": t, "label": y, "idx": i}) + "\n"
                for i, (s, t, y) in enumerate([("a", "b", 1.0), ("c", "d", 4.5)])))
    cfg = smoke("task=nli_pairs", "task.source=local", f"task.data_dir={tmp_path}", "task.datasets=[snli]",
                "task.train_split=validation+test", "task.max_train_samples=-1")
    task = build_task(cfg.task)
    assert [e.text for e in task.examples("train")] == [("A man sleeps .", "A man rests ."),
                                                        ("Kids play .", "Children play ."),
                                                        ("A dog barks .", "An animal makes noise .")]
    assert [e.label for e in task.examples("eval")] == [1.0, 4.5]
    cfg = smoke("task=nli_pairs", "task.source=local", f"task.data_dir={tmp_path}", "task.datasets=[snli,mnli]",
                "task.train_split=validation")
    with pytest.raises(EmbexpError, match="no local file for task nli_pairs split 'validation_matched'"
                                          ".*glue/mnli/validation_matched.jsonl"):
        build_task(cfg.task).load("train")


@pytest.mark.parametrize("method", ["pete", "full_ft", "tinyte_full", "pema"])
def test_nli_pairs_run_trains_the_temperature_and_scores_sts(method, tmp_run):
    from safetensors.torch import load_file

    from embexp.eval import reevaluate

    model = "scratch_encoder" if method in ("pete", "full_ft") else "tiny_bert"
    m = run_train(smoke(f"method={method}", f"model={model}", "task=nli_pairs", "trainer.max_steps=3"), tmp_run)
    assert set(m["metrics"]) >= {"spearman", "pearson"} and -100 <= m["metrics"]["spearman"] <= 100
    adapter = load_file(tmp_run / "adapter.safetensors")
    assert adapter["objective.log_temperature"].item() != pytest.approx(math.log(0.07), abs=1e-9)  # learned
    assert m["train"]["input_tokens"] > 0 and m["train"]["tokens"] == m["train"]["input_tokens"]  # both sides counted
    new, old = reevaluate(tmp_run)
    assert new["spearman"] == pytest.approx(old["spearman"], abs=1e-6)


def test_similarity_evaluation_by_hand(tmp_run):
    """method=zero_shot on STS-B: the recorded predictions are the cosines of the pooled embeddings."""
    m = run_train(smoke("method=zero_shot", "model=tiny_bert", "task=stsb_similarity"), tmp_run)
    preds = [json.loads(ln) for ln in (tmp_run / "predictions.jsonl").read_text().splitlines()]
    c = build(smoke("method=zero_shot", "model=tiny_bert", "task=stsb_similarity"), torch.device("cpu"))
    enc = Featurizer(c.backbone.tokenizer, False, 128, separate=True)
    f0 = enc.encoder_features(c.task.examples("eval")[0])
    with torch.no_grad():
        a = c.method.embed(torch.tensor([f0["input_ids"]]), torch.ones(1, len(f0["input_ids"]), dtype=torch.long))
        b = c.method.embed(torch.tensor([f0["input_ids_b"]]), torch.ones(1, len(f0["input_ids_b"]), dtype=torch.long))
    assert preds[0]["prediction"] == pytest.approx(float(F.cosine_similarity(a, b)[0]), abs=1e-5)
    from embexp.tasks.metrics import spearman_pearson

    assert m["metrics"]["spearman"] == pytest.approx(spearman_pearson([p["label"] for p in preds],
                                                                      [p["prediction"] for p in preds])["spearman"])


@pytest.mark.parametrize("args,needle", [
    (("method=full_ft", "model=tiny_bert", "task=stsb_similarity"), "task stsb_similarity is zero-shot"),
    (("method=zero_shot", "model=tiny_llama", "task=stsb_similarity"),
     "sentence-embedding tasks need model.kind=encoder"),
    (("method=full_ft", "model=tiny_bert", "task=nli_pairs", "task.datasets=[snli,xnli]"),
     "unknown task.datasets entry 'xnli'"),
])
def test_bad_input(args, needle, tmp_run):
    with pytest.raises(EmbexpError, match=needle):
        run_train(smoke(*args), tmp_run)
