"""K-Token's tables (make ktoken_table1, ktoken_table2, ktoken_table3, ktoken_ablation, ktoken_learning).

The paper's backbone (qwen25_05b), the authors' recipe for every column, and the seeds, effective batch,
tree size (``tree``), gate protocol (``select_on``) and questions per tree of docs/methods_ktoken.md
("The paper's tables").
"""

from __future__ import annotations

from embexp.report.ledger.ktoken import rate
from embexp.sweep.runner import Var, analyze, note, report, table, train

SEEDS = Var([42, 43, 44])
TREE = Var("paper", choices=["paper", "small"], help="paper (500k trees a stage) or small (1% of it, ours)")
SELECT_ON = Var("heldout", choices=["heldout", "reported"], help="reported: the authors' gate on the test split")
RECIPE = ["trainer.lr=1e-4", "trainer.scheduler=constant", "trainer.warmup_steps=0", "trainer.epochs=1",
          "trainer.weight_decay=0.01", "trainer.max_grad_norm=0"]
TREES = {"paper": ["task.num_train_trees=500000", "task.num_eval_trees=10000", "task.max_pairs_per_tree=5",
                   "task.select_size=10000"],
         "small": ["task.num_train_trees=5000", "task.num_eval_trees=100", "task.max_pairs_per_tree=5",
                   "task.select_size=100"]}
BATCH = "= per-device x grad_accum 16 x 1 device (the authors: per-GPU x 4 GPUs x accumulation 4)"
SMOKE = "debug=smoke: its own batch and tree size"
PAPER_GATE = ["trainer.select_on=reported", "task.select_split="]  # select_on=reported: the gate on the test split
LORA = ["method=lora", "method.r=4", "method.alpha=16", "method.dropout=0.05",
        "method.target_modules=[q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj,lm_head]"]


def columns(name: str) -> list[tuple[str, list[str]]]:
    """The six columns of Table 1, 2 or 3: (column, its method overrides); the baselines' rates are the table's
    (``ledger.ktoken.rate``: the reductions the paper printed)."""
    return [("uncompressed", LORA),
            ("selective_context", ["method=prompt_compress", "method.compressor=selective_context",
                                   f"method.rate={rate(name, 'selective_context')}"]),
            ("llmlingua2", ["method=prompt_compress", "method.compressor=llmlingua2",
                            f"method.rate={rate(name, 'llmlingua2')}"]),
            ("k2", ["method=ktoken", "method.k=2"]),
            ("k3", ["method=ktoken", "method.k=3"]),
            ("k4", ["method=ktoken", "method.k=4"])]


def seeds_note(v, name: str, budget: str) -> str:
    return (f"{name}: seeds {' '.join(v.seeds)} (N={len(v.seeds)}; the paper: best of 3 runs); "
            f"{SMOKE if v.smoke else budget}")


def tree_note(v, batch: str) -> str:
    return f"{batch} {BATCH}; tree size '{v.tree}': {' '.join(TREES[v.tree])}"


@table(seeds=SEEDS, tree=TREE, select_on=SELECT_ON,
       questions=Var("balanced", choices=["balanced", "random"], help="balanced (ours) or random (the released code)"))
def table1(v):
    """Table 1: the Textualized Tree task, the paper's six-stage curriculum to x3large (each stage repeats until
    its accuracy gate)."""
    yield note(seeds_note(v, "table1", tree_note(v, "effective batch per stage 5120/5120/3072/2048/768/256 (K=4), "
                                                    "4512/3072/2304/1536/768/256 (K=2/3 and the baselines, ours)")))
    reported = v.select_on == "reported"
    for seed in v.seeds:
        for col, method in columns("table1"):
            stages = "[320,320,192,128,48,16]" if col == "k4" else "[282,192,144,96,48,16]"
            budget = [f"trainer.curriculum_batch_size={stages}", "trainer.batch_size=16", "trainer.grad_accum=16"]
            tag = col + ("_uniform" if v.questions == "random" else "") + ("_paper" if reported else "")
            yield train(*method, "model=qwen25_05b", "task=tree", "task.subset=x3large",
                        "trainer.curriculum=[small,xsmall,medium,xmedium,large,x3large]",
                        *([] if v.smoke else TREES[v.tree] + budget),
                        f"task.pair_sampling={v.questions}", *RECIPE, *(PAPER_GATE if reported else []),
                        f"seed={seed}", f"tag={tag}")
    yield report("paper=ktoken", "table=table1", f"seeds=[{','.join(v.seeds)}]", f"select_on={v.select_on}",
                 f"questions={v.questions}")


def sentiment_or_code(v, name: str, task: str):
    """Tables 2 and 3: the six columns on one task, batch 3 x accumulation 16."""
    yield note(seeds_note(v, name, f"effective batch 48 {BATCH}"))
    for seed in v.seeds:
        for col, method in columns(name):
            yield train(*method, "model=qwen25_05b", f"task={task}",
                        *([] if v.smoke else ["trainer.batch_size=3", "trainer.grad_accum=16"]),
                        *RECIPE, f"seed={seed}", f"tag={col}")
    yield report("paper=ktoken", f"table={name}", f"seeds=[{','.join(v.seeds)}]")


@table(seeds=SEEDS)
def table2(v):
    """Table 2: Amazon Reviews (Fashion) sentiment."""
    yield from sentiment_or_code(v, "table2", "amazon")


@table(seeds=SEEDS)
def table3(v):
    """Table 3: CommitPackFT (python) perplexity; P-L by the paper's Eq. 4."""
    yield from sentiment_or_code(v, "table3", "commitpack")


@table(seeds=SEEDS, tree=TREE, select_on=SELECT_ON)
def ablation(v):
    """Fig. 6: average against random initialisation of the encoder (K=4, x3large, ten one-epoch rounds that
    never pass the gate: the accuracy after each epoch)."""
    yield note(seeds_note(v, "ablation", tree_note(v, "effective batch 256")))
    reported = v.select_on == "reported"
    for seed in v.seeds:
        for init in ["average", "random"]:
            col = f"init_{init}"
            yield train("method=ktoken", "method.k=4", f"method.init={init}", "model=qwen25_05b", "task=tree",
                        "task.subset=x3large", "trainer.curriculum=[x3large]", "trainer.curriculum_max_rounds=10",
                        "trainer.curriculum_final_gate=101",
                        *([] if v.smoke else TREES[v.tree] + ["trainer.batch_size=16", "trainer.grad_accum=16"]),
                        *RECIPE, *(PAPER_GATE if reported else []), f"seed={seed}",
                        f"tag={col}_paper" if reported else f"tag={col}")
    yield report("paper=ktoken", "table=ablation", f"seeds=[{','.join(v.seeds)}]", f"select_on={v.select_on}")


@table(split=Var("outputs/compare/sst2"),
       root=Var(None, help="where the runs go (default outputs/ktoken_learning; debug=smoke: outputs/smoke/...)"))
def learning(v):
    """Does K-Token learn on real rows? K=2, K=4 and uncompressed LoRA on the comparison's 600/272 split of the
    real SST-2 validation rows, SmolLM2, then the curve table (docs/methods_ktoken.md, "On real rows")."""
    root = v.root if v.root is not None else \
        "outputs/smoke/ktoken_learning" if v.smoke else "outputs/ktoken_learning"
    if not v.smoke:
        yield analyze("split", f"source={v.data}/glue/sst2/validation.jsonl", f"out={v.split}", "n_train=600", "seed=0",
                      extra=False)
    curve, longer = "trainer.curve_at=[25,50,100,200]", "trainer.curve_at=[100,200,300,400]"
    for run in [["method=ktoken", "method.k=2", "tag=k2", "trainer.max_steps=300", curve],
                ["method=lora", "trainer.max_steps=300", curve],
                ["method=ktoken", "method.k=4", "tag=k4", "trainer.max_steps=300", curve],
                ["method=ktoken", "method.k=2", "tag=k2_600", "trainer.max_steps=600", longer]]:
        yield train(*run, "model=smollm2", "task=glue", "task.subset=sst2", f"task.data_dir={v.split}", "seed=0",
                    f"output_root={root}", "trainer.resume=true", "trainer.batch_size=8", "trainer.lr=0.001")
    yield report("table=curve", f"runs={root}", "metric=ll_accuracy")
