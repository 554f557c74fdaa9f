"""The evidence behind the TinyTE generation settings and ROUGE variant (docs/tasks_tinyte.md).

    python scripts/tinyte_eval_evidence.py                          # /work/shared/data, SmolLM2's tokenizer (offline)
    python scripts/tinyte_eval_evidence.py --data /path/to/data --tokenizer smollm2

Reads real rows in the hub schema (``<data>/wmt16/cs-en/test.jsonl``: newstest2016, 2,999 rows;
``<data>/cnn_dailymail/3.0.0/test.jsonl``; ``<data>/tatsu-lab/alpaca/train_sample2000.jsonl``) and prints:

1. WMT16: reference lengths in TER's words (sacreBLEU's TER: whitespace split) and in tokens; the
   mean hypothesis length the paper's base-model TERs require, and the largest corpus TER a
   generation budget of M new tokens allows. Per sentence TER's edits are at most max(|h|, |r|)
   (substitute the shorter, insert or delete the rest), so corpus TER <= sum max(|h|,|r|) / sum |r|:
   a TER of T% needs hypotheses of at least (T/100 - 1) x the reference words on average.
2. CNN/DM: highlight (reference) lengths in words and tokens, and the share longer than each budget;
   lead-3 (the article's first three sentences) scored with sentence-level rougeL and summary-level
   rougeLsum, to show the scale of the two variants on real rows.
3. Alpaca: output lengths in tokens; the paper's "repeating the question" baseline (R-L 18.58, its
   Table 8) scored with both variants, and how many reference outputs span several lines.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

BUDGETS = (64, 128, 256, 512)
PAPER_BASE_TER = {"Gemma-2": 734.73, "Qwen-2.5": 243.38, "Llama-3.1": 149.84}  # tinyte.md Tables 1, 11


def rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def stats(xs) -> str:
    xs = np.asarray(xs, float)
    return (f"mean {xs.mean():.1f}, median {np.median(xs):.0f}, p95 {np.percentile(xs, 95):.0f}, "
            f"p99 {np.percentile(xs, 99):.0f}, max {xs.max():.0f}")


def load_tokenizer(name: str):
    from transformers import AutoTokenizer

    from embexp import models

    path = {"smollm2": models.smollm2_path, "minilm": models.minilm_path}.get(name)
    return AutoTokenizer.from_pretrained(str(path()) if path else name)


def wmt16(data: Path, tok) -> None:
    refs = [r["translation"]["en"].strip() for r in rows(data / "wmt16" / "cs-en" / "test.jsonl")]
    words = np.array([len(r.split()) for r in refs])
    toks = np.array([len(tok(" " + r, add_special_tokens=False)["input_ids"]) for r in refs])
    tpw = toks.sum() / words.sum()
    print(f"## WMT16 cs-en newstest2016: {len(refs)} references")
    print(f"- words (TER's tokens): {stats(words)}")
    print(f"- tokens: {stats(toks)}; {tpw:.3f} tokens per word")
    for name, ter in PAPER_BASE_TER.items():
        need = (ter / 100 - 1) * words.mean()
        print(f"- {name} base TER {ter}: mean hypothesis >= {need:.0f} words ~ {need * tpw:.0f} tokens")
    for m in BUDGETS:
        h = m / tpw  # every hypothesis runs to the budget, in English words
        print(f"- budget {m} tokens: hypotheses <= {h:.0f} words, corpus TER <= {100 * np.maximum(h, words).sum() / words.sum():.0f}%")


def lead3(article: str) -> str:
    from embexp.tasks.cnndm import split_sentences

    return "\n".join(split_sentences(article)[:3])


def cnndm(data: Path, tok) -> None:
    from embexp.tasks.cnndm import rouge_scores

    rs = rows(data / "cnn_dailymail" / "3.0.0" / "test.jsonl")
    refs = [r["highlights"] for r in rs]
    words = np.array([len(r.split()) for r in refs])
    toks = np.array([len(tok(" " + r, add_special_tokens=False)["input_ids"]) for r in refs])
    print(f"\n## CNN/DM 3.0.0 test: {len(refs)} highlights")
    print(f"- words: {stats(words)}")
    print(f"- tokens: {stats(toks)}")
    print("- longer than the budget: " + ", ".join(f"{m}: {100 * (toks > m).mean():.1f}%" for m in BUDGETS))
    m = rouge_scores(refs, [lead3(r["article"]) for r in rs])
    print(f"- lead-3: rougeL {m['rougeL']:.2f}, rougeLsum {m['rougeLsum']:.2f} (+- {m['rougeLsum_stderr']:.2f}), "
          f"rouge1 {m['rouge1']:.2f}, rouge2 {m['rouge2']:.2f}")


def alpaca(data: Path, tok) -> None:
    from embexp.tasks.cnndm import rouge_scores

    rs = rows(data / "tatsu-lab" / "alpaca" / "train_sample2000.jsonl")
    refs = [r["output"] for r in rs]
    toks = np.array([len(tok(r, add_special_tokens=False)["input_ids"]) for r in refs])
    print(f"\n## Alpaca: {len(rs)} rows (random sample of the 52,002)")
    print(f"- output tokens: {stats(toks)}")
    print("- longer than the budget: " + ", ".join(f"{m}: {100 * (toks > m).mean():.1f}%" for m in BUDGETS))
    multiline = 100 * np.mean([len(r.strip().splitlines()) > 1 for r in refs])
    print(f"- outputs spanning several lines: {multiline:.1f}%; "
          f"several sentences (our splitter): {100 * np.mean([len(rouge_split(r)) > 1 for r in refs]):.1f}%")
    for label, hyps in (("instruction", [r["instruction"] for r in rs]),
                        ("instruction + input", [(r["instruction"] + " " + r["input"]).strip() for r in rs])):
        for stem in (True, False):
            m = rouge_scores(refs, hyps, stemmer=stem)
            print(f"- repeating the {label} (stemming {'on' if stem else 'off'}): rougeL {m['rougeL']:.2f} "
                  f"(+- {m['rougeL_stderr']:.2f}), rougeLsum {m['rougeLsum']:.2f}")


def rouge_split(text: str) -> list[str]:
    from embexp.tasks.cnndm import split_sentences

    return split_sentences(text)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default="/work/shared/data", help="root of the hub-schema JSONL files")
    ap.add_argument("--tokenizer", default="smollm2", help="smollm2 (offline), minilm, or a hub id / folder")
    a = ap.parse_args()
    data = Path(a.data)
    tok = load_tokenizer(a.tokenizer)
    print(f"tokenizer: {a.tokenizer}\n")
    wmt16(data, tok)
    cnndm(data, tok)
    alpaca(data, tok)


if __name__ == "__main__":
    main()
