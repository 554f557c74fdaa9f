"""The comparison of every method (make compare): python -m embexp.sweep compare/curves [--dry-run]
[seeds="0 1 2"] [kinds="encoder decoder"] [tasks="sst2 cola"] [only="lora full_ft"].

Every method on the same footing, by learning curves: each method's learning rate is chosen from a grid of
three around its comparison lr (``compare_grid``) on the held-out rows of its first seed's runs (``extended``,
``chosen``), and every run scores a held-out carve of its training rows and the eval split at a few budgets;
nothing is chosen on the eval split. The protocol (data, the encoder and decoder tables, selection) and the
sizing: docs/compare/README.md.
"""

from __future__ import annotations

from embexp.methods.registry import compared
from embexp.sweep.runner import EXTEND, Var, analyze, chosen, compare_grid, extended, report, switched_on, table, train

TASKS = ["sst2", "mrpc", "rte", "cola"]
ENCODER_ROWS = {"sst2": "4000", "mrpc": "3368", "rte": "2190", "cola": "4000"}  # n trained on (smoke: 24)
SECOND = "outputs/compare/sst2_second"  # the second sentiment set's split (analyze split, seed 1)
COMPUTED = "computed from debug=smoke unless set"
TRAINING = ("task.max_train_samples=", "task.train_sample_seed=", "task.select_", "trainer.")  # not zero-shot's


@table(seeds=Var([0, 1, 2]),
       kinds=Var(["encoder"], choices=["encoder", "decoder"]),
       tasks=Var(TASKS, choices=TASKS),
       headline=Var(["lora", "full_ft", "tinyattn", "tinyte_full", "head_only"], choices="method",
                    help="every task, every seed"),
       others=Var("1", help="every other encoder method on SST-2, first seed ('' = none)"),
       steps=Var(None, help=f"encoder steps (250; smoke 4): {COMPUTED}"),
       curve=Var(None, help=f"encoder trainer.curve_at ([50,125]; smoke [2]): {COMPUTED}"),
       batch=Var(None, help=f"encoder batch (16; smoke 4): {COMPUTED}"),
       dec_tasks=Var(["sst2"], choices=["sst2", "rte"], help="add rte: at the lrs chosen on SST-2"),
       dec_methods=Var(["zero_shot", "lora", "prompt_tuning", "tinyte_full", "tinyte_gated", "ktoken"],
                       choices="method", help="[] = every decoder method"),
       dec_seeds=Var([0, 1]),
       dec_steps=Var(None, help=f"decoder steps (300; smoke 4): {COMPUTED}"),
       dec_curve=Var(None, help=f"decoder trainer.curve_at ([100,200]; smoke [2]): {COMPUTED}"),
       ktoken_check=Var("1", help="K-Token K=2 (and zero-shot) on a second sentiment set: SST-2 train rows split "
                                  "with seed 1 ('' = off)"),
       only=Var([], choices="method", help="only these methods ([] = every method of each kind)"),
       root=Var(None, help=f"where the runs go (an output_root= extra, else outputs/compare/curves): {COMPUTED}"),
       tables=Var(None, help=f"where the tables go (else outputs/compare/tables): {COMPUTED}"))
def curves(v):
    """The encoder cells and their table, the second set's split, the decoder cells and their tables."""
    smoke = v.smoke

    def pick(name, normal, small):
        return v[name] if v[name] is not None else small if smoke else normal

    root = v.root if v.root is not None else v.output_root or (
        "outputs/smoke/compare/curves" if smoke else "outputs/compare/curves")
    tables = v.tables if v.tables is not None else f"{v.output_root}/tables/compare" if v.output_root else (
        "outputs/smoke/tables/compare" if smoke else "outputs/compare/tables")
    yield from encoder(v, root, steps=pick("steps", "250", "4"), curve=pick("curve", "[50,125]", "[2]"),
                       batch=pick("batch", "16", "4"))
    if "encoder" in v.kinds:
        yield report("paper=compare", "table=curves", f"runs={root}", f"out={tables}", "model=minilm")
    if "decoder" in v.kinds and switched_on(v.ktoken_check) and not smoke:  # the second sentiment set, built once
        yield analyze("split", f"source={v.data}/glue/sst2/train.jsonl", f"out={SECOND}", "n_train=2190", "seed=1",
                      extra=False)
    yield from decoder(v, root, steps=pick("dec_steps", "300", "4"), curve=pick("dec_curve", "[100,200]", "[2]"))
    if "decoder" in v.kinds:
        for metric in ["ll_accuracy", "em_accuracy"]:
            yield report("paper=compare", "table=curves", f"runs={root}", f"out={tables}", "model=smollm2",
                         f"metric={metric}")
    # an output_root= extra puts the second set's runs there too
    if "decoder" in v.kinds and switched_on(v.ktoken_check):
        yield report("paper=compare", "table=curves", f"runs={v.output_root or root + '_second'}",
                     f"out={tables}/second", "model=smollm2", "metric=ll_accuracy")


def picked(v, method: str) -> bool:
    return not v.only or method in v.only


def encoder_cell(v, method: str, task: str, root: str, steps: str, curve: str, batch: str) -> list[str]:
    """MiniLM's cell of a GLUE task: its real train rows less the held-out ones, scored at the curve's points."""
    smoke = v.smoke
    return [f"method={method}", "model=minilm", "task=glue", f"task.subset={task}", f"task.data_dir={v.data}",
            "task.train_split=train", f"task.max_train_samples={'24' if smoke else ENCODER_ROWS[task]}",
            "task.train_sample_seed=0", "task.select_split=train_holdout",
            f"task.select_size={'6' if smoke else '300'}", "task.eval_split=validation",
            "task.max_source_tokens=128" if task == "rte" else "",  # 12% of RTE's pairs: 35% less time
            f"output_root={root}", f"trainer.batch_size={batch}", f"trainer.max_steps={steps}",
            f"trainer.curve_at={curve}", "trainer.curve_select=true"]


def encoder(v, root: str, steps: str, curve: str, batch: str):
    """MiniLM on every task: the methods and their lrs from the classes (Method.comparison)."""
    first = v.first_seed
    for task in TASKS:
        for method in compared("encoder"):
            role = "headline" if method in v.headline else v.others if task == "sst2" else ""
            if not ("encoder" in v.kinds and task in v.tasks and picked(v, method) and switched_on(role)):
                continue
            cell = encoder_cell(v, method, task, root, steps, curve, batch)

            def at(lr, seed, cell=cell):
                return [*cell, f"trainer.lr={lr}", f"tag=lr{lr}", f"seed={seed}"]

            yield from lr_grid(method, at, first, v.seeds[1:] if role == "headline" else [])


def lr_grid(method: str, at, first: str, seeds: list[str]):
    """Stage 1: the method's lr grid at the first seed, one step past an end where the held-out best sits
    there (``extended``); stage 2: ``seeds`` at the lr chosen on held-out rows. ``at(lr, seed)``: a cell."""
    grid = compare_grid(method)
    for lr in grid:
        yield train(*at(lr, first))
    first_cells = {lr: at(lr, first) for lr in grid}
    first_cell = lambda lr: at(lr, first)  # noqa: E731
    yield from extended("lr", first_cells, first_cell)
    for seed in seeds:
        yield chosen("lr", first_cells, lambda lr, seed=seed: at(lr, seed), first_cell, EXTEND)


def decoder(v, root: str, steps: str, curve: str):
    """SmolLM2 on SST-2; RTE and the second set at the lrs SST-2's first seed chose."""
    smoke, dec_first = v.smoke, v.dec_seeds[0] if v.dec_seeds else ""

    def dec_cell(task, rows, method):
        """The decoder cell of a task on the main rows or on the second set (rows)."""
        second = rows == "second"
        return [f"method={method}", "method.k=2" if method == "ktoken" else "", "model=smollm2", "task=glue",
                f"task.subset={task}", f"task.data_dir={SECOND if second and not smoke else v.data}",
                "task.train_split=train", f"task.max_train_samples={'24' if smoke else '2190'}",  # RTE has 2490
                "task.train_sample_seed=0", "task.select_split=train_holdout",
                f"task.select_size={'6' if smoke else '200'}", "task.eval_split=validation",
                f"task.max_eval_samples={'872' if second else '-1'}",  # the second set: 872 rows of the rest
                f"task.max_source_tokens={'192' if task == 'rte' else '80'}",  # cut from the left: the question stays
                f"output_root={root}_second" if second else f"output_root={root}",
                "trainer.batch_size=8", f"trainer.max_steps={steps}", f"trainer.curve_at={curve}",
                "trainer.curve_select=true"]

    for task, rows in [("sst2", "main"), ("rte", "main"), ("sst2", "second")]:
        for method in compared("decoder"):  # in the classes' order; dec_methods picks the six
            if rows == "main":
                use = task in v.dec_tasks
            else:
                use = switched_on(v.ktoken_check) and method in ("zero_shot", "ktoken")
            mine = not v.dec_methods or method in v.dec_methods
            if not ("decoder" in v.kinds and picked(v, method) and mine and use):
                continue
            second = rows == "second"
            if method == "zero_shot":  # trains nothing: its evaluation of the same rows (the decoder table's floor)
                cell = [a for a in dec_cell(task, rows, method) if not a.startswith(TRAINING)]
                yield train(*cell, "tag=second" if second else "", f"seed={dec_first}")
                continue

            def sst2_at(lr, seed, method=method):
                return [*dec_cell("sst2", "main", method), f"trainer.lr={lr}", f"tag=lr{lr}", f"seed={seed}"]

            candidates = {lr: sst2_at(lr, dec_first) for lr in compare_grid(method)}  # SST-2's first-seed runs
            first_cell = lambda lr, at=sst2_at: at(lr, dec_first)  # noqa: E731
            if task == "sst2" and rows == "main":
                yield from lr_grid(method, sst2_at, dec_first, v.dec_seeds[1:])
            else:  # every seed at the lr of the SST-2 cell: its first seed's held-out best
                pre = "second_" if second else ""  # a tag too: an output_root= extra puts both sets in one root
                for seed in v.dec_seeds:
                    cell = dec_cell(task, rows, method)
                    yield chosen("lr", candidates, lambda lr, seed=seed, cell=cell, pre=pre:
                                 [*cell, f"trainer.lr={lr}", f"tag={pre}lr{lr}", f"seed={seed}"], first_cell, EXTEND)
