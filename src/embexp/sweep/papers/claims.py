"""The claims' own runs (make claims_runs): python -m embexp.sweep claims/runs [--dry-run]
[parts="pema pete ktoken amazon"] [seeds="0 1"] [sizes="2000 8000 32000"].

The checks of docs/claims.md that the comparison's tables cannot answer (src/embexp/report/claims.yaml),
on real rows ($EMBEXP_DATA), each run resumable (trainer.resume=true) so the sweep can span sessions.

pema (PEMA paired with full FT on MiniLM, SST-2 and MRPC, at their comparison lrs), pete (PETE beside the
standard encoder, trained and untrained), ktoken (K-Token K=2 against LoRA on SmolLM2 at each of `sizes` SST-2
train rows) and amazon (the same on K-Token's own sentiment task); their settings: docs/claims.md. Measured
on one thread beside a second run: pema 5-7 min a run (MRPC; SST-2 11-29 min on a more loaded CPU), pete
~15 min a trained run; ktoken K=2 ~2.5 s, LoRA ~3.8 s, K=4 ~1.6 s a step at batch 8 (curve points included),
~39 run-hours at the caps (2,000 rows: 2.2; 8,000: 5.3; 32,000: 5 runs of 8,000 steps, 31.6), less where the
held-out curve flattens first; amazon ~1.5 run-hours. ktoken's K=2 also runs at lr 1e-4, one grid step below
the comparison's choice (3e-4, the low end of its grid); amazon's 128-token prompts fit 97% of the reviews.
"""

from __future__ import annotations

from embexp.sweep.papers.compare import encoder_cell
from embexp.sweep.runner import Var, report, switched_on, table, train

PARTS = ["pema", "pete", "ktoken", "amazon"]


@table(parts=Var(PARTS, choices=PARTS),
       seeds=Var([0, 1]),
       pema_lrs=Var(["2e-05", "0.0001"]),
       sizes=Var(["2000", "8000", "32000"]),
       root=Var("outputs/claims", help="where the runs go (an output_root= extra wins)"),
       render=Var("1", help="render docs/claims.md after the runs ('' = no)"))
def runs(v):
    root = v.output_root or v.root
    for part, cells in {"pema": pema, "pete": pete, "ktoken": ktoken, "amazon": amazon}.items():  # in PARTS' order
        if part in v.parts:
            yield from cells(v, root)
    if switched_on(v.render) and not v.smoke:
        yield report("paper=claims", f"runs={root}")


def pema(v, root: str):
    """The comparison's MiniLM cells (``compare.encoder_cell``) on SST-2 and MRPC, both methods at both lrs."""
    steps, curve, batch = ("4", "[2]", "4") if v.smoke else ("250", "[50,125]", "16")
    for seed in v.seeds:
        for task in ["sst2", "mrpc"]:
            for lr in v.pema_lrs:
                for method in ["full_ft", "pema"]:
                    yield train(*encoder_cell(v, method, task, f"{root}/pema", steps, curve, batch), f"trainer.lr={lr}",
                                f"tag=lr{lr}", f"seed={seed}", "trainer.resume=true")


def pete(v, root: str):
    cell = ["model=scratch_encoder", "task=nli_pairs", f"task.data_dir={v.data}", "task.datasets=[snli]",
            "task.train_split=validation+test", f"seed={v.first_seed}", "trainer.cpu=true", f"output_root={root}/pete",
            "trainer.resume=true"]
    for method in ["pete", "full_ft"]:
        yield train(f"method={method}", *cell, f"trainer.max_steps={'4' if v.smoke else '150'}",
                    "trainer.batch_size=32", "trainer.lr=5e-4", "trainer.warmup_steps=15", "trainer.log_every=25")
    for method in ["pete", "full_ft"]:
        yield train(f"method={method}", *cell, "do_train=false", "tag=untrained")


def ktoken(v, root: str):
    largest = v.sizes[-1] if v.sizes else ""
    for n in v.sizes:
        rows = int(n)
        epoch = max(1, rows // 8)  # steps per epoch at batch 8
        cap = 4 if v.smoke else (750 if rows <= 2000 else epoch * (2 if rows >= 32000 else 3))
        every = 2 if v.smoke else (150 if rows <= 2000 else max(50, epoch // 4))
        cell = ["model=smollm2", "task=glue", "task.subset=sst2", f"task.data_dir={v.data}", "task.train_split=train",
                f"task.max_train_samples={'24' if v.smoke else n}", "task.train_sample_seed=0",
                "task.select_split=train_holdout", f"task.select_size={'6' if v.smoke else '200'}",
                "task.eval_split=validation", "task.max_eval_samples=-1", "task.max_source_tokens=80",
                f"output_root={root}/ktoken_gap", "trainer.batch_size=8", f"trainer.max_steps={cap}",
                f"trainer.curve_at=[{','.join(str(s) for s in range(every, cap, every))}]",
                "trainer.curve_select=true", f"trainer.save_every={every}", "trainer.resume=true"]
        if rows > 2000:
            cell.append("trainer.curve_patience=3")
        runs = [("ktoken", "2", "0.0003"), ("lora", "", "0.001")]
        runs += [("ktoken", "2", "0.0001")] if rows <= 2000 else []
        runs += [("ktoken", "4", "0.0003")] if n == largest else []
        for seed in (v.seeds if n == largest else v.seeds[:1]):
            for method, k, lr in runs:
                yield train(f"method={method}", f"method.k={k}" if k else "", *cell, f"trainer.lr={lr}",
                            f"tag=n{n}{f'_k{k}' if k == '4' else ''}_lr{lr}", f"seed={seed}")


def amazon(v, root: str):
    steps = 4 if v.smoke else 488  # 2 epochs of the 1,950 rows trained on, at batch 8
    every = 2 if v.smoke else 122
    cell = ["model=smollm2", "task=amazon", f"task.data_dir={v.data}/amazon_reviews/alexa",
            f"task.test_size={'30' if v.smoke else '1000'}", "task.train_fraction=1.0",
            "task.select_split=train_holdout", f"task.select_size={'6' if v.smoke else '200'}",
            "task.max_source_tokens=128", f"output_root={root}/ktoken_amazon", "trainer.batch_size=8",
            f"seed={v.first_seed}", "trainer.resume=true"]
    yield train("method=zero_shot", *cell)
    for method, k, lr in [("ktoken", "2", "0.0003"), ("lora", "", "0.001")]:
        yield train(f"method={method}", f"method.k={k}" if k else "", *cell, f"trainer.max_steps={steps}",
                    f"trainer.curve_at=[{','.join(str(s) for s in range(every, steps, every))}]",
                    "trainer.curve_select=true", f"trainer.save_every={every}", f"trainer.lr={lr}", f"tag=lr{lr}")
