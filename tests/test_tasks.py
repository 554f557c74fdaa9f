"""Task families wmt16, glue and tree: schemas, prompts, metrics, generator invariants. Offline, fast."""

import dataclasses
import json
import math
import random
import time

import pytest
from omegaconf import OmegaConf

from embexp import EmbexpError
from embexp.tasks import TASKS
from embexp.tasks.glue import GlueConfig, GlueTask
from embexp.tasks.tree import NAMES, STAGES, TreeConfig, TreeTask, generate_tree, parse_tree, render, walk
from embexp.tasks.wmt16 import WMT16Config, WMT16Task

# Field names exactly as datasets.load_dataset returns them (glue cola/sst2/mrpc/stsb/rte and wmt16 cs-en
# checked against the real samples in ../shared/data; the others from the nyu-mll/glue dataset card).
GLUE_FIELDS = {
    "cola": {"sentence", "label", "idx"},
    "sst2": {"sentence", "label", "idx"},
    "mrpc": {"sentence1", "sentence2", "label", "idx"},
    "qqp": {"question1", "question2", "label", "idx"},
    "stsb": {"sentence1", "sentence2", "label", "idx"},
    "mnli": {"premise", "hypothesis", "label", "idx"},
    "qnli": {"question", "sentence", "label", "idx"},
    "rte": {"sentence1", "sentence2", "label", "idx"},
    "wnli": {"sentence1", "sentence2", "label", "idx"},
}
TREE_FIELDS = {"indent_tree", "parent", "child", "label", "task_type"}


def make(task_cls, config_cls, **overrides):
    return task_cls(OmegaConf.merge(OmegaConf.structured(config_cls), overrides))


def glue(subset="sst2", **kw):
    return make(GlueTask, GlueConfig, subset=subset, **kw)


def fixture(task, split="validation", n=64, seed=0):
    return task.fixture_rows(split, n, random.Random(seed))


def write_jsonl(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


# ---- registry and configs ------------------------------------------------------------------------
def test_registered_with_help_on_every_field():
    for name, cls in [("glue", GlueTask), ("wmt16", WMT16Task), ("tree", TreeTask)]:
        assert TASKS[name] is cls
        for fld in dataclasses.fields(cls.Config):
            assert fld.metadata.get("help"), f"{name}.{fld.name} has no help text"
        assert OmegaConf.structured(cls.Config).name == name


def schema_error(config_cls, **overrides) -> str:
    """The one line the schema refuses these task fields with (config.validate, when composed)."""
    from embexp.core.config import validate_fields

    with pytest.raises(EmbexpError) as e:
        validate_fields(OmegaConf.merge(OmegaConf.structured(config_cls), overrides), "task")
    return str(e.value)


def test_unknown_subset_names_the_choices():
    assert schema_error(GlueConfig, subset="sts-b") == ("unknown task.subset 'sts-b' (choose from: cola, sst2, "
                                                         "mrpc, qqp, stsb, mnli, qnli, rte, wnli)")
    assert schema_error(TreeConfig, subset="huge") == ("unknown task.subset 'huge' (choose from: small, xsmall, "
                                                        "medium, xmedium, large, x3large)")
    assert schema_error(WMT16Config, subset="de-en") == "unknown task.subset 'de-en' (choose from: cs-en)"
    for cls, task in ((GlueConfig, GlueTask), (TreeConfig, TreeTask), (WMT16Config, WMT16Task)):
        # one tuple
        assert {fl.name: fl for fl in dataclasses.fields(cls)}["subset"].metadata["choices"] == task.subsets


# ---- GLUE --------------------------------------------------------------------------------------
@pytest.mark.parametrize("subset", sorted(GLUE_FIELDS))
def test_glue_fixture_schema_and_format(subset):
    task = glue(subset)
    rows = fixture(task)
    assert all(set(r) == GLUE_FIELDS[subset] for r in rows)
    assert [r["idx"] for r in rows] == list(range(len(rows)))
    label_type = float if subset == "stsb" else int
    assert all(type(r["label"]) is label_type for r in rows)
    assert all(isinstance(r[k], str) and r[k] for r in rows for k in task.fields)
    for row in rows:
        ex = task.format(row)
        assert ex.text == tuple(row[k] for k in task.fields)
        if subset == "stsb":
            assert task.kind == "regression" and task.num_labels == 1
            assert ex.choices == () and ex.target == f" {row['label']:.1f}"
        else:
            assert ex.target == ex.choices[ex.label] and all(c.startswith(" ") for c in ex.choices)
            assert len(ex.choices) == task.num_labels == len(task.label_names)
            assert ex.prompt.endswith("\nAnswer:")
    if subset != "stsb":  # every class occurs in 64 rows
        assert {r["label"] for r in rows} == set(range(task.num_labels))
    assert {r["label"] for r in fixture(task, split="test")} == {-1}  # GLUE test splits are unlabelled


def test_glue_prompts_are_lm_eval_verbatim():
    row = {"sentence": "a gorgeous film . ", "label": 1, "idx": 0}
    ex = glue("sst2").format(row)
    assert ex.prompt == "a gorgeous film . \nQuestion: Is this sentence positive or negative?\nAnswer:"
    assert ex.choices == (" negative", " positive") and ex.target == " positive"
    mnli = glue("mnli").format({"premise": "P.", "hypothesis": " The cat sat ", "label": 2, "idx": 0})
    assert mnli.prompt == "P.\nQuestion: The cat sat. True, False or Neither?\nAnswer:"
    assert mnli.choices == (" True", " Neither", " False") and mnli.target == " False"
    qnli = glue("qnli").format({"question": "Q?", "sentence": "S.", "label": 1, "idx": 0})
    assert qnli.prompt == "Q?\nS.\nQuestion: Does this response answer the question?\nAnswer:" and qnli.target == " no"
    assert glue("wnli").format({"sentence1": "A", "sentence2": "B", "label": 1, "idx": 0}).target == " True"


def test_glue_fixture_signal_sst2():
    from embexp.tasks.glue import POS

    for r in fixture(glue("sst2"), n=200):
        assert r["label"] == int(any(w in POS for w in r["sentence"].split()))


def test_glue_eval_split_auto():
    assert glue("mnli").split_name("eval") == "validation_matched"
    assert glue("sst2").split_name("eval") == "validation"
    assert glue("mnli", eval_split="validation_mismatched").split_name("eval") == "validation_mismatched"
    assert glue("mnli").split_name("train") == "train"


def test_mcc_f1_accuracy_by_hand():
    # tp=3 fn=1 fp=1 tn=2: MCC = (3*2 - 1*1) / sqrt(4*4*3*3) = 5/12
    gold = [1, 1, 1, 1, 0, 0, 0]
    pred = [1, 1, 1, 0, 1, 0, 0]
    m = glue("cola").score_labels(gold, pred)
    assert m["mcc"] == pytest.approx(100 * 5 / 12) and m["accuracy"] == pytest.approx(100 * 5 / 7)
    m = glue("mrpc").score_labels(gold, pred)
    assert m["f1"] == pytest.approx(100 * 6 / 8) and set(m) == {"accuracy", "f1"}
    # invalid answers (-1) are wrong: scored as the other class
    m = glue("cola").score_labels([1, 0, 1, 0], [-1, -1, 1, 0])
    assert m["accuracy"] == 50.0 and m["mcc"] == pytest.approx(0.0)
    assert glue("qqp").score_labels([1, 1], [-1, -1])["f1"] == 0.0
    assert glue("mnli").score_labels([0, 1, 2, 2], [0, 2, 2, -1]) == {"accuracy": 50.0}


def test_stsb_regression_metrics():
    task = glue("stsb")
    gold = [0.0, 1.0, 2.0, 3.0, 4.0]
    assert task.score_regression(gold, [0.5, 1.5, 2.5, 3.5, 4.5])["pearson"] == pytest.approx(100.0)
    m = task.score_regression(gold, [0.0, 0.1, 0.2, 0.3, 5.0])  # monotone, not linear
    assert m["spearman"] == pytest.approx(100.0) and m["pearson"] < 90
    # generated strings: parsed strictly; unparseable -> scale midpoint, reported as `invalid`
    m = task.score_regression(gold, [" 0.0", "1", " 2.0", "three", "4.0 points"])
    assert m["invalid"] == pytest.approx(40.0)
    # preds (0, 1, 2, 2.5, 2.5) vs (0..4): sum dx*dy = 6.5, sum dx^2 = 10, sum dy^2 = 4.7
    assert m["pearson"] == pytest.approx(100 * 6.5 / math.sqrt(10 * 4.7))


# ---- WMT16 -------------------------------------------------------------------------------------
def test_wmt16_fixture_schema_format_and_signal():
    from embexp.tasks.wmt16 import ADJS, ADVS, NOUNS, VERBS

    task = make(WMT16Task, WMT16Config)
    assert task.hub_source() == ("wmt/wmt16", "cs-en") and task.split_name("eval") == "test"
    rows = fixture(task, split="test")
    assert all(set(r) == {"translation"} and set(r["translation"]) == {"cs", "en"} for r in rows)
    lexicon = dict(NOUNS + ADJS + VERBS + ADVS)
    exs = [task.format(r) for r in rows]
    hyps = []
    for r, ex in zip(rows, exs):
        assert ex.prompt == f"Czech phrase: {r['translation']['cs']}\nEnglish phrase:"
        assert ex.target == " " + r["translation"]["en"]
        words = [lexicon[w] for w in r["translation"]["cs"].rstrip(".").lower().split()]
        hyps.append(" " + " ".join(words).capitalize() + ".")
    assert task.score_text([e.target for e in exs], hyps, exs) == {"bleu": pytest.approx(100.0), "ter": 0.0}


def test_wmt16_metrics_by_hand():
    task = make(WMT16Task, WMT16Config)
    refs = [" the cat sat on the mat", " a dog ran in the park"]
    assert task.score_text(refs, refs, []) == {"bleu": pytest.approx(100.0), "ter": 0.0}
    # one deletion in 6 reference words + one substitution in 6: TER = 2/12
    m = task.score_text(refs, ["the cat sat on mat", "a dog ran in the yard"], [])
    assert m["ter"] == pytest.approx(100 * 2 / 12) and 0 < m["bleu"] < 100
    assert task.score_text(refs, ["", ""], [])["bleu"] == 0.0


def test_wmt16_missing_language_raises():
    with pytest.raises(EmbexpError, match="translation.en"):
        make(WMT16Task, WMT16Config).format({"translation": {"cs": "Ahoj"}})


# ---- local files and validation ----------------------------------------------------------------
def test_local_source_reads_hub_schema(tmp_path):
    rows = [{"sentence": "good fun ", "label": 1, "idx": 0}, {"sentence": "dull ", "label": 0, "idx": 1}]
    write_jsonl(tmp_path / "glue" / "sst2" / "validation.jsonl", rows)
    task = glue("sst2", source="local", data_dir=str(tmp_path))
    assert task.load("eval") == rows
    assert [e.target for e in task.examples("eval")] == [" positive", " negative"]
    assert len(glue("sst2", data_dir=str(tmp_path), max_eval_samples=1).load("eval")) == 1  # auto -> local

    wmt = [{"translation": {"cs": "Dobrý den.", "en": "Good day."}}]
    write_jsonl(tmp_path / "wmt" / "wmt16" / "cs-en" / "test.jsonl", wmt)
    assert make(WMT16Task, WMT16Config, data_dir=str(tmp_path)).load("eval") == wmt
    with pytest.raises(EmbexpError, match="no local file"):
        glue("rte", source="local", data_dir=str(tmp_path)).load("eval")


def test_missing_required_field_is_named(tmp_path):
    write_jsonl(tmp_path / "validation.jsonl", [{"sentence1": "A.", "label": 0, "idx": 0}])
    with pytest.raises(EmbexpError, match="sentence2"):
        glue("rte", source="local", data_dir=str(tmp_path)).load("eval")
    write_jsonl(tmp_path / "test.jsonl", [{"indent_tree": "AB\n+CD", "parent": "AB", "label": "true"}])
    with pytest.raises(EmbexpError, match="child"):
        make(TreeTask, TreeConfig, data_dir=str(tmp_path)).load("eval")


# ---- Textualized Tree --------------------------------------------------------------------------
def test_rendering_example_parses_back():
    tree = ("AB", [("CD", [("EF", [])]), ("GH", [])])
    assert render(tree) == "AB\n+CD\n++EF\n+GH"
    assert parse_tree("AB\n+CD\n++EF\n+GH") == [("AB", "CD"), ("CD", "EF"), ("AB", "GH")]
    with pytest.raises(EmbexpError):
        parse_tree("AB\n++CD")


@pytest.mark.parametrize("stage", list(STAGES))
def test_tree_generator_invariants(stage):
    max_depth, max_nodes, min_c, max_c = STAGES[stage]
    rng = random.Random(0)
    for _ in range(30 if stage != "x3large" else 5):
        tree = generate_tree(rng, *STAGES[stage])
        nodes = list(walk(tree))
        names = [n for n, _, _ in nodes]
        assert len(set(names)) == len(names) <= max_nodes and set(names) <= set(NAMES)
        assert max(lvl for _, lvl, _ in nodes) <= max_depth
        edges = [(p, n) for n, _, p in nodes if p is not None]
        assert len(edges) == len(names) - 1 and parse_tree(render(tree)) == edges
        if min_c >= 1:
            assert len(tree[1]) >= 1  # the root always has room for children
        from embexp.tasks.tree import tree_rows

        rows = tree_rows(tree, rng, -1)
        n = len(names)
        assert len(rows) == n * (n - 1) and all(set(r) == TREE_FIELDS for r in rows)
        assert {(r["parent"], r["child"]) for r in rows if r["label"] == "true"} == set(edges)
        if n > 1:
            assert sum(r["label"] == "true" for r in rows) / len(rows) == pytest.approx(1 / n)


def test_tree_task_generate_split_by_tree_and_format():
    task = make(TreeTask, TreeConfig, subset="medium", num_train_trees=60, num_eval_trees=20)
    assert task.resolved_source() == "generate" and task.split_name("eval") == "test"
    t0 = time.perf_counter()
    train, test = task.load("train"), task.load("eval")
    # ~0.2 s alone; the bound catches a pathological generator, not a loaded machine (0.77 s was seen under load)
    assert time.perf_counter() - t0 < 2.0 and len(train) + len(test) > 2000
    trees_train, trees_test = {r["indent_tree"] for r in train}, {r["indent_tree"] for r in test}
    assert len(trees_train) <= 60 and len(trees_test) <= 20 and not trees_train & trees_test
    assert task.load("eval") == test  # deterministic
    # a different stage gets a different seed (seed + stage index)
    other = make(TreeTask, TreeConfig, subset="xmedium", num_train_trees=60, num_eval_trees=20).load("eval")
    assert {r["indent_tree"] for r in other}.isdisjoint(trees_test)

    ex = task.format(test[0])
    t, p, c = test[0]["indent_tree"], test[0]["parent"], test[0]["child"]
    assert ex.prompt == f"Tree: {t}, Task: Parent/Child Relationship, Parent: {p}, Child: {c}, Answer: "
    assert ex.choices == ("false", "true") and ex.target == ex.choices[ex.label] == test[0]["label"]
    assert ex.text == (t, f"Parent: {p}, Child: {c}")

    # the default holds out select_size (20) training trees for a curriculum's gate (train_holdout)
    held = {r["indent_tree"] for r in task.load("select")}  # (a one-node tree has no question)
    assert task.holdout and 10 < len(held) <= 20 and not held & trees_train and not held & trees_test
    sampled = make(TreeTask, TreeConfig, subset="large", num_train_trees=10, num_eval_trees=5, max_pairs_per_tree=7,
                   select_split="")
    rows = sampled.load("train")
    assert len(rows) == 70 and max(sum(r["indent_tree"] == t for r in rows)
                                   for t in {r["indent_tree"] for r in rows}) == 7
    assert len(make(TreeTask, TreeConfig, max_eval_samples=5).load("eval")) == 5


def test_tree_fixture_and_local(tmp_path):
    task = make(TreeTask, TreeConfig, subset="xsmall", source="fixture", fixture_size=50)
    rows = task.load("train")
    assert len(rows) == 50 and all(set(r) == TREE_FIELDS for r in rows)
    write_jsonl(tmp_path / "xsmall" / "test.jsonl", rows[:3])
    assert make(TreeTask, TreeConfig, subset="xsmall", data_dir=str(tmp_path)).load("eval") == rows[:3]
    assert schema_error(TreeConfig, max_pairs_per_tree=0) == ("task.max_pairs_per_tree=0 is out of range "
                                                              "(valid: >= 1, or -1)")


def test_tree_metrics_by_hand():
    task = make(TreeTask, TreeConfig)
    gold = [1, 0, 0, 0, 1, 0]
    pred = [1, 0, -1, 1, 0, 0]  # the invalid answer (gold false) is scored as a wrong "true"
    m = task.score_labels(gold, pred)
    assert m["accuracy"] == pytest.approx(50.0)
    assert m["balanced_accuracy"] == pytest.approx(100 * (1 / 2 + 2 / 4) / 2)
    assert m["f1"] == pytest.approx(100 * 2 * 1 / (2 * 1 + 2 + 1))  # tp=1 fp=2 fn=1
    assert m["majority_baseline"] == pytest.approx(100 * 4 / 6)
    always_false = task.score_labels(gold, [0] * 6)
    assert always_false["accuracy"] == pytest.approx(always_false["majority_baseline"]) and always_false["f1"] == 0.0
    assert always_false["balanced_accuracy"] == pytest.approx(50.0)
    assert not math.isnan(task.score_labels([0, 0], [0, 0])["balanced_accuracy"])


@pytest.mark.parametrize("stage", ["small", "large", "x3large"])
def test_tree_balanced_sampling_asks_as_many_true_as_false(stage):
    """pair_sampling=balanced: per tree as many 'true' as 'false' questions up to the count (an odd
    count's last one either way), every edge and as many 'false' pairs at -1; the uniform draw of the
    authors' code stays the default, and with -1 it is still every ordered pair."""
    from embexp.tasks.tree import tree_rows

    rng, gen = random.Random(0), random.Random(1)
    rows = []
    for _ in range(200 if stage != "x3large" else 40):
        tree = generate_tree(gen, *STAGES[stage])
        edges = {(p, n) for n, _, p in walk(tree) if p is not None}
        got = tree_rows(tree, rng, 5, balanced=True)
        true = [r for r in got if r["label"] == "true"]
        assert len(got) <= 5 and len({(r["parent"], r["child"]) for r in got}) == len(got)
        assert {(r["parent"], r["child"]) for r in true} <= edges and len(true) == min(len(true), len(edges))
        assert abs(2 * len(true) - len(got)) <= 1 or len(true) == len(edges)
        every = tree_rows(tree, rng, -1, balanced=True)
        assert {(r["parent"], r["child"]) for r in every if r["label"] == "true"} == edges
        assert len(every) == 2 * len(edges)
        rows += got
    share = sum(r["label"] == "true" for r in rows) / len(rows)
    assert 0.4 < share < 0.6 and (stage == "small" or len(rows) == 5 * (200 if stage != "x3large" else 40))
    task = make(TreeTask, TreeConfig, subset=stage, num_train_trees=20, num_eval_trees=10, max_pairs_per_tree=5,
                pair_sampling="balanced", select_split="")
    test = task.load("eval")
    assert task.cfg.pair_sampling == "balanced" and 0.3 < sum(r["label"] == "true" for r in test) / len(test) < 0.7
    uniform = make(TreeTask, TreeConfig, subset=stage, num_train_trees=20, num_eval_trees=10, max_pairs_per_tree=5,
                   select_split="").load("eval")
    assert make(TreeTask, TreeConfig).cfg.pair_sampling == "random"
    if stage == "x3large":
        assert sum(r["label"] == "false" for r in uniform) / len(uniform) > 0.9  # the released code's set
    assert schema_error(TreeConfig, pair_sampling="even") == ("unknown task.pair_sampling 'even' (choose from: random, "
                                                               "balanced)")
