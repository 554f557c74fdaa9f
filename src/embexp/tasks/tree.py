"""Textualized Tree (K-Token Merging paper): is P the parent of C in this indented tree?

The generator follows the authors' ``scripts/textualized_tree/generate_data.py`` (K-Token-Merging @8d29f47)
call for call, so the same seed gives the same trees: names drawn at random without replacement from
AA..ZZ, each node gets ``randint(min_c, min(max_c, nodes remaining))`` children unless it sits at
``max_depth``, pre-order rendering with ``'+' * level``. Stage i of the curriculum uses seed
``seed + i``; trees (never pairs) are split by a ``Random(seed + i)`` shuffle of the tree indices,
as the authors split tree files. Every ordered pair of distinct nodes is a question: real edges are
``true``, everything else (reversed edges, ancestors, siblings) ``false``, so 1/N are positive
(``pair_sampling=balanced``, ours: as many ``true`` as ``false``, :func:`balanced_pairs`).

Rows use the authors' per-example schema: ``{"indent_tree", "parent", "child", "label": "true"|"false",
"task_type": "parent_child"}``; there is no hub dataset (``source`` auto/hub generate the rows;
``task.data_dir`` reads ``<split>.jsonl`` in that schema). Prompt verbatim from the authors' run.py;
target/choices ``"true"``/``"false"`` with no leading space (the prompt ends in a space). Encoders (ours):
text = (tree, "Parent: P, Child: C"). Metrics: :func:`metrics.binary_summary` (its majority baseline is
~96.7 at N=30). The curriculum, the held-out gate trees and the paper's tree sizes: docs/methods_ktoken.md.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path
from string import ascii_uppercase
from typing import Sequence

from embexp import EmbexpError
from embexp.core.config import option
from embexp.tasks.base import TRAIN_HOLDOUT, Example, Task, TaskConfig
from embexp.tasks.domains import Schema, Text, Word
from embexp.tasks.metrics import binary_summary
from embexp.tasks.registry import register_task

PROMPT = "Tree: {t}, Task: Parent/Child Relationship, Parent: {p}, Child: {c}, Answer: "
# stage: (max_depth, max_nodes, min_children, max_children), in curriculum order (the authors' generator)
STAGES = {
    "small": (2, 3, 0, 2),
    "xsmall": (3, 5, 0, 2),
    "medium": (3, 10, 0, 3),
    "xmedium": (4, 15, 1, 3),
    "large": (4, 30, 1, 3),
    "x3large": (4, 150, 3, 5),
}
NAMES = [a + b for a in ascii_uppercase for b in ascii_uppercase]


@dataclass
class TreeConfig(TaskConfig):
    name: str = option("tree", "Task family (the file under conf/task).")
    subset: str = option("small", "Curriculum stage: small, xsmall, medium, xmedium, large or x3large.",
                         choices=tuple(STAGES))
    eval_split: str = option("test", "Split used for evaluation (the authors call the held-out trees 'test').")
    num_train_trees: int = option(400, "Trees generated for training, the select_size held-out trees "
                                       "included (ours, CPU-sized; the authors: 490k per stage = 98% "
                                       "of 500k; make ktoken_table1: the paper's 2.45M questions, 500k "
                                       "trees x 5 questions with 10k held out for the gate).", ge=1)
    num_eval_trees: int = option(100, "Trees generated for evaluation, the reported 'test' split (the authors: 10k "
                                      "per stage = 2% of 500k; the paper: 50k questions = 10k trees x 5).", ge=1)
    max_pairs_per_tree: int = option(-1, "Questions per tree: -1 = every ordered pair of distinct nodes "
                                         "(the authors' generator); else a sample of that many (5: "
                                         "the paper's 2.45M questions from 490k trees).", ge=1, also=(-1,))
    pair_sampling: str = option("random", "How a tree's questions are drawn: random = uniformly over the ordered pairs "
                                          "(the authors' released code: at x3large ~99.5% 'false'); balanced = as many "
                                          "'true' as 'false' per tree (ours; make ktoken_table1's default, "
                                          "docs/fidelity.md).", choices=("random", "balanced"))
    select_split: str = option(
        "train_holdout", "Rows that a trainer.curriculum's gate (and select_best) reads: "
                         "train_holdout (default, ours) = select_size training trees held out with "
                         "all their questions, never trained on; '' = none (a curriculum then "
                         "needs trainer.select_on=reported, the authors' gate on the test split).")
    select_size: int = option(20, "select_split=train_holdout on generated rows: training TREES held out for "
                                  "the gate (ours: 20 of the default 400; the authors' test share is 2%); with "
                                  "task.data_dir or a fixture, rows as for other tasks.", ge=1, also=(-1,))
    seed: int = option(42, "Generator seed; stage i (curriculum order) uses seed "
                           "+ i, as the authors' generate_curriculum_datasets.py.")
    max_source_tokens: int = option(1024, "Truncate the prompt to this many tokens (an x3large tree is ~600 tokens).")
    max_target_tokens: int = option(8, "Truncate training targets to this many tokens.")
    max_new_tokens: int = option(4, "Greedy generation budget (the authors read one greedy token).")


def generate_tree(rng: random.Random, max_depth: int, max_nodes: int, min_c: int, max_c: int):
    """One tree as nested ``(name, [children])``, drawing from ``rng`` exactly as the authors' TreeGenerator."""
    names, count = list(NAMES), 0

    def node(depth):
        nonlocal count
        if count >= max_nodes or not names:
            return None
        name = rng.choice(names)
        names.remove(name)
        count += 1
        kids = []
        hi = min(max_c, max_nodes - count)
        if depth < max_depth and hi >= min_c:
            for _ in range(rng.randint(min_c, hi)):
                child = node(depth + 1)
                if child is not None:
                    kids.append(child)
        return name, kids

    return node(0)


def walk(tree, level=0):
    """Pre-order (name, level, parent) triples."""
    stack = [(tree, level, None)]
    while stack:
        (name, kids), lvl, parent = stack.pop()
        yield name, lvl, parent
        stack.extend(((k, lvl + 1, name) for k in reversed(kids)))


def render(tree) -> str:
    return "\n".join("+" * lvl + name for name, lvl, _ in walk(tree))


def parse_tree(text: str) -> list[tuple[str, str]]:
    """(parent, child) edges of a rendered tree, in pre-order."""
    edges, path = [], []
    for line in text.split("\n"):
        name = line.lstrip("+")
        level = len(line) - len(name)
        if level > len(path) or (level == 0 and path):
            raise EmbexpError(f"malformed tree rendering at line {line!r}")
        del path[level:]
        if path:
            edges.append((path[-1], name))
        path.append(name)
    return edges


def tree_rows(tree, rng: random.Random, max_pairs: int, balanced: bool = False) -> list[dict]:
    """All question rows of one tree (or a random sample of ``max_pairs``), in random order; with
    `balanced`, :func:`balanced_pairs` instead."""
    t = render(tree)
    nodes = [(name, parent) for name, _, parent in walk(tree)]
    edges = {(p, c) for c, p in nodes if p is not None}
    n = len(nodes)
    if balanced:
        pairs = balanced_pairs(nodes, edges, rng, max_pairs)
    elif 0 <= max_pairs < n * (n - 1):
        # the same draw as rng.sample(all_pairs, max_pairs) (sample picks by position), without building
        # the n*(n-1) pairs: an x3large tree has ~22k, and the paper-sized stage 500k trees
        def pair(i):
            a, b = divmod(i, n - 1)
            return nodes[a][0], nodes[b + (b >= a)][0]
        pairs = [pair(i) for i in rng.sample(range(n * (n - 1)), max_pairs)]
    else:
        pairs = rng.sample([(p, c) for p, _ in nodes for c, _ in nodes if p != c], n * (n - 1))
    return [{"indent_tree": t, "parent": p, "child": c, "label": "true" if (p, c) in edges else "false",
             "task_type": "parent_child"} for p, c in pairs]


def balanced_pairs(nodes: list, edges: set, rng: random.Random, max_pairs: int) -> list[tuple[str, str]]:
    """As many 'true' (parent, child) questions as 'false' ones, up to `max_pairs` per tree (ours; the
    paper's counts imply a sampled set its released code does not contain): of an odd count the last
    question is 'true' or 'false' at random; a tree with fewer edges than half the count gives every
    edge and as many 'false' pairs; -1: every edge and as many 'false' pairs. In random order."""
    n, true = len(nodes), sorted(edges)
    half = len(true) if max_pairs < 0 else max_pairs // 2 + (max_pairs % 2 and rng.random() < 0.5)
    k_true = min(len(true), half)
    k_false = min((n - 1) ** 2, max_pairs - half if (max_pairs >= 0 and k_true == half) else k_true)
    picked = rng.sample(true, k_true)
    false: set = set()
    while len(false) < k_false:  # rejection: 'false' pairs are (n-1)^2 of the n(n-1), so few draws
        a, b = rng.sample(range(n), 2)
        if (nodes[a][0], nodes[b][0]) not in edges:
            false.add((nodes[a][0], nodes[b][0]))
    pairs = picked + sorted(false)
    rng.shuffle(pairs)
    return pairs


@register_task("tree")
class TreeTask(Task):
    """Textualized Tree parent/child questions, one curriculum stage per ``subset``."""

    Config = TreeConfig
    kind = "classification"
    subsets = tuple(STAGES)
    label_names = ("false", "true")
    reports_length_reduction = True  # K-Token Merging's Table 1
    pl_score = True

    def schema(self, split: str) -> Schema:
        """Files in the authors' schema (task.data_dir or task.source=fixture; generated rows are
        built in it): the tree and the two names non-empty, label the word 'true' or 'false'."""
        return Schema({"indent_tree": Text(), "parent": Text(), "child": Text(),
                       "label": Word(("true", "false"), fold=True)})

    def resolved_source(self) -> str:
        src = self.cfg.source
        if src == "auto":
            return "local" if self.reads_local() else "generate"
        return "generate" if src == "hub" else src

    def load(self, which: str) -> list[dict]:
        if self.resolved_source() != "generate":
            return super().load(which)
        self.check_which(which)
        if which == "select" and not self.holdout:
            raise EmbexpError(f"task.select_split='{self.select_split}': generated tree rows have only train and "
                              f"eval trees (choose from: {TRAIN_HOLDOUT}, '', or task.data_dir with that split)")
        cap = {"train": self.cfg.max_train_samples, "eval": self.cfg.max_eval_samples, "select": -1}[which]
        rows = self.generate(which, cap)
        if not rows:
            raise EmbexpError(f"empty dataset: task {self.display_name} "
                              f"generated no '{which}' rows (check num_*_trees)")
        return rows

    def trees(self) -> list:
        """The stage's generated trees (train and eval), built once per task object."""
        cfg = self.cfg
        if getattr(self, "_trees", None) is None:
            gen = random.Random(cfg.seed + list(STAGES).index(cfg.subset))
            self._trees = [generate_tree(gen, *STAGES[cfg.subset])
                           for _ in range(cfg.num_train_trees + cfg.num_eval_trees)]
        return self._trees

    def generate(self, which: str, cap: int = -1) -> list[dict]:
        """The stage's rows for ``which`` (train / eval / select), generated as the authors do (see
        module doc). With select_split=train_holdout, ``select_size`` of the training TREES (drawn with
        ``Random(select_seed)``) are held out with all their questions: select is their rows, train the
        rest; each tree's questions are the same with or without the carve."""
        cfg, stage = self.cfg, self.cfg.subset
        seed = cfg.seed + list(STAGES).index(stage)
        trees = self.trees()
        order = list(range(len(trees)))
        random.Random(seed).shuffle(order)
        ids = order[: cfg.num_train_trees] if which != "eval" else order[cfg.num_train_trees :]
        keep = None
        if which != "eval" and self.holdout:
            k = cfg.select_size
            if not 0 < k < len(ids):
                raise EmbexpError(f"task.select_size={k}: generated tree rows hold out whole training trees, between 1 "
                                  f"and {len(ids) - 1} (task.num_train_trees={cfg.num_train_trees})")
            held = set(random.Random(cfg.select_seed).sample(range(len(ids)), k))
            keep = [(pos in held) == (which == "select") for pos in range(len(ids))]
        pair_rng = random.Random(f"{seed}/{'eval' if which == 'eval' else 'train'}/pairs")
        rows = []
        for pos, i in enumerate(ids):
            if 0 <= cap <= len(rows):
                break
            r = tree_rows(trees[i], pair_rng, cfg.max_pairs_per_tree,  # drawn for every tree: the same stream
                          cfg.pair_sampling == "balanced")
            if keep is None or keep[pos]:
                rows += r
        return rows[:cap] if cap >= 0 else rows

    def fixture_rows(self, split: str, n: int, rng: random.Random) -> list[dict]:
        rows = []
        while len(rows) < n:
            rows += tree_rows(generate_tree(rng, *STAGES[self.cfg.subset]), rng, self.cfg.max_pairs_per_tree,
                              self.cfg.pair_sampling == "balanced")
        return rows[:n]

    def local_candidates(self, root: Path, split: str) -> list[Path]:
        return [root / f"{split}.jsonl", root / self.cfg.subset / f"{split}.jsonl",
                root / "tree" / self.cfg.subset / f"{split}.jsonl"]

    def format(self, row: dict) -> Example:
        label = str(row["label"]).strip().lower()  # 'true' or 'false' (the schema's domain, folded)
        t, p, c = row["indent_tree"], row["parent"], row["child"]
        y = int(label == "true")
        return Example(prompt=PROMPT.format(t=t, p=p, c=c), target=self.label_names[y], label=y,
                       choices=self.label_names, text=(t, f"Parent: {p}, Child: {c}"))

    def score_labels(self, gold: Sequence[int], pred: Sequence[int]) -> dict[str, float]:
        return binary_summary(gold, pred)
