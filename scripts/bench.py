"""Benchmarks, one subcommand each: ``python scripts/bench.py <benchmark> [key=value ...]``.

Every timing is a ratio against a reference measured in the same process, on the same inputs,
interleaved (A/B, B/A, ...) so that machine noise and ordering effects hit both; medians are
compared. docs/benchmarks.md has the figures and what each one measures.

    python scripts/bench.py throughput                 # embexp's loop vs a plain PyTorch loop (make bench)
    python scripts/bench.py ktoken_prefill             # K-Token prefill, K=4 vs uncompressed (make ktoken_prefill)
    python scripts/bench.py pema_count                 # PEMA token counting vs collections.Counter (make pema_bench)
    python scripts/bench.py pete                       # PETE vs the standard table, seconds per step
    python scripts/bench.py tinyattn                   # Tiny-Attention vs a frozen backbone with its head trained
    python scripts/bench.py evaluation                 # evaluation examples/s vs the code before, LL scoring vs lm-eval
    python scripts/bench.py <benchmark> --help         # its options and their defaults
"""

from __future__ import annotations

import importlib.util
import inspect
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402

from embexp.core.cli import (  # noqa: E402
    compose_train,  # noqa: E402  (the train config exactly as the CLI composes it)
    one_line_errors,
    quiet_libraries,
)

# the plain-loop comparison lives in the package, shared with python -m embexp.doctor (make gpu-check)
from embexp.doctor.speed import alternated, alternating, fixed_batches, loop_speeds  # noqa: E402
from embexp.models import smollm2_path  # noqa: E402


# ---- shared machinery -------------------------------------------------------------------------------
def options(name: str, argv: list[str], defaults: dict, hydra: bool = False) -> tuple[dict, list[str]]:
    """key=value options over `defaults`; with `hydra`, keys with a dot (or a leading +) are Hydra
    overrides passed on to the composed config. One line naming the valid keys on a bad one."""
    if argv and argv[0] in ("-h", "--help"):
        print(f"python scripts/bench.py {name} " + " ".join(f"{k}={v}" for k, v in defaults.items())
              + (" [Hydra overrides with a dot]" if hydra else "") + "\n\n"
              + inspect.cleandoc(BENCHMARKS[name].__doc__ or ""))
        sys.exit(0)
    opts, overrides = dict(defaults), []
    for a in argv:
        k, sep, v = a.partition("=")
        if hydra and ("." in k or k.startswith("+")):
            overrides.append(a)
            continue
        if k not in opts or not sep:
            what = "unknown option" if k not in opts else "option without a value"
            sys.exit(f"embexp: error: {what} '{a}' of {name} (choose from: {', '.join(f'{o}=' for o in opts)}"
                     + (", or a Hydra override with a dot)" if hydra else ")"))
        opts[k] = v
    return opts, overrides


def clocks(fn) -> tuple[float, float]:
    """Wall seconds and process CPU seconds of one call. On a shared machine with one thread the CPU
    clock measures the call's compute; the wall clock also counts the time other processes held the core."""
    w, c = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - w, time.process_time() - c


def fit_clocks(trainer) -> tuple[float, float]:
    """One Trainer.fit() of its steps: wall and CPU seconds per optimizer step."""
    out = {}
    w, c = clocks(lambda: out.setdefault("res", trainer.fit()))
    return w / out["res"].steps, c / out["res"].steps


def build_run(overrides: list[str]):
    from embexp.run.build import build

    cfg = compose_train(overrides)
    return cfg, build(cfg, torch.device("cpu"))


TRAIN_QUIET = ["trainer.cpu=true", "trainer.progress=false", "trainer.log_every=0", "trainer.mixed_precision=no",
               "trainer.warmup_steps=0"]


# ---- throughput -------------------------------------------------------------------------------------
def throughput(argv: list[str]) -> None:
    """Training throughput of embexp's loop against a plain PyTorch/transformers loop: same model, the
    same collated batches in the same order, same trainable tensors, same optimizer. Prints tokens/s
    (non-padding) of each and the ratio embexp / plain (1.0 = no overhead). The plain loop gets its
    batches collated before the clock starts, so any difference is embexp's overhead."""
    from accelerate import Accelerator

    o, _ = options("throughput", argv, dict(model="minilm", task="glue", methods="full_ft,tinyte_full", steps="20",
                                            batch="16", repeats="6", source_tokens="128"))
    torch.set_num_threads(os.cpu_count() or 1)
    acc = Accelerator(cpu=True)
    print(f"model={o['model']} task={o['task']} batch={o['batch']} steps={o['steps']} repeats={o['repeats']} "
          f"threads={torch.get_num_threads()} torch={torch.__version__}")
    print(f"{'method':<14}{'plain tok/s':>14}{'embexp tok/s':>14}{'ratio':>8}")
    for method in o["methods"].split(","):
        cfg, c = build_run([f"method={method}", f"model={o['model']}", f"task={o['task']}", "task.source=fixture",
                            "task.fixture_size=256", f"task.max_source_tokens={o['source_tokens']}",
                            f"trainer.max_steps={o['steps']}", f"trainer.batch_size={o['batch']}", *TRAIN_QUIET,
                            "trainer.max_grad_norm=1.0"])
        feats = [c.featurizer.train_features(e) for e in c.task.examples("train")]
        c.method.setup({"train": [f["input_ids"] for f in feats], "eval": []})
        runs = loop_speeds(cfg, c, feats, acc, int(o["repeats"]))
        p, e = statistics.median(runs["plain"]), statistics.median(runs["embexp"])
        print(f"{method:<14}{p:>14.0f}{e:>14.0f}{e / p:>8.3f}   per repeat: plain {[round(x) for x in runs['plain']]}, "
              f"embexp {[round(x) for x in runs['embexp']]}")


# ---- K-Token prefill --------------------------------------------------------------------------------
def ktoken_prefill(argv: list[str]) -> None:
    """Prefill time of one long prompt, K-Token merging against the uncompressed prompt, same model:
    (a) the backbone reading the n tokens, (b) the merging encoder plus the backbone reading the
    ceil(n/K) merged positions, each a generation prefill (one forward that fills the KV cache and
    returns the next-token logits only, logits_to_keep=1, as generate does), on wall and CPU clocks.
    Keys with a dot are Hydra overrides (e.g. a larger tiny model: +model.tiny.hidden_size=512 ...)."""
    o, overrides = options("ktoken_prefill", argv, dict(model="smollm2", k="4", tokens="2048", repeats="7", seed="0",
                                                        threads="1"), hydra=True)
    torch.set_num_threads(int(o["threads"]))
    n, k = int(o["tokens"]), int(o["k"])
    torch.manual_seed(int(o["seed"]))
    _, c = build_run(["method=ktoken", f"model={o['model']}", "task=tree", f"method.k={k}", "trainer.cpu=true",
                      *overrides])
    method = c.method
    method.eval()
    model = method.backbone_model
    special = set(c.backbone.tokenizer.all_special_ids)
    pool = torch.tensor([i for i in range(c.backbone.vocab_size) if i not in special])
    ids = pool[torch.randint(len(pool), (1, n), generator=torch.Generator().manual_seed(int(o["seed"])))]
    mask = torch.ones_like(ids)

    def uncompressed():
        return model(input_ids=ids, attention_mask=mask, use_cache=True, logits_to_keep=1).logits

    def merged():
        x, m = method.prefix(ids, mask)
        return model(inputs_embeds=x, attention_mask=m, use_cache=True, logits_to_keep=1).logits

    with torch.inference_mode():
        x, _ = method.prefix(ids, mask)
        print(f"model={o['model']} ({c.n_backbone_params:,} params) "
              f"k={k}: {n} prompt tokens -> {x.shape[1]} positions; "
              f"torch {torch.__version__}, {torch.get_num_threads()} threads")
        uncompressed(), merged()  # warm-up
        times = {"uncompressed": [], "merged": []}
        for r in range(int(o["repeats"])):
            for name, fn in alternating(r, [("uncompressed", uncompressed), ("merged", merged)]):
                times[name].append(clocks(fn))
            (uw, uc), (mw, mc) = times["uncompressed"][-1], times["merged"][-1]
            print(f"repeat {r}: uncompressed wall {uw:.3f} s cpu {uc:.3f} s; "
                  f"merged wall {mw:.3f} s cpu {mc:.3f} s", flush=True)
    for i, clock in enumerate(("wall", "cpu")):
        u = statistics.median(t[i] for t in times["uncompressed"])
        m = statistics.median(t[i] for t in times["merged"])
        print(f"median prefill ({clock}): uncompressed {u:.3f} s, merged (K={k}, encoder included) {m:.3f} s, "
              f"ratio merged / uncompressed {m / u:.3f}")


# ---- PEMA token counting ----------------------------------------------------------------------------
def pema_count(argv: list[str]) -> None:
    """Token-counting throughput of PEMA's setup (embexp.methods.pema.count_tokens) against a plain
    collections.Counter over the same ids. The input is what Method.setup receives: a list of lists
    of token ids (lengths uniform in [16, 128], ids Zipf-distributed over the vocabulary, fixed seed).
    Reported: the median of `repeats` runs (the Counter: repeats // 2), in tokens per second."""
    import collections
    import itertools

    from embexp.methods.pema import count_tokens

    o, _ = options("pema_count", argv, dict(sequences="100000", vocab="30522", repeats="5"))
    n_seq, vocab, repeats = int(o["sequences"]), int(o["vocab"]), int(o["repeats"])
    seqs = zipf_ids(n_seq, vocab)
    n = sum(map(len, seqs))
    counts = count_tokens(seqs, vocab)
    ref = collections.Counter(itertools.chain.from_iterable(seqs))
    if not (all(counts[k] == v for k, v in ref.items()) and counts.sum() == n):
        sys.exit("embexp: error: count_tokens disagrees with collections.Counter")

    def median_seconds(fn, times: int) -> float:
        return statistics.median(clocks(fn)[0] for _ in range(times))

    t = median_seconds(lambda: count_tokens(seqs, vocab), repeats)
    t_ref = median_seconds(lambda: collections.Counter(itertools.chain.from_iterable(seqs)), max(1, repeats // 2))
    print(f"{n_seq} sequences, {n:,} tokens, vocab {vocab:,}, {int((counts != 0).sum()):,} distinct ids")
    print(f"count_tokens         {t * 1e3:8.1f} ms   {n / t / 1e6:7.1f} M tokens/s")
    print(f"collections.Counter  {t_ref * 1e3:8.1f} ms   {n / t_ref / 1e6:7.1f} M tokens/s   (reference)")
    print(f"speed-up {t_ref / t:.1f}x")


def zipf_ids(n: int, vocab: int, seed: int = 0) -> list[list[int]]:
    import numpy as np

    rng = np.random.default_rng(seed)
    lengths = rng.integers(16, 129, size=n)
    flat = (rng.zipf(1.2, size=int(lengths.sum())) - 1) % vocab
    return [a.tolist() for a in np.split(flat, np.cumsum(lengths)[:-1])]


# ---- PETE -------------------------------------------------------------------------------------------
def pete(argv: list[str]) -> None:
    """Seconds per training step of PETE against the standard embedding table: the same encoder
    built twice from the same seed (method=pete and method=full_ft on model=scratch_encoder,
    task=nli_pairs), each trained with embexp's Trainer on the same batches; one Trainer (and
    optimizer) per method kept across repeats, so a step is measured in steady state. data_dir=DIR
    reads the real SNLI pairs (validation+test) under DIR; without it, the task's fixture. threads:
    default 2 at most (as the tests); threads=1 on a shared CPU."""
    from accelerate import Accelerator

    from embexp.run.loop import Trainer, TrainInputs

    o, _ = options("pete", argv, dict(model="scratch_encoder", steps="10", batch="32", repeats="6", data_dir="",
                                      seed="0", threads=""))
    if o["threads"]:
        torch.set_num_threads(int(o["threads"]))
    acc = Accelerator(cpu=True)
    data = ([f"task.data_dir={o['data_dir']}", "task.datasets=[snli]", "task.train_split=validation+test"]
            if o["data_dir"] else ["task.source=fixture", "task.fixture_size=512"])
    methods = ("pete", "full_ft")
    built = {}
    for m in methods:
        torch.manual_seed(int(o["seed"]))  # data, features and method.setup as a run does them
        built[m] = build_run([f"method={m}", f"model={o['model']}", "task=nli_pairs", *data,
                              f"trainer.max_steps={o['steps']}", f"trainer.batch_size={o['batch']}", *TRAIN_QUIET,
                              f"seed={o['seed']}"])
    print(f"model={o['model']} data={'SNLI validation+test (' + o['data_dir'] + ')' if o['data_dir'] else 'fixture'} "
          f"batch={o['batch']} steps={o['steps']} repeats={o['repeats']} "
          f"threads={torch.get_num_threads()} torch={torch.__version__}")
    trainers = {}
    for m, (cfg, c) in built.items():  # one trainer each; a first fit warms up kernels and creates the optimizer state
        inputs = TrainInputs(c.train_features, c.backbone.tokenizer.pad_token_id, cfg.seed)
        trainers[m] = Trainer(c.method, cfg.trainer, acc, inputs)
        fit_clocks(trainers[m])
    got = alternated({m: lambda m=m: fit_clocks(trainers[m]) for m in methods}, int(o["repeats"]))
    wall, cpu = {m: [w for w, _ in got[m]] for m in methods}, {m: [c for _, c in got[m]] for m in methods}
    med = {m: (statistics.median(wall[m]), statistics.median(cpu[m])) for m in methods}
    for m in methods:
        n = built[m][1].method.n_trainable(include_head=False)
        print(f"{m:<8} {n:>11,} params  wall {med[m][0]:.3f} s/step  CPU {med[m][1]:.3f} s/step   "
              f"per repeat wall {[round(x, 3) for x in wall[m]]} CPU {[round(x, 3) for x in cpu[m]]}")
    print(f"ratio pete / full_ft: wall {med['pete'][0] / med['full_ft'][0]:.3f}  "
          f"CPU {med['pete'][1] / med['full_ft'][1]:.3f}")


# ---- Tiny-Attention ---------------------------------------------------------------------------------
class Loop:
    """One trainable setup with its own AdamW; ``step(batch)`` runs one optimizer step, returns its seconds."""

    def __init__(self, model, params, before=None):
        self.model, self.params, self.before = model, params, before or (lambda: None)
        self.opt = torch.optim.AdamW(params, lr=1e-4)

    def step(self, batch) -> float:
        self.before()
        self.model.train()  # tinyattn keeps its frozen backbone in eval mode (no dropout): the baselines do too
        base = getattr(self.model, "base_model", None)
        if base is not None and base is not self.model:
            base.eval()
        t0 = time.perf_counter()
        self.model(**batch).loss.backward()
        torch.nn.utils.clip_grad_norm_(self.params, 1.0)
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        return time.perf_counter() - t0


def tinyattn(argv: list[str]) -> None:
    """Step time of Tiny-Attention against a frozen backbone whose head alone is trained: three plain
    PyTorch setups (forward, backward, clip, AdamW step) on the same collated batches, taking turns
    step by step in an order that rotates from batch to batch. head_only: only the task head trains,
    the backward stops at the head; head_full_bw: the same, but the embedding output requires grad,
    so the backward runs through every layer (the least any in-layer adapter pays); tinyattn:
    method=tinyattn on its own copy of the same backbone. Reported: median s/step, the ratio of the
    medians and the median per-batch (paired) ratio tinyattn / setup. data_dir=DIR reads DIR's
    SST-2 train.jsonl/validation.jsonl; overrides=a.b=1,c.d=2 are Hydra overrides."""
    from embexp.models import load_backbone

    o, _ = options("tinyattn", argv, dict(model="minilm", task="glue", steps="20", batch="16", repeats="2",
                                          source_tokens="128", threads="0", data_dir="", overrides=""))
    torch.set_num_threads(int(o["threads"]) or (os.cpu_count() or 1))
    data = ([f"task.data_dir={o['data_dir']}", "task.source=local", "task.subset=sst2"] if o["data_dir"]
            else ["task.source=fixture", "task.fixture_size=256"])
    torch.manual_seed(0)
    # tinyattn on its own backbone
    cfg, c = build_run(["method=tinyattn", f"model={o['model']}", f"task={o['task']}", *data,
                        f"task.max_source_tokens={o['source_tokens']}", "trainer.cpu=true",
                        *[x for x in o["overrides"].split(",") if x]])
    feats = [c.featurizer.train_features(e) for e in c.task.examples("train")]
    batches = fixed_batches(feats, int(o["steps"]), int(o["batch"]), c.backbone.tokenizer.pad_token_id)
    torch.manual_seed(0)
    plain = load_backbone(cfg.model, num_labels=c.task.num_labels)  # the same weights, no adapters
    head = [p for _, p in plain.head_parameters()]
    for p in plain.model.parameters():
        p.requires_grad_(False)
    for p in head:
        p.requires_grad_(True)
    full_bw = {"on": False}
    plain.model.get_input_embeddings().register_forward_hook(
        lambda mod, a, out: out.requires_grad_(True) if full_bw["on"] else out)
    loops = {"head_only": Loop(plain.model, head, lambda: full_bw.__setitem__("on", False)),
             "head_full_bw": Loop(plain.model, head, lambda: full_bw.__setitem__("on", True)),
             "tinyattn": Loop(c.method, list(c.method.trainable_tensors().values()))}
    names = list(loops)
    for lp in loops.values():  # warm-up: allocator, kernels
        lp.step(batches[0])
    times = {k: [] for k in names}
    for r in range(int(o["repeats"])):  # every loop takes one step on the same batch, in a rotating order
        for s, batch in enumerate(batches):
            k = (r * len(batches) + s) % len(names)
            for name in names[k:] + names[:k]:
                times[name].append(loops[name].step(batch))
    med = {k: statistics.median(v) for k, v in times.items()}
    paired = {k: statistics.median(a / b for a, b in zip(times["tinyattn"], times[k])) for k in names}
    n_tok = sum(int(b["attention_mask"].sum()) for b in batches) / len(batches)
    print(f"data={o['data_dir'] or 'fixture'} tokens/batch={n_tok:.0f} model={o['model']} batch={o['batch']} "
          f"max_source_tokens={o['source_tokens']} steps={o['steps']} "
          f"repeats={o['repeats']} threads={torch.get_num_threads()} "
          f"torch={torch.__version__} tinyattn: heads={cfg.method.heads} head_dim={cfg.method.head_dim} "
          f"adapter params={c.method.n_trainable(include_head=False)} head params={sum(p.numel() for p in head)}")
    print(f"{'loop':<14}{'median s/step':>15}{'ratio of medians':>18}{'median paired ratio':>21}   quartiles s/step")
    for k in names:
        q = statistics.quantiles(times[k], n=4)
        print(f"{k:<14}{med[k]:>15.4f}{med['tinyattn'] / med[k]:>18.3f}{paired[k]:>21.3f}   {q[0]:.4f} .. {q[2]:.4f}")


# ---- evaluation -------------------------------------------------------------------------------------
PARTS = {"sst2": ["task=glue", "task.subset=sst2"],  # eval_mode auto: generation and log-likelihood choices
         "boolq": ["task=superglue", "task.subset=boolq", "task.eval_mode=loglik", "task.max_source_tokens=4096"]}
LMEVAL_BOOLQ = dict(task="embexp_boolq", dataset_path="json", output_type="multiple_choice",
                    validation_split="validation",
                    doc_to_text="{{passage}}\nQuestion: {{question}}?\nAnswer:", doc_to_target="label",
                    doc_to_choice=["no", "yes"], metric_list=[{"metric": "acc"}])  # lm-eval's boolq.yaml, local rows
CPU_CLOCK = """\
import sys, time, importlib  # python -m embexp.train; the scoring of rows also records its CPU seconds
try: i, name = importlib.import_module("embexp.run.predict"), "score_rows"
except ImportError: i, name = importlib.import_module("embexp.run.evaluate"), "evaluate"  # a `before` revision
def timed(*a, score=getattr(i, name), **kw):
    c = time.process_time(); m, p = score(*a, **kw); m["eval_cpu_seconds"] = time.process_time() - c; return m, p
setattr(i, name, timed); sys.argv[0] = "embexp.train"; import embexp.train; embexp.train.entry()"""


def evaluation(argv: list[str]) -> None:
    """Evaluation examples/s of zero_shot (embexp.train do_train=false: metrics.json's eval_seconds) on
    SST-2 (generation and log-likelihood choices) and BoolQ (log-likelihood) rows under data_dir (empty:
    fixtures): this code ("after") against the code at git revision `before`, each a fresh process, and
    lm-eval's HFLM on BoolQ (model=smollm2; in this process, warmed up; lmeval=0: without). Stops
    unless metrics, answers and log-likelihoods (1e-5: the one-pass scoring's bound) agree."""
    o, _ = options("evaluation", argv, dict(model="smollm2", parts="sst2 boolq", sst2_rows="872", boolq_rows="200",
                                            repeats="3", batch="8", threads="1", before="44b4fbf",
                                            data_dir=os.environ.get("EMBEXP_DATA", ""), lmeval="1"))
    if o["lmeval"] == "1" and o["model"] != "smollm2":
        sys.exit("embexp: error: lmeval=1 compares with lm-eval on SmolLM2's "
                 f"folder: model=smollm2 or lmeval=0 (got model={o['model']})")
    if bad := [p for p in o["parts"].split() if p not in PARTS]:
        sys.exit(f"embexp: error: parts: unknown part {bad[0]!r} (choose from: {', '.join(PARTS)})")
    if o["lmeval"] == "1" and "boolq" in o["parts"].split() and importlib.util.find_spec("lm_eval") is None:
        sys.exit("embexp: error: lmeval=1 needs lm-eval: pip install -e '.[lmeval]' (or lmeval=0 to leave it out)")
    repo = Path(__file__).resolve().parents[1]
    print(f"{o['model']} zero_shot, batch {o['batch']}, {o['threads']} "
          f"thread(s), {o['repeats']} repeats, before = {o['before']}")
    with tempfile.TemporaryDirectory(prefix="embexp_bench_") as tmp:  # the code at `before`, the runs' directories
        subprocess.run(f"git -C {repo} archive {o['before']} src conf | tar -x -C {tmp}", shell=True, check=True)
        for part in o["parts"].split():
            rows, who = (int(o[part + "_rows"]),
                         ["before", "after"] + (["lm-eval"] if part == "boolq" and o["lmeval"] == "1" else []))
            lm_eval, runs = lmeval_boolq(o, rows) if "lm-eval" in who else None, {k: [] for k in who}
            for r in range(int(o["repeats"])):
                for k in who[r % len(who):] + who[:r % len(who)]:  # a rotating order
                    src = Path(tmp, "src") if k == "before" else repo / "src"
                    runs[k].append(lm_eval() if k == "lm-eval"
                                   else embexp_eval(o, part, rows, src, Path(tmp, f"{part}_{k}_{r}")))
                print(f"{part} repeat {r}: " + ", ".join(f"{k} {x[-1]['wall']:.1f} s ({x[-1]['cpu']:.1f} s CPU)"
                                                         for k, x in runs.items()),
                      flush=True)
            report_evaluation(part, rows, runs)

def embexp_eval(o: dict, part: str, rows: int, src: Path, out: Path) -> dict:
    """One evaluation run of the embexp under `src`, in a fresh process: its times, metrics and outputs."""
    cmd = [sys.executable, "-c", CPU_CLOCK, "do_train=false", "method=zero_shot", f"model={o['model']}",
           "trainer.cpu=true", "trainer.progress=false", f"trainer.eval_batch_size={o['batch']}", *PARTS[part],
           f"task.max_eval_samples={rows}",
           f"task.data_dir={o['data_dir']}" if o["data_dir"] else "task.source=fixture", f"output_root={out}"]
    job = subprocess.run(cmd, env={**os.environ, "PYTHONPATH": str(src), "OMP_NUM_THREADS": o["threads"]},
                         capture_output=True, text=True)
    if job.returncode:
        sys.exit(f"embexp: error: {out.name} failed: {(job.stderr.strip().splitlines() or ['?'])[-1]}")
    run_dir = next(out.rglob("metrics.json")).parent
    m = json.loads((run_dir / "metrics.json").read_text())["metrics"]
    preds = [json.loads(line) for line in (run_dir / "predictions.jsonl").read_text().splitlines()]
    return {"wall": m.pop("eval_seconds"), "cpu": m.pop("eval_cpu_seconds"), "metrics": m,
            "out": [[p.get("generation"), p.get("ll_scores")] for p in preds]}


def lmeval_boolq(o: dict, rows: int):
    """lm-eval's HFLM (SmolLM2's folder, fp32) on its BoolQ task's first `rows` local rows, timed."""
    from lm_eval import evaluator, tasks
    from lm_eval.models.huggingface import HFLM

    torch.set_num_threads(int(o["threads"]))
    lm, manager = (HFLM(pretrained=str(smollm2_path()), device="cpu", dtype="float32", batch_size=int(o["batch"])),
                   tasks.TaskManager())
    task = {**LMEVAL_BOOLQ,
            "dataset_kwargs": {"data_files": {"validation": f"{o['data_dir']}/super_glue/boolq/validation.jsonl"}}}
    evaluator.evaluate(lm, tasks.get_task_dict([task], manager), limit=int(o["batch"]), verbosity="ERROR")  # warm-up

    def run() -> dict:
        task_dict, got = tasks.get_task_dict([task], manager), {}  # the rows loaded before the clock starts
        wall, cpu = clocks(lambda: got.setdefault("res", evaluator.evaluate(lm, task_dict, limit=rows,
                                                                            verbosity="ERROR")))
        samples = sorted(got["res"]["samples"]["embexp_boolq"], key=lambda x: x["doc_id"])
        return {"wall": wall, "cpu": cpu,
                "metrics": {"ll_accuracy": 100.0 * got["res"]["results"]["embexp_boolq"]["acc,none"]},
                "out": [[None, [float(x[0]) for x in s["filtered_resps"]]] for s in samples]}
    return run


def report_evaluation(part: str, rows: int, runs: dict) -> None:
    """Examples/s of each side (median, per repeat) and the paired speed ratios "after" / side; the checks."""
    ref, answers = runs["after"][0], lambda x: [(g, s and s.index(max(s))) for g, s in x["out"]]  # noqa: E731
    for k, rs in runs.items():
        worst = max(abs(a - b) for x in rs for (_, s), (_, t) in zip(x["out"], ref["out"])
                    for a, b in zip(s or [], t or []))
        keys = ["ll_accuracy"] if k == "lm-eval" else list(ref["metrics"])
        if any([x["metrics"][m] for m in keys] != [ref["metrics"][m] for m in keys] or answers(x) != answers(ref)
               for x in rs) or (k != "lm-eval" and worst > 1e-5):
            sys.exit(f"embexp: error: {part}: {k} differs from after "
                     f"(metrics, answers, or log-likelihoods by {worst:.1e})")
        print(f"{part} {k}: largest |loglik - after's| {worst:.1e}; "
              + ", ".join(f"{m} {ref['metrics'][m]:.2f}" for m in keys if "acc" in m))
        for clock in ("wall", "cpu"):
            rate, q = [rows / x[clock] for x in rs], [x[clock] / a[clock] for a, x in zip(runs["after"], rs)]
            vs = (f"; speed after / {k}: median {statistics.median(q):.3f}, per repeat {min(q):.3f}..{max(q):.3f}"
                  if k != "after" else "")
            print(f"  {clock:<4} examples/s median {statistics.median(rate):.3f} "
                  f"(per repeat {[round(v, 3) for v in rate]}){vs}")


BENCHMARKS = {"throughput": throughput, "ktoken_prefill": ktoken_prefill, "pema_count": pema_count, "pete": pete,
              "tinyattn": tinyattn, "evaluation": evaluation}


@one_line_errors
def main(argv: list[str]) -> None:
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        return
    if argv[0] not in BENCHMARKS:
        sys.exit(f"embexp: error: unknown benchmark '{argv[0]}' (choose from: {', '.join(BENCHMARKS)})")
    quiet_libraries()
    BENCHMARKS[argv[0]](argv[1:])


if __name__ == "__main__":
    main(sys.argv[1:])
