"""Token-counting throughput of PEMA's setup (embexp.methods.pema.count_tokens), against a plain
``collections.Counter`` over the same ids measured in the same run.

    python scripts/bench_pema_count.py                     # 100k sequences, ~7.4M tokens, BERT-sized vocab
    python scripts/bench_pema_count.py --sequences 400000 --vocab 250002

The input is what ``Method.setup`` receives: a Python list of lists of token ids (lengths uniform in
[16, 128], ids Zipf-distributed over the vocabulary, fixed seed). Reported: the median of --repeats
runs, in tokens per second.
"""

from __future__ import annotations

import argparse
import collections
import itertools
import statistics
import time

import numpy as np

from embexp.methods.pema import count_tokens


def make_ids(n: int, vocab: int, seed: int = 0) -> list[list[int]]:
    rng = np.random.default_rng(seed)
    lengths = rng.integers(16, 129, size=n)
    flat = (rng.zipf(1.2, size=int(lengths.sum())) - 1) % vocab
    return [a.tolist() for a in np.split(flat, np.cumsum(lengths)[:-1])]


def timed(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sequences", type=int, default=100_000)
    p.add_argument("--vocab", type=int, default=30_522)
    p.add_argument("--repeats", type=int, default=5)
    a = p.parse_args()
    seqs = make_ids(a.sequences, a.vocab)
    n = sum(map(len, seqs))
    counts = count_tokens(seqs, a.vocab)
    ref = collections.Counter(itertools.chain.from_iterable(seqs))
    assert all(counts[k] == v for k, v in ref.items()) and counts.sum() == n, "count_tokens disagrees with Counter"
    t = timed(lambda: count_tokens(seqs, a.vocab), a.repeats)
    t_ref = timed(lambda: collections.Counter(itertools.chain.from_iterable(seqs)), max(1, a.repeats // 2))
    print(f"{a.sequences} sequences, {n:,} tokens, vocab {a.vocab:,}, {int(np.count_nonzero(counts)):,} distinct ids")
    print(f"count_tokens         {t * 1e3:8.1f} ms   {n / t / 1e6:7.1f} M tokens/s")
    print(f"collections.Counter  {t_ref * 1e3:8.1f} ms   {n / t_ref / 1e6:7.1f} M tokens/s   (reference)")
    print(f"speed-up {t_ref / t:.1f}x")


if __name__ == "__main__":
    main()
