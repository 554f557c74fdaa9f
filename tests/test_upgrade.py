"""A run directory's config.yaml written by an older embexp is read with the values that run had
(``core.upgrade``): re-evaluating it rebuilds the rows it was trained and evaluated on."""

from __future__ import annotations

from omegaconf import OmegaConf

from conftest import run_train, smoke
from embexp.core.records import CONFIG, load_config
from embexp.core.upgrade import BEFORE, upgrade
from embexp.eval import rebuild_run, reevaluate
from embexp.tasks import build_task


def test_an_old_run_without_select_split_is_reevaluated_on_the_rows_it_trained_and_was_scored_on(tmp_run):
    """Before task.select_split existed (4e38109) no task held rows out of its training split; superglue's
    default is now train_holdout, a carve that would take other rows out of the training set."""
    cfg = smoke("method=tinyte_full", "model=tiny_llama", "task=superglue", "task.select_split=")
    run_train(cfg, tmp_run)
    stored = OmegaConf.load(tmp_run / CONFIG)
    del stored.task["select_split"]  # as an embexp before the field wrote it
    OmegaConf.save(stored, tmp_run / CONFIG)

    assert load_config(tmp_run).task.select_split == ""
    _, c, _ = rebuild_run(tmp_run, cpu=True)
    trained, scored = build_task(cfg.task).examples("train"), build_task(cfg.task).examples("eval")
    assert c.train_examples == trained and c.eval_examples == scored
    today = OmegaConf.merge(cfg.task, {"select_split": "train_holdout"})  # what the schema's default would carve
    assert build_task(today).examples("train") != trained
    new, recorded = reevaluate(tmp_run, cpu=True)
    scores = {k: v for k, v in new.items() if isinstance(v, (int, float)) and not k.endswith("_seconds")}
    assert scores and all(abs(v - recorded[k]) <= 1e-6 for k, v in scores.items()), (scores, recorded)


def test_a_missing_field_takes_the_value_before_it_where_that_is_not_todays_default():
    cfg = smoke("task=superglue")
    assert cfg.task.select_split == "train_holdout"  # today's default
    old = OmegaConf.create(OmegaConf.to_container(cfg))
    for (group, name), (commit, value) in BEFORE.items():
        del old[group][name]
        assert upgrade(old)[group][name] == value, (group, name, commit)
    del old.trainer["select_on"], old.model["init"]
    got = upgrade(old)
    assert (got.trainer.select_on, got.model.init) == ("heldout", "pretrained")  # the schema's default
    assert OmegaConf.to_container(upgrade(OmegaConf.create(OmegaConf.to_container(cfg)))) == \
        OmegaConf.to_container(cfg)  # a config with every field is left as it is
