"""PETE's table (make pete_table)."""

from __future__ import annotations

from embexp.core import cli
from embexp.sweep.runner import Var, analyze, note, report, switched_on, table, train

DROPOUTS = ["attention_dropout", "mlp_dropout", "embedding_dropout"]
# the trainer fields each recipe's note states (the paper's optimisation recipe; ours for a CPU)
RECIPE_FIELDS = {"paper": ("optimizer", "lr", "weight_decay", "betas", "eps", "scheduler", "warmup_steps", "batch_size",
                           "grad_accum", "max_steps", "max_grad_norm", "mixed_precision", "tf32"),
                 "cpu": ("lr", "scheduler", "warmup_steps", "batch_size", "max_steps", "epochs")}


def settings(group: str, name: str, fields: tuple[str, ...]) -> str:
    """``key=value ...`` of `fields` in ``<group>=<name>``'s composed config (the schema's default where the file
    sets none), numbers as the YAML files write them (``2.0e-5``, ``epochs=1``, ``0.0``)."""
    node = cli.compose_train([f"{group}={name}"])[group]
    return " ".join(f"{key}={_as_written(node[key])}" for key in fields)


def _as_written(value) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float) and 0 < abs(value) < 1e-3:
        mantissa, exponent = f"{value:e}".split("e")
        return f"{float(mantissa)!r}e{int(exponent)}"
    if isinstance(value, float) and value and value.is_integer():  # epochs: 1, not 1.0
        return str(int(value))
    if isinstance(value, (int, float, str)):
        return str(value)
    return "[" + ", ".join(_as_written(v) for v in value) + "]"


@table(seeds=Var([0]),
       recipe=Var("paper", choices=["paper", "cpu"], help="a trainer preset, conf/trainer/pete_<recipe>.yaml"),
       steps=Var("", help="overrides the recipe's step count"),
       dropout=Var("0.1", help="the second dropout of every ModernBERT dropout (0.1: the paper's baseline)"),
       data_args=Var([], help='task overrides, e.g. "task.datasets=[snli] task.train_split=validation+test"'),
       out=Var("tables/pete"))
def table2(v):
    """PETE's Table 2: PETE against the standard 2-layer/2-head d=512 encoder (model=scratch_encoder), both
    trained from scratch on NLI pairs and scored on STS-B: parameters, Spearman, seconds per step and epoch.
    Each encoder runs with dropout 0 (PETE's cell) and with `dropout` on every ModernBERT dropout, for the
    from-scratch model and its debug=smoke twin (model.tiny). The recipes: docs/methods_pete.md (make pete_table)."""
    trainer = f"pete_{v.recipe}"
    text = f"PETE_RECIPE={v.recipe}, trainer={trainer}: {settings('trainer', trainer, RECIPE_FIELDS[v.recipe])}"
    if switched_on(v.steps):
        text += f"; PETE_STEPS: max_steps={v.steps}"
    if v.smoke:
        text += "; debug=smoke replaces the budget (steps, batch, warm-up)"
    yield note(text)
    yield analyze("params", "models=[scratch_encoder]", "methods=[full_ft,pete]", "num_labels=0", "breakdown=true",
                  f"out={v.out}/params", extra=False)
    for p in ["0", v.dropout]:
        yield train("-m", "method=pete,full_ft", "model=scratch_encoder", "task=nli_pairs", f"seed={','.join(v.seeds)}",
                    f"tag=drop{p}", f"trainer={trainer}",
                    f"trainer.max_steps={v.steps}" if switched_on(v.steps) else "",
                    "trainer.resume=true",
                    *(f"++model.{m}.{d}={p}" for d in DROPOUTS for m in ["scratch", "tiny"]),
                    *v.data_args)
    yield report("paper=pete", "table=table2", f"out={v.out}")
