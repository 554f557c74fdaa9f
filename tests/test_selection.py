"""Model selection never reads the reported split (task.select_split), and the training loss
covers the target or every token (task.loss_on). Offline, tiny models, fixtures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from accelerate import Accelerator
from omegaconf import OmegaConf

from conftest import run_cli, run_train, smoke
from embexp import EmbexpError
from embexp.featurize import IGNORE, PROMPT_LENGTHS, Featurizer, collate
from embexp.methods import build_method
from embexp.models import load_backbone
from embexp.run.loop import Trainer, TrainInputs
from embexp.run.preflight import check_selection
from embexp.tasks import build_task
from embexp.tasks.alpaca import AlpacaConfig, AlpacaTask
from embexp.tasks.superglue import SuperGlueConfig, SuperGlueTask

REPO = Path(__file__).resolve().parents[1]
TINYTE_EXPERIMENTS = sorted(p.stem for p in (REPO / "conf" / "experiment").glob("tinyte_*.yaml"))


def make(cls, config_cls, **kw):
    return cls(OmegaConf.merge(OmegaConf.structured(config_cls), kw))


# ---- the refusal --------------------------------------------------------------------------------
def test_select_best_on_the_reported_split_is_refused_in_one_line_before_anything_loads(tmp_path):
    run = tmp_path / "run"
    r = run_cli("debug=smoke", "task=wmt16", "trainer.select_best=true", "task.select_split=test",
                       f"hydra.run.dir={run}")
    assert r.returncode != 0
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("embexp: error:")]
    assert (len(errors) == 1
            and "select on the reported split: task.select_split='test' is task.eval_split" in errors[0]), r.stderr
    assert "Traceback" not in r.stderr
    # before the run record and the model
    assert not (run / "status.json").exists() and not (run / "train.log").exists()


@pytest.mark.parametrize("overrides,needle", [
    # eval_split=auto resolved
    (("task=glue", "task.select_split=validation"), "task.select_split='validation' is task.eval_split"),
    (("task=glue", "task.subset=mnli", "task.select_split=validation_matched"), "is task.eval_split"),
    (("task=cnndm", "task.select_split=test"), "is task.eval_split"),
    (("task=superglue", "task.select_split=validation"), "is task.eval_split"),
    (("task=alpaca", "task.select_split=heldout"), "is task.eval_split"),
    (("task=glue",), "task.select_split is ''"),
])
def test_check_selection_refuses(overrides, needle):
    with pytest.raises(EmbexpError, match="trainer.select_best=true") as e:
        check_selection(smoke(*overrides, "trainer.select_best=true"))
    assert needle in str(e.value)


def test_check_selection_passes_where_nothing_is_selected():
    check_selection(smoke("task=glue", "trainer.select_best=false"))
    check_selection(smoke("task=wmt16", "task.select_split=test", "trainer.select_best=true", "method=zero_shot"))
    check_selection(smoke("task=wmt16", "task.select_split=test", "trainer.select_best=true", "do_train=false"))


@pytest.mark.parametrize("experiment", TINYTE_EXPERIMENTS)
def test_every_tinyte_experiment_selects_on_rows_it_does_not_report(experiment):
    for subset in (["boolq", "all"] if "superglue" in experiment else [None]):
        cfg = smoke(f"experiment={experiment}", *([f"task.subset={subset}"] if subset else []))
        check_selection(cfg)
        task = build_task(cfg.task)
        assert cfg.trainer.select_best  # the recipe: "we select models by evaluation loss"
        assert task.split_name("select") not in ("", task.split_name("eval"))
        assert cfg.task.loss_on == "all"  # "standard causal language modeling"


# ---- the selection rows -------------------------------------------------------------------------
def test_holdout_rows_are_disjoint_from_training_rows_and_deterministic(tmp_path):
    rows = [{"question": f"q{i}", "passage": "p", "idx": i, "label": i % 2} for i in range(40)]
    (tmp_path / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))

    def task(**kw):
        return make(SuperGlueTask, SuperGlueConfig, subset="boolq", data_dir=str(tmp_path),
                    select_split="train_holdout", **kw)

    ids = lambda rs: [r["idx"] for r in rs]  # noqa: E731
    t = task(select_size=7)
    train, sel = ids(t.load("train")), ids(t.load("select"))
    assert len(sel) == 7 and len(train) == 33 and not set(train) & set(sel)
    assert sorted(train + sel) == list(range(40)) and train == sorted(train) and sel == sorted(sel)
    assert ids(task(select_size=7).load("select")) == sel                    # the same carve every time
    assert ids(task(select_size=7, select_seed=1).load("select")) != sel     # select_seed changes it
    assert ids(task(select_size=7, max_train_samples=5).load("select")) == sel  # the cap does not move it
    assert ids(task(select_size=7, max_train_samples=5).load("train")) == train[:5]
    with pytest.raises(EmbexpError, match="task.select_size=40 must be between 1 and 39"):
        task(select_size=40).load("train")
    with pytest.raises(EmbexpError, match="task.select_size=0"):
        task(select_size=0)
    with pytest.raises(EmbexpError, match="has no selection split"):
        make(SuperGlueTask, SuperGlueConfig, select_split="").load("select")


def test_train_sample_seed_draws_a_seeded_sample_of_the_rows_left_after_the_holdout(tmp_path):
    """Issue #37: a split sorted by source (CoLA's train) is sampled with a seed, not cut at its first N rows."""
    rows = [{"question": f"q{i}", "passage": "p", "idx": i, "label": i % 2} for i in range(60)]
    (tmp_path / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))

    def ids(**kw):
        return [r["idx"] for r in make(SuperGlueTask, SuperGlueConfig, subset="boolq", data_dir=str(tmp_path),
                                       **kw).load("train")]

    sel = [r["idx"] for r in make(SuperGlueTask, SuperGlueConfig, subset="boolq", data_dir=str(tmp_path),
                                   select_split="train_holdout", select_size=10).load("select")]
    hold = dict(select_split="train_holdout", select_size=10, max_train_samples=20)
    a, b = ids(**hold, train_sample_seed=0), ids(**hold, train_sample_seed=1)
    assert len(a) == 20 and a == sorted(a) and not set(a) & set(sel) and a != b  # disjoint from the held-out rows
    assert a == ids(**hold, train_sample_seed=0) and a[-1] > 30                    # the same sample; not the first 20
    assert ids(**hold) == [i for i in range(60) if i not in sel][:20]              # -1: the first rows, as before
    plain = ids(select_split="", max_train_samples=20, train_sample_seed=0)  # without a holdout too
    assert len(plain) == 20 and plain == sorted(plain) and plain != list(range(20))


def test_fixture_holdout_keeps_fixture_size_training_rows_for_every_subtask():
    t = make(SuperGlueTask, SuperGlueConfig, subset="all", source="fixture", fixture_size=10, select_size=4)
    sel = t.examples("select")
    assert len(t.examples("train")) == 50 and len(sel) == 20
    assert [e.meta["subset"] for e in sel] == [s for s in ("boolq", "cb", "copa", "rte", "wic") for _ in range(4)]
    ev = t.examples("eval")
    t.examples("select")  # loading selection rows must not replace the sub-tasks used to score eval
    assert t._eval_subsets == [e.meta["subset"] for e in ev]


@pytest.mark.parametrize("task", ["glue", "superglue", "alpaca", "bsd", "amazon", "commitpack"])
def test_a_fixture_holdout_past_the_fixture_s_rows_is_one_line_before_anything_runs(task, tmp_path):
    """A fixture makes as many rows as a carve asks for: task.select_size=100000 on a 24-row fixture made
    100,000 selection rows, scored at every evaluation (minutes). Refused before the run directory is made."""
    args = (f"task={task}", "task.select_split=train_holdout", "task.select_size=100000")
    cfg = smoke(*args)
    with pytest.raises(EmbexpError, match=r"task.select_size=100000 is more than the 24 rows of task \S+'s "
                                          r"fixture split '\w+' \(valid with task.source=fixture: 1 to 24"):
        build_task(cfg.task).load("train")
    r = run_cli("method=tinyte_full", "model=tiny_llama", "debug=smoke", *args,
                       f"hydra.run.dir={tmp_path / 'run'}")
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == 1 and len(lines) == 1 and "task.select_size=100000 is more than" in lines[0], r.stderr
    assert not any((tmp_path / "run").rglob("*.json"))  # no status, no metrics: nothing that looks like a run
    t = build_task(smoke(f"task={task}", "task.select_split=train_holdout", "task.select_size=24").task)
    assert len(t.load("select")) >= 24  # the fixture's size itself is allowed (bsd: 24 requests, several rows each)


def test_alpaca_train_select_and_eval_are_three_disjoint_sets(tmp_path):
    rows = [{"instruction": f"task {i}", "input": "", "output": str(i), "text": ""} for i in range(60)]
    (tmp_path / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    t = make(AlpacaTask, AlpacaConfig, data_dir=str(tmp_path), heldout_size=10, select_size=8)
    ids = lambda rs: {r["output"] for r in rs}  # noqa: E731
    train, sel, ev = ids(t.load("train")), ids(t.load("select")), ids(t.load("eval"))
    assert (len(train), len(sel), len(ev)) == (42, 8, 10)
    assert not (train & sel) and not (train & ev) and not (sel & ev) and len(train | sel | ev) == 60
    unselected = make(AlpacaTask, AlpacaConfig, data_dir=str(tmp_path), heldout_size=10, select_split="")
    assert ids(unselected.load("eval")) == ev  # the evaluation carve does not depend on the selection carve


def test_named_selection_split_is_read_and_capped():
    t = build_task(smoke("task=wmt16", "task.select_size=3").task)
    assert t.split_name("select") == "validation" and len(t.load("select")) == 3
    t = build_task(smoke("task=glue", "task.subset=mnli", "task.select_split=validation_mismatched").task)
    assert (t.split_name("eval"), t.split_name("select")) == ("validation_matched", "validation_mismatched")


def test_tree_generated_rows_can_hold_out_a_selection_slice():
    t = build_task(smoke("task=tree", "task.source=auto", "task.num_train_trees=20", "task.num_eval_trees=2",
                         "task.subset=xmedium", "task.select_split=train_holdout", "task.select_size=4",
                         "task.max_train_samples=-1").task)
    whole = build_task(smoke("task=tree", "task.source=auto", "task.num_train_trees=20", "task.num_eval_trees=2",
                             "task.subset=xmedium", "task.select_split=",
                             "task.max_train_samples=-1").task).generate("train")
    train, select = t.load("train"), t.load("select")
    # whole trees are held out (the gate reads unseen trees, as the authors' test split), with the very
    # questions they have without the carve; nothing is lost or shared
    key = lambda r: (r["indent_tree"], r["parent"], r["child"])  # noqa: E731
    assert sorted(map(key, train + select)) == sorted(map(key, whole))
    assert (len({r["indent_tree"] for r in select}) == 4
            and not {r["indent_tree"] for r in select} & {r["indent_tree"] for r in train})
    assert [r for r in whole if r["indent_tree"] not in {s["indent_tree"] for s in select}] == train
    with pytest.raises(EmbexpError, match="hold out whole training trees, between 1 and 5"):
        build_task(smoke("task=tree", "task.source=auto", "task.num_train_trees=6",
                         "task.select_size=6").task).load("select")
    with pytest.raises(EmbexpError, match="generated tree rows have only train and eval trees"):
        build_task(smoke("task=tree", "task.source=auto", "task.select_split=validation").task).load("select")


# ---- the trainer: periodic loss and select_best on the selection rows -----------------------------
def decoder(method="tinyte_full", *overrides):
    cfg = smoke(f"method={method}", "model=tiny_llama", "task=wmt16", *overrides)
    torch.manual_seed(0)
    bb = load_backbone(cfg.model, num_labels=0)
    enc = Featurizer(bb.tokenizer, True, 64, 16, False, cfg.task.loss_on)
    task = build_task(cfg.task)
    feats = {w: [enc.train_features(e) for e in task.examples(w)] for w in ("train", "eval", "select")}
    return cfg, build_method(cfg.method, bb), bb, feats


def test_select_best_restores_the_lowest_selection_loss_and_never_reads_the_eval_split(monkeypatch):
    cfg, method, bb, feats = decoder("tinyte_full", "trainer.lr=0.05", "trainer.max_steps=6", "trainer.eval_every=1",
                                     "trainer.select_best=true", "trainer.scheduler=constant")
    import embexp.run.loop as loop

    calls, real = [], loop.evaluation_loss
    dip = [5.0, 4.0, 3.0, 3.5, 4.5, 6.0]  # selection losses with their minimum at step 3 (whatever lr does)

    def spy(model, features, *a, **kw):
        bias = method.bias.detach().clone()
        value = real(model, features, *a, **kw)
        calls.append((features, bias, dip[len(calls)] if features is feats["select"] else value))
        return calls[-1][2]

    monkeypatch.setattr(loop, "evaluation_loss", spy)
    inputs = TrainInputs(feats["train"], bb.tokenizer.pad_token_id, 0, feats["eval"], feats["select"])
    trainer = Trainer(method, cfg.trainer, Accelerator(cpu=True), inputs)
    res = trainer.fit()
    # 5 periodic losses (steps 1-5) + the last step's on the selection rows, then the eval split once
    assert [f is feats["select"] for f, _, _ in calls] == [True] * 6 + [False] and calls[-1][0] is feats["eval"]
    select_losses = [v for _, _, v in calls[:6]]
    assert [h["select_loss"] for h in res.history if "select_loss" in h] == select_losses[:5]
    assert all("eval_loss" not in h for h in res.history)
    assert select_losses == dip and res.best_select_loss == 3.0 == res.select_loss and res.best_step == 3
    best_bias = calls[res.best_step - 1][1]
    assert torch.equal(method.bias.detach(), best_bias)  # the state of the best step is back
    assert torch.equal(calls[-1][1], best_bias)          # and the recorded eval loss is the kept state's
    assert res.eval_loss == calls[-1][2]


def test_select_metric_keeps_the_best_metric_where_the_lowest_loss_is_elsewhere(monkeypatch):
    """trainer.select_metric: the kept state is the step with the highest metric, whatever the loss
    says (the scripted losses fall to the last step, where loss-based selection would stay); a tie
    keeps the earlier step, as the Tiny-Attention authors' ``dev_metric > max_dev_metric``."""
    cfg, method, bb, feats = decoder("tinyte_full", "trainer.lr=0.05", "trainer.max_steps=6", "trainer.eval_every=1",
                                     "trainer.select_best=true", "trainer.scheduler=constant")
    import embexp.run.loop as loop

    losses = iter([6.0, 5.0, 4.0, 3.0, 2.0, 1.0, 9.9])  # 6 selection points (lowest: step 6), then the eval split
    monkeypatch.setattr(loop, "evaluation_loss", lambda *a, **kw: next(losses))
    scores, states = [40.0, 55.0, 70.0, 70.0, 20.0, 10.0], []  # best at step 3, tied by step 4

    def score():
        states.append(method.bias.detach().clone())
        return scores[len(states) - 1]

    inputs = TrainInputs(feats["train"], bb.tokenizer.pad_token_id, 0, feats["eval"], feats["select"],
                         select_score=("mcc", score))
    trainer = Trainer(method, cfg.trainer, Accelerator(cpu=True), inputs)
    res = trainer.fit()
    assert len(states) == 6 and res.select_metric == "mcc"
    assert res.best_step == 3 and (res.best_select_score, res.best_select_loss) == (70.0, 4.0)
    assert (res.select_score, res.select_loss) == (70.0, 4.0)  # the kept state's, not the last step's
    assert torch.equal(method.bias.detach(), states[2]) and not torch.equal(states[2], states[5])
    periodic = [h for h in res.history if "select_loss" in h]
    got = [(h["step"], h["select_loss"], h["select_score"]) for h in periodic]
    assert got == list(zip(range(1, 6), range(6, 1, -1), scores))


def test_a_checkpoint_kept_by_the_loss_is_not_resumed_by_a_metric(tmp_path):
    """Its best state was chosen by another signal: resuming would mix the two, so it is refused."""
    cfg, method, bb, feats = decoder("tinyte_full", "trainer.select_best=true", "trainer.max_steps=2")
    pad = bb.tokenizer.pad_token_id
    args = (method, cfg.trainer, Accelerator(cpu=True))
    inputs = dict(train=feats["train"], pad_id=pad, seed=0, eval=feats["eval"],
                  select=feats["select"], run_dir=tmp_path)
    Trainer(*args, TrainInputs(**inputs)).save(1)
    again = Trainer(*args, TrainInputs(**inputs, select_score=("mcc", lambda: 0.0)))
    with pytest.raises(EmbexpError, match="kept its best state by loss, but this run selects by mcc"):
        again.resume()
    assert Trainer(*args, TrainInputs(**inputs)).resume() == 1  # the same signal resumes


def test_select_best_without_selection_rows_is_refused(monkeypatch):
    """A selection split that gives no rows stops the run when the rows are read, before the model."""
    from embexp.run import build, preflight
    from embexp.run.selection import Selection

    cfg = smoke("method=tinyte_full", "model=tiny_llama", "task=wmt16", "trainer.select_best=true")
    monkeypatch.setattr(Selection, "rows", lambda *a, **kw: [])
    with pytest.raises(EmbexpError, match="trainer.select_best=true needs selection rows; task.select_split="):
        build.read_rows(cfg, preflight.preflight(cfg), training=True)


def test_smoke_run_records_its_selection_rows(tmp_run):
    m = run_train(smoke("method=tinyte_full", "model=tiny_llama", "task=superglue", "trainer.select_best=true",
                        "trainer.eval_every=2"), tmp_run)
    assert m["select_split"] == "train_holdout" and m["n_select_examples"] == 6 and m["n_train_examples"] == 24
    assert m["loss_on"] == "target"
    t = m["train"]
    assert t["best_step"] in (2, 4) and t["select_loss"] == t["best_select_loss"] and t["eval_loss"] > 0
    assert [h["step"] for h in t["history"] if "select_loss" in h] == [2]


# ---- task.loss_on -----------------------------------------------------------------------------------
def features(loss_on: str):
    cfg = smoke("model=tiny_llama", "task=wmt16", f"task.loss_on={loss_on}")
    bb = load_backbone(cfg.model, num_labels=0)
    enc = Featurizer(bb.tokenizer, True, 64, 16, False, loss_on)
    exs = build_task(cfg.task).examples("train")[:3]
    return [enc.train_features(e) for e in exs], [len(enc.prompt_ids(e.prompt)) for e in exs]


def test_loss_on_sets_the_labels_of_the_prompt():
    target, plen = features("target")
    every, plen_all = features("all")
    assert plen == plen_all == [f["prompt_length"] for f in target] == [f["prompt_length"] for f in every]
    for t, a, n in zip(target, every, plen):
        assert t["input_ids"] == a["input_ids"]
        assert t["labels"][:n] == [IGNORE] * n and t["labels"][n:] == t["input_ids"][n:]
        assert a["labels"] == a["input_ids"] and IGNORE not in a["labels"]
    with pytest.raises(EmbexpError, match="unknown task.loss_on 'prompt' \\(choose from: target, all\\)"):
        smoke("task=wmt16", "task.loss_on=prompt")  # refused when composed


def test_loss_on_all_trains_on_the_prompt_tokens():
    cfg = smoke("method=tinyte_full", "model=tiny_llama", "task=wmt16")
    torch.manual_seed(0)
    bb = load_backbone(cfg.model, num_labels=0)
    method = build_method(cfg.method, bb)
    with torch.no_grad():
        method.bias.normal_(0, 0.5)
    pad = bb.tokenizer.pad_token_id

    def loss_and_grad(feats):
        method.zero_grad()
        batch = collate(feats, pad)
        loss = method(**batch).loss
        loss.backward()
        return loss.item(), method.bias.grad.clone()

    target, plen = features("target")
    every, _ = features("all")
    lt, gt = loss_and_grad(target)
    la, ga = loss_and_grad(every)
    assert la != pytest.approx(lt) and not torch.allclose(ga, gt)
    only_prompt = [{**f, "labels": f["labels"][:n] + [IGNORE] * (len(f["labels"]) - n)} for f, n in zip(every, plen)]
    _, gp = loss_and_grad(only_prompt)  # the prompt positions alone give a gradient with loss_on=all
    assert torch.isfinite(gp).all() and gp.abs().sum() > 0
    # with target they carry none
    assert all((torch.tensor(f["labels"][:n]) == IGNORE).all() for f, n in zip(target, plen))


@pytest.mark.parametrize("method_name", ["tinyte_gated", "tinyte_full"])
def test_prompt_lengths_reach_the_method_never_the_backbone(method_name):
    """With loss_on=all no prompt label is -100: TinyTE-gated reads the prompt length from the
    batch's prompt_lengths instead, and gets the same lengths (hence logits) as with loss_on=target."""
    cfg, method, bb, _ = decoder(method_name)
    pad = bb.tokenizer.pad_token_id
    seen = []
    bb.model.register_forward_pre_hook(lambda mod, args, kw: seen.append(set(kw)), with_kwargs=True)
    target, plen = features("target")
    every, _ = features("all")
    with torch.no_grad():
        if method_name == "tinyte_gated":
            method.bias.normal_()
            method.alpha.fill_(-3.0)  # p depends on the length: a wrong length changes the logits
        ref = method(**collate(target, pad)).logits
        batch = collate(every, pad)
        assert PROMPT_LENGTHS in batch
        out = method(**batch).logits
    assert torch.equal(out, ref)
    assert all(PROMPT_LENGTHS not in keys for keys in seen) and len(seen) == 2
    if method_name == "tinyte_gated":
        assert method._last_lengths.tolist() == plen
        with torch.no_grad():  # the pitfall the batch key avoids: labels alone under loss_on=all say "no prompt"
            no_key = {k: v for k, v in collate(every, pad).items() if k != PROMPT_LENGTHS}
            assert method.lengths(no_key).tolist() == [0, 0, 0]


def test_gated_trains_with_loss_on_all_end_to_end(tmp_run):
    m = run_train(smoke("method=tinyte_gated", "model=tiny_llama", "task=wmt16", "task.loss_on=all",
                        "trainer.select_best=true"), tmp_run)
    assert m["loss_on"] == "all" and m["train"]["steps"] == 4 and m["train"]["best_step"] >= 1
    assert all(torch.isfinite(torch.tensor(h["loss"])) for h in m["train"]["history"] if "loss" in h)


# ---- learning curves (trainer.curve_at): read, never selected on ----------------------------------
def test_curve_points_are_the_final_evaluation_at_earlier_steps(tmp_path):
    """A run with curve_at=[2] records the eval split's metrics at step 2 and at the end; its last
    point is the final metrics, and a 2-step run's final metrics equal the first run's step-2 point
    (constant schedule: the same state)."""
    common = ("method=lora", "model=tiny_llama", "task=glue", "task.subset=sst2", "trainer.scheduler=constant",
              "trainer.warmup_steps=0")
    long = run_train(smoke(*common, "trainer.max_steps=4", "trainer.curve_at=[2]"), tmp_path / "long")
    short = run_train(smoke(*common, "trainer.max_steps=2"), tmp_path / "short")
    curve = long["curve"]
    assert [p["step"] for p in curve] == [2, 4]
    assert curve[-1]["ll_accuracy"] == long["metrics"]["ll_accuracy"]
    assert curve[0]["ll_accuracy"] == short["metrics"]["ll_accuracy"]
    assert abs(sum(curve[0]["ll_answer_share"]) - 100.0) < 1e-9 and 0 <= curve[0]["ll_balanced_accuracy"] <= 100
    assert "curve" not in short  # only where asked for
    from embexp.report import main as report

    report(["table=curve", f"runs={tmp_path}", f"out={tmp_path / 'tables'}"])
    md = (tmp_path / "tables" / "curve_glue_sst2_tiny_llama.md").read_text()
    assert md.count("| LoRA (r=8) |") == 2 and "Majority class of the eval split" in md  # the short run has no curve
    assert (tmp_path / "tables" / "curve_glue_sst2_tiny_llama.png").stat().st_size > 0


def test_curve_patience_stops_once_the_held_out_curve_is_flat(tmp_path):
    """lr ~0: the held-out score never improves on the first point, so patience 2 stops at the third point
    (step 6 of 10); the final evaluation is that step's point, and a resumed decision reads the history."""
    m = run_train(smoke("method=lora", "model=tiny_llama", "task=glue", "task.subset=sst2", "trainer.lr=1e-12",
                        "trainer.max_steps=10", "trainer.curve_at=[2,4,6,8]", "trainer.curve_select=true",
                        "task.select_split=train_holdout", "task.select_size=8", "trainer.curve_patience=2"),
                  tmp_path / "run")
    assert m["train"]["steps"] == 6 and m["train"]["stopped_early"] is True
    assert [p["step"] for p in m["curve"]] == [2, 4, 6] and all("select" in p for p in m["curve"])
    with pytest.raises(EmbexpError, match="trainer.curve_patience=2 stops on the held-out rows' curve"):
        run_train(smoke("task=glue", "trainer.curve_patience=2"), "/nonexistent/never-made")


@pytest.mark.parametrize("value", ["[0]", "[a]", "[1.5]"])
def test_bad_curve_step_is_one_line(value, tmp_path):
    r = run_cli("method=lora", "model=tiny_llama", "task=glue", "task.subset=sst2", "debug=smoke",
                       f"trainer.curve_at={value}", f"output_root={tmp_path}")
    assert r.returncode != 0 and "Traceback" not in r.stderr
    assert "trainer.curve_at must list optimizer steps" in r.stderr.strip().splitlines()[-1]


# ---- a paper's protocol, asked for by name: trainer.select_on=reported (issue #21, item 5) ----------
def test_select_on_reported_is_refused_where_it_is_contradictory_or_selects_nothing():
    # select_split '' is fine
    check_selection(smoke("task=glue", "trainer.select_on=reported", "trainer.select_best=true"))
    check_selection(smoke("task=wmt16", "trainer.select_on=reported", "task.select_split=test",
                          "trainer.select_best=true"))
    with pytest.raises(EmbexpError, match="task.select_split='validation' names other selection rows"):
        check_selection(smoke("task=wmt16", "trainer.select_on=reported", "trainer.select_best=true"))
    with pytest.raises(EmbexpError, match="trainer.select_on=reported but nothing is selected"):
        check_selection(smoke("task=glue", "trainer.select_on=reported"))
    with pytest.raises(EmbexpError, match="unknown trainer.select_on 'dev'"):
        run_train(smoke("task=glue", "trainer.select_on=dev"), "/nonexistent/never-made")


def test_select_on_reported_selects_on_the_reported_rows_and_says_so_in_metrics_json(tmp_path):
    held = run_train(smoke("model=tiny_bert", "method=lora", "task=glue", "task.subset=rte", "trainer.select_best=true",
                           "task.select_split=train_holdout", "task.select_size=8",
                           "trainer.eval_every=2"), tmp_path / "held")
    rep = run_train(smoke("model=tiny_bert", "method=lora", "task=glue", "task.subset=rte", "trainer.select_best=true",
                          "trainer.select_on=reported", "trainer.eval_every=2"), tmp_path / "rep")
    assert (held["select_on"], held["select_split"]) == ("heldout", "train_holdout")
    assert (rep["select_on"], rep["select_split"]) == ("reported", "validation")
    assert rep["n_select_examples"] == rep["n_eval_examples"]  # the reported rows themselves
    assert held["n_select_examples"] == 8 and rep["n_select_examples"] != 8
    assert rep["train"]["best_step"] > 0 and rep["train"]["select_loss"] == rep["train"]["best_select_loss"]
    assert held["select_metric"] == rep["select_metric"] == "loss"  # select_metric's default


@pytest.mark.parametrize("protocol", ["reported", "heldout"])
def test_select_metric_scores_the_selection_rows_and_keeps_the_best_metric_end_to_end(protocol, tmp_path, monkeypatch):
    """A run with trainer.select_metric=task scores the task's metric (CoLA: MCC) at every selection
    point on its selection rows (select_on=reported: the reported split, the Tiny-Attention paper's
    protocol; heldout: the held-out rows, never the reported ones), keeps the step with the best metric
    where the lowest loss is the last step, and says so in metrics.json."""
    import embexp.run.build as pipeline
    import embexp.run.loop as loop

    rows = (["trainer.select_on=reported"] if protocol == "reported" else
            ["task.select_split=train_holdout", "task.select_size=8"])
    cfg = smoke("model=tiny_bert", "method=lora", "task=glue", "task.subset=cola", "trainer.select_best=true",
                "trainer.eval_every=1", "trainer.select_metric=task", *rows)
    losses, mcc, scored = [0.9, 0.8, 0.7, 0.6], [10.0, 30.0, 20.0, 5.0], []  # 4 selection points: steps 1-4
    real_loss, real_eval = loop.evaluation_loss, pipeline.score_rows
    monkeypatch.setattr(loop, "evaluation_loss", lambda *a, **kw: losses.pop(0) if losses else real_loss(*a, **kw))

    def evaluate(method, task, examples, *a, **kw):
        metrics, records = real_eval(method, task, examples, *a, **kw)
        if len(scored) < len(mcc):  # the selection points; then the final evaluation, untouched
            scored.append([e.prompt for e in examples])
            metrics = {**metrics, "mcc": mcc[len(scored) - 1]}
        return metrics, records

    monkeypatch.setattr(pipeline, "score_rows", evaluate)
    m = run_train(cfg, tmp_path / "run")
    task = build_task(cfg.task)
    reported = [e.prompt for e in task.examples("eval")]
    want = reported if protocol == "reported" else [e.prompt for e in task.examples("select")]
    assert len(scored) == 4 and all(s == want for s in scored) and (protocol == "reported" or want != reported)
    assert (m["select_on"], m["select_metric"]) == (protocol, "mcc")
    t = m["train"]
    assert (t["best_step"], t["best_select_score"], t["best_select_loss"]) == (2, 30.0, 0.8)  # the lowest loss: step 4
    assert (t["select_score"], t["select_loss"], t["select_metric"]) == (30.0, 0.8, "mcc")
    periodic = [(h["step"], h["select_score"]) for h in t["history"] if "select_score" in h]
    assert periodic == [(1, 10.0), (2, 30.0), (3, 20.0)]


def test_select_metric_is_refused_where_it_would_choose_nothing_or_choose_wrongly(tmp_path):
    check_selection(smoke("task=glue", "trainer.select_on=reported", "trainer.select_best=true",
                          "trainer.select_metric=task"))
    with pytest.raises(EmbexpError, match="select_metric=task chooses the kept state: it needs trainer.select_best"):
        check_selection(smoke("task=glue", "trainer.select_metric=task"))
    with pytest.raises(EmbexpError, match="task wmt16_cs-en names no validation metric"):
        check_selection(smoke("task=wmt16", "trainer.select_best=true", "trainer.select_metric=task"))
    with pytest.raises(EmbexpError, match="a metric is maximised, and lower ter is better"):
        check_selection(smoke("task=wmt16", "trainer.select_best=true", "trainer.select_metric=ter"))
    r = run_cli("debug=smoke", "model=tiny_bert", "method=lora", "task=glue", "task.subset=rte",
                       "trainer.select_best=true", "trainer.select_on=reported", "trainer.select_metric=bleu",
                       f"hydra.run.dir={tmp_path / 'run'}")
    assert r.returncode != 0 and "Traceback" not in r.stderr
    assert "the evaluation of glue_rte gives no 'bleu' (it gives: accuracy)" in r.stderr.strip().splitlines()[-1]


def test_tinyattn_table8_dry_run_prints_heldout_and_paper_protocol_cells():
    from embexp.sweep import command_lines

    out = [c for c in command_lines("tinyattn/table8") if c[1] == "embexp.train"]
    held, paper = out[:12], out[12:]
    assert len(paper) == 12 and not any("trainer.select_on=reported" in c for c in held)
    assert all("trainer.select_on=reported" in c and "task.select_split=" in c for c in paper)
    # the paper's protocol keeps the best dev metric (the authors' train_ada.py), ours the lowest held-out loss
    assert all("trainer.select_metric=task" in c for c in paper)
    assert not any("select_metric" in a for c in held for a in c)
    rte = next(c for c in paper if "experiment=tinyattn_1h_rte" in c)
    assert "trainer.eval_every=78" in rte and "tag=1h_paper" in rte  # ceil(2490 / 16) = 156 steps per epoch: every half
    four = next(c for c in paper if "experiment=tinyattn_4h_rte" in c)
    # warm start, same protocol
    assert any(a.startswith("method.init_from=") and "tinyattn_1h_paper/" in a for a in four)
    assert not any("select_on" in a for c in command_lines("tinyattn/table1") for a in c)  # FewGLUE selects nothing


def test_tinyattn_table_marks_cells_selected_on_the_reported_split(tmp_path):
    from conftest import record_run
    from embexp.report import configure
    from embexp.report import tinyattn as sw

    def rec(task, tag, value, select_on, seed=0, select_metric=None):
        kept_by = select_metric or (sw.METRIC[task] if tag.endswith("_paper") else "loss")
        record_run(tmp_path, "glue", task, "roberta", "tinyattn", tag, seed,
                   {"metrics": {sw.METRIC[task]: value}, "select_on": select_on, "select_metric": kept_by})

    def render(table, seeds, select_on="both"):
        module, cfg = configure(["paper=tinyattn", f"table={table}", f"runs={tmp_path}", f"out={tmp_path / 'tables'}",
                                 f"seeds={seeds}".replace(" ", ""), f"select_on={select_on}"])
        return module.render(cfg)[table]

    rec("rte", "1h", 80.0, "heldout")
    rec("rte", "1h_paper", 85.0, "reported")
    rec("cola", "1h", 60.0, "reported")  # whatever its tag, a record that says reported is marked
    rec("cola", "1h_paper", 61.0, "reported")
    rec("sst2", "1h_paper", 95.0, "reported")
    table = render("table8", [0])
    lines = table.splitlines()
    row = lambda label: [c.strip() for c in next(ln for ln in lines if ln.startswith(f"| {label} |")).split("|")[3:-1]]  # noqa: E731
    cols = [c.strip() for c in next(ln for ln in lines if ln.startswith("| setting")).split("|")[3:-1]]
    held, paper = dict(zip(cols, row("1h"))), dict(zip(cols, row("1h (paper protocol)")))
    assert held["rte"] == "80.0 [88.8]" and paper["rte"] == f"85.0{sw.MARK} [88.8]"
    assert held["cola"] == f"60.0{sw.MARK} [68.8]" and paper["cola"] == f"61.0{sw.MARK} [68.8]"
    four = dict(zip(cols, row("4h (paper protocol)")))
    assert four["sst2"] == f"95.0{sw.MARK} [96.6]" and four["rte"] == "- [89.2]"  # 4H = 1H where 4H did not run
    assert lines[-1] == f"{sw.MARK} paper protocol: selected on the reported split"
    only = render("table8", [0], "heldout")
    assert ("(paper protocol)" not in only and f"60.0{sw.MARK}" in only
            and only.endswith("selected on the reported split"))
    # a paper-protocol run kept by the lowest dev loss (before issue #33) is left out, and the table says so
    rec("rte", "1h_paper", 99.0, "reported", seed=1, select_metric="loss")
    both = render("table8", [0, 1]).splitlines()
    paper_rte = dict(zip(cols, [c.strip() for c in next(ln for ln in both if ln.startswith("| 1h (paper protocol) |"))
                                .split("|")[3:-1]]))["rte"]
    assert paper_rte == f"85.0{sw.MARK} [88.8]" and both[-1] == sw.STALE_NOTE.format(n=1)
