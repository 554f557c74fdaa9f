"""Re-evaluate a saved run: ``python -m embexp.eval run_dir=DIR``.

Rebuilds backbone, method and data from the run's own config.yaml, loads adapter.safetensors,
evaluates, and compares with the metrics the run recorded. Writes nothing into the run.

``check_export=true`` checks the run's export instead (docs/config.md), in a fresh process that never imports
embexp (sentence embeddings: masked mean pooling of the texts, tokenised by the exported tokenizer; decoders: the
next-token logits at each row's last token, the run's token ids).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from embexp import EmbexpError
from embexp.core import cli
from embexp.core.config import EvalConfig, register_core_schemas, validate
from embexp.core.records import METRICS, check_finished, load_config
from embexp.run.adapter import load_adapter
from embexp.run.build import build

register_core_schemas()
import embexp.methods  # noqa: E402,F401
import embexp.tasks  # noqa: E402,F401


def no_code(cfg, trust_remote_code: bool = False) -> None:
    """A run directory never makes this machine run code: its config's model.trust_remote_code and an
    attention kernel from the hub (model.attn_implementation=<org>/<repo>) are honoured only where the command
    line says ``trust_remote_code=true``, and then with a warning line."""
    wants = [k for k, on in (("model.trust_remote_code=true", bool(cfg.model.trust_remote_code)),
                             (f"model.attn_implementation={cfg.model.attn_implementation}",
                              "/" in str(cfg.model.attn_implementation or ""))) if on]
    if trust_remote_code:
        cfg.model.trust_remote_code = True
        cli.warn("trust_remote_code=true: the model's own Python code (a hub repository's or the folder's auto_map, "
             f"{cfg.model.id or cfg.model.source}) may run on this machine")
        return
    cfg.model.trust_remote_code = False
    if any("attn_implementation" in w for w in wants):
        raise EmbexpError(f"the run's config asks for {wants[-1]}, a kernel from the hub (code): not run from a run "
                          "directory's config; pass trust_remote_code=true on the command line to allow it")
    if wants:
        cli.warn("the run's config asks for model.trust_remote_code=true: not honoured from a run directory (its model "
             "loads without running its own code); pass trust_remote_code=true on the command line to allow it")


def rebuild_run(run_dir: Path, max_eval_samples=None, cpu=False, trust_remote_code: bool = False):
    """(config, ``run.build`` components with the trained tensors loaded, device) of a finished run. Nothing in
    the run directory can make it run code (:func:`no_code`)."""
    run_dir = Path(run_dir)
    check_finished(run_dir)
    cfg = load_config(run_dir)  # an older run's config with the values it ran with (core.upgrade)
    validate(cfg)  # the run's config, once: every field inside its domain, before anything loads
    no_code(cfg, trust_remote_code)
    if cfg.model.init == "random":
        raise EmbexpError(f"run_dir '{run_dir}' trained a model with random weights (model.init=random): it has no "
                          "quality to evaluate (its metrics.json records memory, speed and losses)")
    if max_eval_samples is not None:
        cfg.task.max_eval_samples = max_eval_samples
    device = torch.device("cuda" if torch.cuda.is_available() and not cpu else "cpu")
    torch.manual_seed(cfg.seed)
    cfg.do_eval, cfg.export = True, False
    c = build(cfg, device, training=False)  # the pre-flight and build of train.run, without the training-only checks
    if c.method.trains and cfg.do_train:
        load_adapter(c, run_dir)
    return cfg, c, device


def reevaluate(run_dir: Path, max_eval_samples=None, batch_size=None, cpu=False,
               trust_remote_code: bool = False) -> tuple[dict, dict]:
    """(new metrics, recorded metrics) for a finished run directory."""
    cfg, c, device = rebuild_run(run_dir, max_eval_samples, cpu, trust_remote_code)
    metrics, _ = c.score(batch_size or cfg.trainer.eval_batch_size, device, cfg.trainer.progress)
    recorded = json.loads((run_dir / METRICS).read_text())["metrics"]
    return metrics, recorded


# run by a fresh interpreter that never imports embexp: the export as anyone would load it
PLAIN = r"""
import json, sys, torch, transformers
from safetensors.torch import load_file, save_file
export, work, kind, max_len = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
auto = {"decoder": "AutoModelForCausalLM", "encoder": "AutoModelForSequenceClassification", "sentence": "AutoModel"}[kind]
model, out = getattr(transformers, auto).from_pretrained(export, trust_remote_code=False).eval(), []
with torch.no_grad():
    if kind == "sentence":
        tok = transformers.AutoTokenizer.from_pretrained(export, trust_remote_code=False)
        texts = json.loads(open(work + "/texts.json").read())
        for i in range(0, len(texts), 16):
            enc = tok(texts[i:i + 16], padding=True, truncation=True, max_length=max_len, return_tensors="pt")
            m = enc["attention_mask"].unsqueeze(-1).float()
            out.append((model(**enc).last_hidden_state * m).sum(1) / m.sum(1))
    else:
        x = load_file(work + "/inputs.safetensors")
        for i in range(0, len(x["input_ids"]), 16):
            b = {k: v[i:i + 16] for k, v in x.items()}
            logits = model(**b).logits
            out.append(logits if kind == "encoder" else logits[torch.arange(len(logits)), b["attention_mask"].sum(1) - 1])
assert "embexp" not in sys.modules
save_file({"out": torch.cat(out).float().contiguous()}, work + "/outputs.safetensors")
"""  # noqa: E501 (the script's text is what the check runs: kept as it is)
BACKBONE_KEYS = ("input_ids", "attention_mask", "token_type_ids")


def export_difference(run_dir: Path, rows: int = 64, cpu: bool = False,
                      trust_remote_code: bool = False) -> tuple[float, str]:
    """(largest |export - trained method| over the first `rows` evaluation rows, what was compared)."""
    from embexp.featurize import collate
    from embexp.objectives.sentence import SENTENCE_KINDS, embed_texts

    if not (Path(run_dir) / "export" / "config.json").is_file():
        raise EmbexpError(f"run_dir '{run_dir}' has no export/ (train it with export=true)")
    cfg, c, device = rebuild_run(run_dir, cpu=cpu, trust_remote_code=trust_remote_code)
    if c.task.cloze:
        raise EmbexpError("check_export compares sentence embeddings, class logits and next-token logits; a cloze "
                          "(PET) run's outputs are its masked-LM head at the mask, which it does not compare")
    kind = "sentence" if c.task.kind in SENTENCE_KINDS else "decoder" if c.backbone.is_decoder else "encoder"
    with tempfile.TemporaryDirectory() as work, torch.no_grad():
        if kind == "sentence":
            texts = [t for ex in c.eval_examples[:rows] for t in ex.text][:rows]
            Path(work, "texts.json").write_text(json.dumps(texts))
            want, what = embed_texts(c.method, c.featurizer, texts, 16, device), f"{len(texts)} sentences' embeddings"
        else:
            batch = collate(c.eval_features[:rows], c.backbone.tokenizer.pad_token_id)
            save_file({k: batch[k].contiguous() for k in BACKBONE_KEYS if k in batch},
                      str(Path(work, "inputs.safetensors")))
            want = torch.cat([trained_outputs(c.method, {k: v[i:i + 16] for k, v in batch.items() if k != "labels"},
                                              kind, device)
                              for i in range(0, len(batch["input_ids"]), 16)])
            what = f"{len(want)} rows' " + ("class logits" if kind == "encoder"
                                            else "next-token logits at the last token")
        env = {**{k: v for k, v in os.environ.items() if k != "PYTHONPATH"}, "HF_HUB_OFFLINE": "1"}
        r = subprocess.run([sys.executable, "-c", PLAIN, str(Path(run_dir) / "export"), work, kind,
                            str(c.featurizer.max_source_tokens)], capture_output=True, text=True, env=env)
        if r.returncode != 0:
            raise EmbexpError("the export did not load or run in plain transformers: "
                              f"{(r.stderr.strip().splitlines() or ['?'])[-1]}")
        got = load_file(str(Path(work, "outputs.safetensors")))["out"]
    return (got - want).abs().max().item(), what


def trained_outputs(method, batch: dict, kind: str, device) -> torch.Tensor:
    """The trained method's class logits (encoders) or next-token logits at each row's last token."""
    method.eval()
    logits = method(**{k: v.to(device) for k, v in batch.items()}).logits.float().cpu()
    if kind == "encoder":
        return logits
    return logits[torch.arange(len(logits)), batch["attention_mask"].sum(1) - 1]


def check_export(cfg) -> None:
    worst, what = export_difference(Path(cfg.run_dir), cfg.export_rows, cfg.cpu, cfg.trust_remote_code)
    same = worst <= cfg.export_tolerance
    print(f"export check {cfg.run_dir}: {what}, largest |export - trained| = {worst:.2e} "
          f"(export_tolerance {cfg.export_tolerance:g}): " + ("same" if same else "differs"))
    if not same:
        sys.exit(3)


@cli.one_line_errors
def main(cfg) -> None:
    """Re-evaluate (or check the export of) ``cfg.run_dir``; ``cfg``: the validated eval config (:func:`entry`)."""
    cli.quiet_libraries()
    if cfg.check_export:
        check_export(cfg)
        return
    new, old = reevaluate(Path(cfg.run_dir), cfg.max_eval_samples, cfg.batch_size, cfg.cpu, cfg.trust_remote_code)
    rows, worst = [], 0.0
    for k, v in new.items():
        if k.endswith("_seconds") or not isinstance(v, (int, float)):
            continue
        ref = old.get(k)
        diff = abs(v - ref) if isinstance(ref, (int, float)) else float("nan")
        worst = max(worst, diff) if diff == diff else worst
        rows.append(f"  {k:<24} {v:>10.4f}   recorded {ref if ref is not None else '-':>10}   diff {diff:.2e}")
    print(f"re-evaluated {cfg.run_dir}\n" + "\n".join(rows))
    if cfg.max_eval_samples is not None:  # a subset cannot be compared with the full recorded metrics
        print(f"reproduced: not checked (max_eval_samples={cfg.max_eval_samples} evaluates a subset of the "
              "recorded run)")
        return
    same = worst <= cfg.tolerance
    print("reproduced: " + ("yes" if same else f"no (largest difference {worst:.3g})"))
    if not same:
        sys.exit(3)


def entry() -> None:
    """``python -m embexp.eval run_dir=DIR [key=value ...]`` (conf/eval.yaml) through ``core.cli.run_dir_command``."""
    cli.run_dir_command("eval", EvalConfig, "python -m embexp.eval run_dir=DIR", main)


if __name__ == "__main__":
    entry()
