"""Build a run from a composed config: rows, backbone, method and tokenised features, on its device.

Shared by ``train`` and ``eval`` so a saved run is rebuilt exactly as it was trained:
``preflight.preflight`` -> :func:`build` -> :meth:`Components.score`; the trained tensors go to and
come back from ``adapter.safetensors`` (``run.adapter``). A curriculum's stages are featurised here too
(:func:`featurize`), so their cuts are counted like the run's own rows.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import torch

from embexp import EmbexpError
from embexp.featurize import Featurizer, token_lists
from embexp.methods import METHODS, build_method
from embexp.models import load_backbone
from embexp.objectives.cloze import ClozeObjective
from embexp.objectives.sentence import SENTENCE_KINDS, ContrastiveObjective
from embexp.run.predict import score_rows
from embexp.run.preflight import Plan, check_rows, preflight
from embexp.run.selection import Selection

log = logging.getLogger("embexp")


@dataclass
class Components:
    """Everything a run needs, built from the config: the method is set up and on its device."""

    task: object
    backbone: object
    method: object
    featurizer: Featurizer
    n_backbone_params: int  # the pretrained model's parameters, counted before a method adds or swaps any
    selection: Selection  # the run's selection options (run.selection), read once by preflight
    train_examples: list = field(default_factory=list)
    eval_examples: list = field(default_factory=list)
    select_examples: list = field(default_factory=list)  # task.select_split: model selection, never reported
    train_features: list = field(default_factory=list)
    eval_features: list = field(default_factory=list)
    select_features: list = field(default_factory=list)
    data: dict = field(default_factory=dict)  # what featurising cut, per row set (metrics.json "data"; see featurize())

    def score(self, batch_size: int, device, progress: bool = False, rows: str = "eval") -> tuple[dict, list[dict]]:
        """(metrics, one prediction record per example) of the method on the evaluation rows (``rows="select"``:
        the held-out selection rows, for trainer.curve_select)."""
        examples = self.select_examples if rows == "select" else self.eval_examples
        return score_rows(self.method, self.task, examples, self.featurizer, batch_size, device, progress)


def build(cfg, device: torch.device, training: bool = True, plan: Plan | None = None) -> Components:
    """:func:`preflight` (unless ``plan`` is its result) -> examples (every row checked against the
    task's domains) -> backbone, method -> features (cuts counted) -> ``method.setup`` -> device.

    The rows are read before the model loads, so a bad row costs no model load. ``training=False``
    (re-evaluation) skips the selection rows; the training rows are still read when the method
    trains, since its setup may depend on them (PEMA's token counts)."""
    plan = plan or preflight(cfg, training)
    task = plan.task
    sentence = task.kind in SENTENCE_KINDS  # sentence embeddings: the encoder without a head (objectives/sentence.py)
    cloze = task.cloze  # PET cloze: masked-LM logits of the verbalizers (objectives/cloze.py)
    examples = read_rows(cfg, plan, training)
    backbone = load_backbone(cfg.model, num_labels=task.num_labels, sentence=sentence, mlm=cloze, device=device)
    n_backbone = count_params(backbone.model)  # before LoRA injects its layers or PEMA swaps the matrix
    method = build_method(cfg.method, backbone)  # export=true on a method that cannot export: refused in preflight
    if task.kind == "pairs" and method.trains:
        method.attach_objective(ContrastiveObjective(cfg.task.temperature, cfg.task.learn_temperature))
    featurizer = Featurizer(backbone.tokenizer, backbone.is_decoder, cfg.task.max_source_tokens,
                            cfg.task.max_target_tokens, cfg.model.chat_template and backbone.is_decoder, task.loss_on,
                            separate=sentence)
    if cloze:  # every method, trained or not (zero_shot scores the pretrained MLM head)
        method.attach_objective(ClozeObjective(featurizer.verbalizer_ids(task.verbalizers),
                                               cfg.task.cloze_loss))
    c = Components(task, backbone, method, featurizer, n_backbone, plan.selection)
    c.train_examples, c.eval_examples, c.select_examples = examples["train"], examples["eval"], examples["select"]
    c.data = limits(featurizer)
    for which in ("train", "eval", "select"):
        setattr(c, f"{which}_features", featurize(c, task, examples[which], which))
    ids = lambda feats: [s for f in feats for s in token_lists(f)]  # noqa: E731  (two sequences for a text pair)
    counted = {w: ids(featurizer.features(e)[0] for e in ex) for w, ex in examples["counted"].items()}
    method.setup({"train": ids(c.train_features), "eval": ids(c.eval_features), **counted})
    if sentence:
        c.eval_features = []  # no evaluation loss: the eval split is a similarity task, scored after training
    method.to(device)
    return c


def read_rows(cfg, plan: Plan, training: bool) -> dict[str, list]:
    """The examples of each row set, read before the model: a row outside its task's domain stops the
    run here (tasks/domains.py). Selection rows only where something is selected (``Selection.rows``)."""
    task = plan.task
    rows = {"train": task.examples("train") if plan.fits else []}
    rows["eval"] = task.examples("eval") if (cfg.do_eval or plan.fits) else []
    rows["select"] = plan.selection.rows(task, rows["train"], rows["eval"], training)
    check_rows(plan, rows, training)
    # only counted, never trained on or scored (PEMA's count_splits=[..., test]): hidden labels allowed
    counted = METHODS.get_class(cfg.method.name).counted_only(cfg.method) if plan.fits else ()
    rows["counted"] = {w: [task.format(r) for r in task.counted_rows(w)] for w in counted}
    return rows


def limits(featurizer: Featurizer) -> dict:
    """metrics.json's ``data`` before any row is cut: the token limits featurising applies."""
    out = {"max_source_tokens": featurizer.max_source_tokens}
    if featurizer.is_decoder:
        out["max_target_tokens"] = featurizer.max_target_tokens
    return out


def featurize(c: Components, task, examples: list, which: str) -> list[dict]:
    """The features of ``examples`` (row set ``which``: train, eval, select, or a curriculum stage's
    ``train_<stage>``), with what featurising cut counted in ``c.data`` as ``truncated_<which>`` (metrics.json's
    ``data``, docs/running.md; ``source``: prompts or encoder inputs). Logs one warning line when anything was cut;
    a cut the task declares an error (``Task.truncation_errors``, e.g. a classification answer) stops the run with
    one line naming the row set, the example and lengths."""
    featurizer = c.featurizer
    pairs = [featurizer.features(e) for e in examples]
    ns = [n for _, n in pairs]
    if not ns:
        return []
    rec = {"examples": len(ns), "source": sum(n.source_cut for n in ns), "longest_source": max(n.source for n in ns)}
    if featurizer.is_decoder:
        rec.update(target=sum(n.target_cut for n in ns), longest_target=max(n.target for n in ns))
    c.data[f"truncated_{which}"] = rec
    said = []
    for side, limit in (("source", "max_source_tokens"), ("target", "max_target_tokens")):
        cut = [i for i, n in enumerate(ns) if getattr(n, f"{side}_cut")]
        if not cut:
            continue
        if side in task.truncation_errors:
            i = cut[0]
            raise EmbexpError(f"task {task.display_name}: the {'prompt' if side == 'source' else 'target'} of {which} "
                              f"example {i} is {getattr(ns[i], side)} tokens, longer than task.{limit}="
                              f"{getattr(featurizer, limit)} ({len(cut)} of {len(ns)} {which} examples): a cut "
                              f"{'answer' if side == 'target' else 'question'} would be trained and scored as the "
                              f"whole one; raise task.{limit}")
        said.append(f"{which} {len(cut)}/{len(ns)} {'prompts' if side == 'source' else 'targets'} "
                    f"(longest {rec['longest_' + side]} tokens) to task.{limit}={getattr(featurizer, limit)}")
    if said:
        log.warning("truncated: %s", "; ".join(said))
    return [f for f, _ in pairs]


def count_params(module: torch.nn.Module) -> int:
    return sum(p.numel() for p in {id(p): p for p in module.parameters()}.values())
