"""Vocabulary usage behind PEMA (the PEMA paper, Williams and Aletras, Sec. 3 and 6): Fig. 2, Tables 2-4.

    python -m embexp.analyze vocab what=heaps tokenizer=minilm source=fixture     # Fig. 2, offline
    python -m embexp.analyze vocab what=table2 models=[minilm] source=fixture     # Table 2, BERT rows, offline
    python -m embexp.analyze vocab what=table2                                    # Table 2 (table3, table4 alike)

``heaps``: unique against total tokens of every sub-task, a Heaps'-law fit and a PNG; ``table2/3/4``: the
embedding rows PEMA removes, from tokenizers and stored model configs (nothing is trained). What is counted
and how it follows the authors' code: docs/pema.md ("Vocabulary analysis", "Which splits are counted").
"""

from __future__ import annotations

import functools
import itertools
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple, Optional

import numpy as np

from embexp import EmbexpError
from embexp.core.config import option
from embexp.core.tables import markdown, pyplot, save_png
from embexp.models.specs import SPECS

GLUE = ("cola", "mnli", "mrpc", "qnli", "qqp", "rte", "sst2", "stsb", "wnli")
GLUE_LABELS = {"cola": "CoLA", "mnli": "MNLI", "mrpc": "MRPC", "qnli": "QNLI", "qqp": "QQP", "rte": "RTE",
               "sst2": "SST-2", "stsb": "STS-B", "wnli": "WNLI"}
XNLI = ("en", "en-de", "en-zh", "all")


class ModelSpec(NamedTuple):
    label: str  # the paper's row name
    tokenizer: str  # hub id, or minilm (offline)
    model_type: str  # transformers model type ('' = read the config from the tokenizer's folder)
    fields: dict  # config.json fields that set parameter shapes (others are the family's defaults)


_ROBERTA = dict(max_position_embeddings=514, type_vocab_size=1)
_DEBERTA = SPECS["deberta"]["config"]  # DeBERTaV3-base (models/specs.py); the other sizes change its shape fields
# Keys are conf/model names; fields from config.json of each hub repo named here. Their parameter counts equal
# the paper's Tables 5 and 6 but for BERT and DistilBERT, the uncased checkpoints (docs/pema.md says why).
BERT_UNCASED_VOCAB = 30522  # google-bert/bert-base-uncased = distilbert-base-uncased = MiniLM's WordPiece
MODELS = {
    "distilbert": ModelSpec("DistilBERT", "distilbert/distilbert-base-uncased", "distilbert",
                            dict(vocab_size=BERT_UNCASED_VOCAB)),
    "distilroberta": ModelSpec("DistilRoBERTa", "distilbert/distilroberta-base", "roberta",
                               dict(vocab_size=50265, num_hidden_layers=6, **_ROBERTA)),
    "distilmbert": ModelSpec("DistilmBERT", "distilbert/distilbert-base-multilingual-cased", "distilbert",
                             dict(vocab_size=119547)),
    "bert": ModelSpec("BERT", "google-bert/bert-base-uncased", "bert", dict(vocab_size=BERT_UNCASED_VOCAB)),
    "roberta_base": ModelSpec("RoBERTa", "FacebookAI/roberta-base", "roberta", SPECS["roberta_base"]["config"]),
    "deberta": ModelSpec("DeBERTaV3", "microsoft/deberta-v3-base", "deberta-v2", _DEBERTA),
    "mbert": ModelSpec("mBERT", "google-bert/bert-base-multilingual-cased", "bert", dict(vocab_size=119547)),
    "xlmr": ModelSpec("XLM-RoBERTa", "FacebookAI/xlm-roberta-base", "xlm-roberta", dict(vocab_size=250002, **_ROBERTA)),
    "xlmv": ModelSpec("XLM-V", "facebook/xlm-v-base", "xlm-roberta", dict(vocab_size=901629, **_ROBERTA)),
    "deberta_v3_xsmall": ModelSpec("XSmall", "microsoft/deberta-v3-xsmall", "deberta-v2",
                                   dict(_DEBERTA, hidden_size=384, num_attention_heads=6, intermediate_size=1536)),
    "deberta_v3_small": ModelSpec("Small", "microsoft/deberta-v3-small", "deberta-v2",
                                  dict(_DEBERTA, num_hidden_layers=6)),
    "deberta_v3_large": ModelSpec("Large", "microsoft/deberta-v3-large", "deberta-v2",
                                  dict(_DEBERTA, hidden_size=1024, num_hidden_layers=24, num_attention_heads=16,
                                       intermediate_size=4096)),
    # offline: all-MiniLM-L6-v2 (BERT uncased WordPiece, 30,522 rows, the tokenizer of bert and
    # distilbert above: tokenizer_override=minilm gives their real numbers offline), config read from its folder
    "minilm": ModelSpec("MiniLM-L6 (BERT WordPiece)", "minilm", "", {}),
}
DEFAULT_MODELS = {
    "table2": ["distilbert", "distilroberta", "distilmbert", "bert", "roberta_base", "deberta", "mbert", "xlmr",
               "xlmv"],
    "table3": ["deberta_v3_xsmall", "deberta_v3_small", "deberta", "deberta_v3_large"],
    "table4": ["distilmbert", "mbert", "xlmr", "xlmv"],
}


@dataclass
class Config:
    what: str = option("heaps", "heaps (Fig. 2: unique vs total tokens, Heaps' law fit, PNG), table2 (GLUE x models), "
                       "table3 (DeBERTaV3 sizes, millions removed) or table4 (XNLI subsets).",
                       choices=("heaps", "table2", "table3", "table4"))
    tokenizer: str = option("openai-community/gpt2", "heaps: the tokenizer (the paper: GPT-2's): minilm (offline BERT "
                            "WordPiece), smollm2 (offline GPT-2-style byte-level BPE, 49,152 ids), byte (the tiny "
                            "models' byte tokenizer), a model name of the registry, or any hub id / local folder.")
    models: list = option([], "tables: model names (the registry in embexp/studies/vocab.py, or hub ids); [] = the "
                          "paper's rows of that table.")
    tokenizer_override: str = option("", "tables: count every row with this tokenizer instead of each model's own "
                                     "(offline: minilm is the uncased BERT WordPiece of bert and distilbert, so their "
                                     "rows are the real ones; for other models only the code path is checked).")
    task: str = option("glue", "heaps: task family whose sub-tasks are counted (glue or xnli; table2/3 use glue, "
                       "table4 xnli).")
    subsets: list = option([], "Sub-tasks ([] = the nine GLUE tasks; table4: en, en-de, en-zh, all).")
    splits: list = option(
        ["train", "eval", "test"], "Splits counted: train, eval (the task's evaluation split; MNLI both "
        "validation splits), test (MNLI both test splits; hidden -1 labels are allowed: only counted). "
        "The default is what the paper's numbers need: the authors' run_glue_pema.py counts train, eval "
        "and, under --do_predict, predict (L565-578 @1e9fae5).", choices=("train", "eval", "test"))
    keep_special: bool = option(False, "Also keep the rows of special tokens that never occur (method=pema's default, "
                                "method.keep_special). false: the authors' rule, np.flatnonzero of the counts over "
                                "inputs padded to max_length, i.e. the ids that occur plus pad (the paper's Table 2).")
    source: str = option("auto", "Where rows come from (task.source): auto/hub (the real data), local (data_dir) or "
                         "fixture (offline).")
    data_dir: str = option("", "task.data_dir for source=local.")
    fixture_size: int = option(64, "Rows per split for source=fixture.", ge=1)
    max_samples: int = option(-1, "Keep the first N rows of every counted split (-1: all).", ge=1, also=(-1,))
    max_length: int = option(128, "Truncate each example at this many tokens, as in training (the paper: 128).", ge=1)
    out: Optional[str] = option("outputs/analysis/vocab", "Folder for <what>.md/.json (and heaps_<tokenizer>.png); "
                                "out= (empty) prints only.")


# ---- tokenizers, configs, parameter counts -------------------------------------------------------
@functools.cache
def load_tokenizer(name: str):
    """A tokenizer, loaded once per process: a registry name, minilm or smollm2 (offline), byte, a hub id or folder."""
    from transformers import AutoTokenizer

    from embexp.models import byte_tokenizer, minilm_path, smollm2_path

    if name in MODELS:
        name = MODELS[name].tokenizer
    if name == "byte":
        return byte_tokenizer(encoder=True)
    path = {"minilm": lambda: str(minilm_path()), "smollm2": lambda: str(smollm2_path())}.get(name, lambda: name)()
    try:
        return AutoTokenizer.from_pretrained(path)
    except (OSError, ValueError) as e:
        raise EmbexpError(f"could not load tokenizer '{name}': {str(e).splitlines()[0]}") from None


def model_config(name: str, num_labels: int):
    """The model's transformers config: stored fields for the registry, the offline folder for minilm, else the hub."""
    from transformers import AutoConfig

    from embexp.models import minilm_path

    spec = MODELS.get(name)
    try:
        if spec is not None and spec.model_type:
            return AutoConfig.for_model(spec.model_type, **spec.fields, num_labels=num_labels)
        return AutoConfig.from_pretrained(str(minilm_path()) if name == "minilm" else name, num_labels=num_labels)
    except (OSError, ValueError) as e:
        raise EmbexpError(f"no config for model '{name}' (registry: {', '.join(MODELS)}; else a hub id): "
                          f"{str(e).splitlines()[0]}") from None


def shape_of(config) -> tuple[int, int, int]:
    """(embedding rows, embedding dim, parameters of the sequence-classification model), built on `meta`."""
    import torch
    from transformers import AutoModelForSequenceClassification

    from embexp.run.build import count_params

    with torch.device("meta"):
        model = AutoModelForSequenceClassification.from_config(config)
    rows, dim = model.get_input_embeddings().weight.shape
    return rows, dim, count_params(model)


# ---- data ----------------------------------------------------------------------------------------
def texts(cfg, task_name: str, subset: str, which: str) -> list[tuple[str, ...]]:
    """The encoder text (one string or a pair) of every row of one counted split (``Task.counted_rows``:
    whole splits; a test split's hidden labels are allowed, since its rows are only counted)."""
    from omegaconf import OmegaConf

    from embexp.tasks import TASKS, build_task

    if task_name not in TASKS:
        raise EmbexpError(f"unknown task '{task_name}' (choose from: {', '.join(sorted(TASKS))})")
    tcfg = OmegaConf.merge(OmegaConf.structured(TASKS[task_name].Config), {
        "name": task_name, "subset": subset, "source": cfg.source, "data_dir": cfg.data_dir,
        "fixture_size": cfg.fixture_size})
    task = build_task(tcfg)
    return [task.format(r).text for r in task.counted_rows(which, cfg.max_samples)]


def encode(tok, rows: list[tuple[str, ...]], max_length: int, chunk: int = 4096) -> list[list[int]]:
    """Token ids exactly as training tokenises encoder inputs (text or text pair, truncated), in batches."""
    out: list[list[int]] = []
    for _, same_width in itertools.groupby(rows, key=len):
        same_width = list(same_width)
        for i in range(0, len(same_width), chunk):
            cols = [list(c) for c in zip(*same_width[i:i + chunk])]
            out += tok(*cols, truncation=True, max_length=max_length)["input_ids"]
    return out


class TokenCache:
    """Flat token-id arrays per (tokenizer, task, subset), computed once per analysis run."""

    def __init__(self, cfg):
        self.cfg, self._ids = cfg, {}

    def ids(self, tok_name: str, task_name: str, subset: str) -> np.ndarray:
        key = (tok_name, task_name, subset)
        if key not in self._ids:
            tok = load_tokenizer(tok_name)
            seqs = [s for which in self.cfg.splits
                    for s in encode(tok, texts(self.cfg, task_name, subset, which), self.cfg.max_length)]
            self._ids[key] = np.fromiter(itertools.chain.from_iterable(seqs), dtype=np.int64, count=sum(map(len, seqs)))
        return self._ids[key]

    def kept(self, tok_name: str, task_name: str, subset: str) -> np.ndarray:
        """Sorted ids PEMA keeps (XNLI: union over the languages): those that occur plus pad, and with
        ``keep_special`` every special token (docs/pema.md)."""
        from embexp.tasks.xnli import languages

        parts = languages(subset) if task_name == "xnli" else (subset,)
        used = np.unique(np.concatenate([self.ids(tok_name, task_name, p) for p in parts]))
        tok = load_tokenizer(tok_name)
        always = (set(tok.all_special_ids) if self.cfg.keep_special else {tok.pad_token_id}) - {None}
        return np.union1d(used, np.array(sorted(always), dtype=np.int64))


# ---- Fig. 2 --------------------------------------------------------------------------------------
def growth_curve(ids: np.ndarray, points: int = 60) -> tuple[np.ndarray, np.ndarray]:
    """Unique tokens after the first n tokens, at `points` log-spaced n (vectorised: first occurrences)."""
    if len(ids) == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    _, first = np.unique(ids, return_index=True)
    first.sort()
    n = np.unique(np.geomspace(1, len(ids), points).astype(np.int64))
    return n, np.searchsorted(first, n, side="left")


def heaps_fit(n: np.ndarray, u: np.ndarray) -> dict:
    """Least squares of log U = log K + beta log N."""
    x, y = np.log(np.asarray(n, float)), np.log(np.asarray(u, float))
    beta, logk = np.polyfit(x, y, 1)
    resid = y - (logk + beta * x)
    r2 = 1.0 - float((resid ** 2).sum()) / max(float(((y - y.mean()) ** 2).sum()), 1e-12)
    return {"K": float(np.exp(logk)), "beta": float(beta), "r2": r2}


def heaps(cfg, counter: TokenCache) -> tuple[str, dict]:
    subsets = list(cfg.subsets) or (list(GLUE) if cfg.task == "glue" else ["en"])
    tok = load_tokenizer(cfg.tokenizer)
    vocab = len(tok)
    rows, curves = [], {}
    for s in subsets:
        ids = counter.ids(cfg.tokenizer, cfg.task, s)
        uniq = int(len(np.unique(ids)))
        rows.append({"task": GLUE_LABELS.get(s, s), "total_tokens": int(len(ids)), "unique_tokens": uniq,
                     "vocab_used_pct": 100.0 * uniq / vocab})
        curves[s] = [c.tolist() for c in growth_curve(ids)]
    ends = [(r["total_tokens"], r["unique_tokens"]) for r in rows if r["total_tokens"] > 0]
    pts = ends if len(ends) >= 2 else list(zip(*curves[subsets[0]])) if len(subsets) == 1 else []
    pts = [(a, b) for a, b in pts if a > 0 and b > 0]
    fit = heaps_fit(*zip(*pts)) if len(pts) >= 2 else {}
    title = (f"Unique vs total tokens, {cfg.task} ({', '.join(cfg.splits)}), tokenizer {cfg.tokenizer} (|V| = {vocab})"
             + (f"; Heaps' law U = {fit['K']:.3g} N^{fit['beta']:.3f} (R² {fit['r2']:.3f})" if fit else ""))
    md = markdown(rows, ["task", "total_tokens", "unique_tokens", "vocab_used_pct"], title)
    out = {"tokenizer": cfg.tokenizer, "vocab_size": vocab, "rows": rows, "curves": curves, "heaps_fit": fit}
    if cfg.out:
        out["png"] = str(plot_heaps(Path(cfg.out) / f"heaps_{_slug(cfg.tokenizer)}.png", rows, curves, subsets, fit,
                                    vocab, title))
    return md, out


def plot_heaps(path: Path, rows, curves, subsets, fit, vocab, title) -> Path:
    fig, ax = pyplot().subplots(figsize=(7, 4.5))
    for s, r in zip(subsets, rows):
        n, u = curves[s]
        if len(n):
            line, = ax.plot(n, u, lw=1, alpha=0.6)
            ax.scatter([r["total_tokens"]], [r["unique_tokens"]], color=line.get_color(), zorder=3)
            ax.annotate(r["task"], (r["total_tokens"], r["unique_tokens"]), fontsize=8, xytext=(3, -9),
                        textcoords="offset points")
    if fit:
        xs = np.geomspace(1, max(r["total_tokens"] for r in rows), 100)
        ax.plot(xs, np.minimum(fit["K"] * xs ** fit["beta"], vocab), "k--", lw=1,
                label=f"Heaps: {fit['K']:.3g}·N^{fit['beta']:.3f}")
    ax.axhline(vocab, color="grey", lw=0.8, ls=":", label=f"|V| = {vocab:,}")
    ax.set(xscale="log", yscale="log", xlabel="total tokens", ylabel="unique tokens")
    ax.set_title(title[:90] + ("…" if len(title) > 90 else ""), fontsize=8)
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    save_png(fig, path)
    return path


# ---- Tables 2, 3, 4 ------------------------------------------------------------------------------
def reductions(cfg, counter: TokenCache, models: list[str], task_name: str, subsets: list[str]) -> list[dict]:
    """One record per model x subset: kept rows, embedding rows and dim, parameters, reductions."""
    recs = []
    for m in models:
        tok_name = cfg.tokenizer_override or (MODELS[m].tokenizer if m in MODELS else m)
        for s in subsets:
            rows, dim, n_params = shape_of(model_config(m, num_labels(task_name, s)))
            kept = counter.kept(tok_name, task_name, s)
            if len(kept) and kept[-1] >= rows:
                raise EmbexpError(f"tokenizer '{tok_name}' has ids up to {kept[-1]} but model '{m}' has "
                                  f"{rows} embedding rows")
            removed = rows - len(kept)
            recs.append({"model": m, "label": MODELS[m].label if m in MODELS else m, "subset": s, "tokenizer": tok_name,
                         "kept_rows": int(len(kept)), "embedding_rows": rows, "dim": dim, "n_params": n_params,
                         "removed_params": removed * dim, "embedding_pct": 100.0 * removed / rows,
                         "model_pct": 100.0 * removed * dim / n_params})
    return recs


def num_labels(task_name: str, subset: str) -> int:
    """Outputs of the task head (the paper's N includes the sequence-classification head)."""
    from embexp.tasks.glue import SPECS

    return 3 if task_name == "xnli" else (1 if subset == "stsb" else len(SPECS[subset][1]))


def pivot(recs: list[dict], subsets: list[str], key: str, scale: float = 1.0) -> list[dict]:
    labels = {s: GLUE_LABELS.get(s, "All" if s == "all" else s) for s in subsets}
    out = []
    for m in dict.fromkeys(r["model"] for r in recs):
        row = {"Model": next(r["label"] for r in recs if r["model"] == m)}
        vals = [r[key] * scale for s in subsets for r in recs if r["model"] == m and r["subset"] == s]
        row.update({labels[s]: v for s, v in zip(subsets, vals)})
        if len(vals) > 1 and all(s in GLUE for s in subsets):
            row["Mean"] = float(np.mean(vals))
        out.append(row)
    return out


def table_cells(what: str = "table2", **fields) -> list[dict]:
    """The records behind Table 2, 3 or 4 (one per model x sub-task: kept rows, embedding rows,
    parameters, reductions) for a :class:`Config` with these fields, nothing printed or written
    (the reproduction ledger reads them: report/ledger)."""
    from omegaconf import OmegaConf

    cfg = OmegaConf.merge(OmegaConf.structured(Config), {**fields, "what": what, "out": ""})
    return cells(cfg, TokenCache(cfg))[3]


def cells(cfg, counter: TokenCache) -> tuple[list[str], str, list[str], list[dict]]:
    """(models, task family, sub-tasks, records) of a table config."""
    models = list(cfg.models) or DEFAULT_MODELS[cfg.what]
    task_name = "xnli" if cfg.what == "table4" else "glue"
    subsets = list(cfg.subsets) or list(XNLI if task_name == "xnli" else GLUE)
    return models, task_name, subsets, reductions(cfg, counter, models, task_name, subsets)


def table(cfg, counter: TokenCache) -> tuple[str, dict]:
    models, task_name, subsets, recs = cells(cfg, counter)
    cols = ["Model"] + [GLUE_LABELS.get(s, "All" if s == "all" else s) for s in subsets]
    cols += ["Mean"] if task_name == "glue" and len(subsets) > 1 else []
    where = f"{task_name} ({', '.join(cfg.splits)}; source={cfg.source})"
    if cfg.what == "table3":
        for r in recs:  # the paper's Table 3 rows are sizes
            r["label"] = {"deberta": "Base"}.get(r["model"], r["label"])
        md = markdown(pivot(recs, subsets, "removed_params", 1e-6), cols,
                      f"Table 3: reduction in model parameters (millions), {where}")
    else:
        n = {"table2": "Table 2", "table4": "Table 4"}[cfg.what]
        md = (markdown(pivot(recs, subsets, "embedding_pct"), cols,
                       f"{n}: reduction in embedding parameters (%), {where}") + "\n"
              + markdown(pivot(recs, subsets, "model_pct"), cols, f"{n}: reduction in model parameters (%), {where}"))
    return md, {"records": recs}


def _slug(name: str) -> str:
    return name.replace("/", "_").replace(":", "_")


def run(cfg) -> dict:
    t0 = time.perf_counter()
    counter = TokenCache(cfg)
    md, out = heaps(cfg, counter) if cfg.what == "heaps" else table(cfg, counter)
    out["seconds"] = time.perf_counter() - t0
    print(md)
    if cfg.out:
        stem = Path(cfg.out) / (f"heaps_{_slug(cfg.tokenizer)}" if cfg.what == "heaps" else cfg.what)
        stem.parent.mkdir(parents=True, exist_ok=True)
        stem.with_suffix(".md").write_text(md)
        stem.with_suffix(".json").write_text(json.dumps({"config": _plain(cfg), **out}, indent=1))
        print(f"wrote {stem}.md, {stem}.json" + (f", {out['png']}" if "png" in out else ""))
    return out


def _plain(cfg) -> dict:
    from omegaconf import OmegaConf

    return OmegaConf.to_container(cfg) if OmegaConf.is_config(cfg) else dict(vars(cfg))
