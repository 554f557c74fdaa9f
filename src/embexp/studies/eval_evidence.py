"""The evidence behind the TinyTE generation budgets and ROUGE variants (docs/tasks_tinyte.md).

    python -m embexp.analyze eval_evidence                              # data_dir=$EMBEXP_DATA, SmolLM2's tokenizer
    python -m embexp.analyze eval_evidence data_dir=DIR tokenizer=minilm

Reads real rows in the hub schema under ``data_dir`` (``FILES``) and prints the WMT16 (newstest2016)
reference lengths in TER's words and in tokens, the hypothesis lengths the paper's base-model TERs
require and the largest corpus TER each generation budget allows; CNN/DM highlight lengths and lead-3
scored by rougeL and rougeLsum; Alpaca output lengths and the "repeating the question" baseline (its
Table 8) scored by both variants. The argument from these numbers to the budgets: docs/tasks_tinyte.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from embexp import EmbexpError
from embexp.core.config import option
from embexp.studies import printed_cell
from embexp.studies.vocab import load_tokenizer  # smollm2, minilm (offline), a hub id or folder
from embexp.tasks.base import read_jsonl
from embexp.tasks.metrics import rouge_scores, split_sentences

# the base models whose TER the TinyTE paper prints (Table 1: BLEU-4 / TER, report/ledger/printed/tinyte.csv)
BASE_TER = {"Gemma-2": "gemma2", "Qwen-2.5": "qwen25", "Llama-3.1": "llama31"}
FILES = {"wmt16": "wmt16/cs-en/test.jsonl", "cnndm": "cnn_dailymail/3.0.0/test.jsonl",
         "alpaca": "tatsu-lab/alpaca/train_sample2000.jsonl"}


@dataclass
class Config:
    data_dir: str = option("${oc.env:EMBEXP_DATA,''}", "Root of the hub-schema JSONL files (wmt16/cs-en/test.jsonl, "
                           "cnn_dailymail/3.0.0/test.jsonl, tatsu-lab/alpaca/train_sample2000.jsonl); default: the "
                           "environment variable EMBEXP_DATA.")
    tokenizer: str = option("smollm2", "Tokenizer that counts tokens: smollm2 (offline), minilm (offline), "
                            "or a hub id / folder.")
    budgets: list = option([64, 128, 256, 512], "Generation budgets (new tokens) to compare the lengths with.")


def stats(xs) -> str:
    xs = np.asarray(xs, float)
    return (f"mean {xs.mean():.1f}, median {np.median(xs):.0f}, p95 {np.percentile(xs, 95):.0f}, "
            f"p99 {np.percentile(xs, 99):.0f}, max {xs.max():.0f}")


def n_tokens(tok, texts: list[str], space: bool = True) -> np.ndarray:
    """Tokens of each text without special tokens (``space``: with a leading space, as a continuation)."""
    return np.array([len(tok((" " if space else "") + t, add_special_tokens=False)["input_ids"]) for t in texts])


def over_budget(toks: np.ndarray, budgets) -> str:
    return "- longer than the budget: " + ", ".join(f"{m}: {100 * (toks > m).mean():.1f}%" for m in budgets)


def wmt16(rows: list[dict], tok, budgets) -> dict:
    refs = [r["translation"]["en"].strip() for r in rows]
    words = np.array([len(r.split()) for r in refs])
    toks = n_tokens(tok, refs)
    tpw = toks.sum() / words.sum()
    print(f"## WMT16 cs-en newstest2016: {len(refs)} references")
    print(f"- words (TER's tokens): {stats(words)}")
    print(f"- tokens: {stats(toks)}; {tpw:.3f} tokens per word")
    out = {"references": len(refs), "mean_words": float(words.mean()), "tokens_per_word": float(tpw), "max_ter": {}}
    for name, model in BASE_TER.items():
        ter = float(printed_cell("tinyte", f"tinyte.t1.{model}.base.wmt16").split("/")[1])
        need = (ter / 100 - 1) * words.mean()
        print(f"- {name} base TER {ter}: mean hypothesis >= {need:.0f} words ~ {need * tpw:.0f} tokens")
    for m in budgets:
        h = m / tpw  # every hypothesis runs to the budget, in English words
        out["max_ter"][m] = float(100 * np.maximum(h, words).sum() / words.sum())
        print(f"- budget {m} tokens: hypotheses <= {h:.0f} words, corpus TER <= {out['max_ter'][m]:.0f}%")
    return out


def cnndm(rows: list[dict], tok, budgets) -> dict:
    refs = [r["highlights"] for r in rows]
    words = np.array([len(r.split()) for r in refs])
    toks = n_tokens(tok, refs)
    print(f"\n## CNN/DM 3.0.0 test: {len(refs)} highlights")
    print(f"- words: {stats(words)}")
    print(f"- tokens: {stats(toks)}")
    print(over_budget(toks, budgets))
    m = rouge_scores(refs, ["\n".join(split_sentences(r["article"])[:3]) for r in rows])  # lead-3
    print(f"- lead-3: rougeL {m['rougeL']:.2f}, rougeLsum {m['rougeLsum']:.2f} (+- {m['rougeLsum_stderr']:.2f}), "
          f"rouge1 {m['rouge1']:.2f}, rouge2 {m['rouge2']:.2f}")
    return {"highlights": len(refs), "max_tokens": int(toks.max()), "lead3": m}


def alpaca(rows: list[dict], tok, budgets) -> dict:
    refs = [r["output"] for r in rows]
    toks = n_tokens(tok, refs, space=False)
    print(f"\n## Alpaca: {len(rows)} rows (random sample of the 52,002)")
    print(f"- output tokens: {stats(toks)}")
    print(over_budget(toks, budgets))
    multiline = 100 * np.mean([len(r.strip().splitlines()) > 1 for r in refs])
    print(f"- outputs spanning several lines: {multiline:.1f}%; "
          f"several sentences (our splitter): {100 * np.mean([len(split_sentences(r)) > 1 for r in refs]):.1f}%")
    out = {"rows": len(rows), "multiline": float(multiline), "repeat": {}}
    for label, hyps in (("instruction", [r["instruction"] for r in rows]),
                        ("instruction + input", [(r["instruction"] + " " + r["input"]).strip() for r in rows])):
        for stem in (True, False):
            m = out["repeat"][(label, stem)] = rouge_scores(refs, hyps, stemmer=stem)
            print(f"- repeating the {label} (stemming {'on' if stem else 'off'}): rougeL {m['rougeL']:.2f} "
                  f"(+- {m['rougeL_stderr']:.2f}), rougeLsum {m['rougeLsum']:.2f}")
    return out


def run(cfg: Config) -> dict:
    if not cfg.data_dir:
        raise EmbexpError("eval_evidence needs data_dir: set EMBEXP_DATA or pass data_dir=DIR "
                          f"(the root holding {', '.join(FILES.values())})")
    root = Path(cfg.data_dir).expanduser()
    missing = [p for p in FILES.values() if not (root / p).is_file()]
    if missing:
        raise EmbexpError(f"data_dir '{root}' has no {', '.join(missing)} (data_dir=DIR or EMBEXP_DATA: the root of "
                          "the hub-schema files)")
    rows = {name: read_jsonl(root / p) for name, p in FILES.items()}
    tok = load_tokenizer(cfg.tokenizer)
    budgets = [int(m) for m in cfg.budgets]
    print(f"tokenizer: {cfg.tokenizer}\n")
    return {"wmt16": wmt16(rows["wmt16"], tok, budgets), "cnndm": cnndm(rows["cnndm"], tok, budgets),
            "alpaca": alpaca(rows["alpaca"], tok, budgets)}
