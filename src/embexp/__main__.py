"""`python -m embexp` prints every entry point with one line on what it does."""

# (module, arguments, what it does); tests/test_readme.py checks that every runnable module is here.
ENTRY_POINTS = (
    ("train", "method=... model=... task=... [overrides]", "train and evaluate one run (Hydra; -m for a sweep)"),
    ("eval", "run_dir=DIR", "rebuild a saved run and evaluate it again"),
    ("sweep", "<paper>/<table> [--dry-run]", "the commands behind one paper table (what make <paper>_table runs)"),
    ("report", "paper=<paper> table=<name>", "render a paper's tables from finished runs (--help lists them)"),
    ("analyze", "<analysis> [key=value ...]", "analyses that compute with models or data (--help lists them)"),
    ("judge", "run_dir=DIR judge.model=...", "score a finished run's generations with a judge model"),
    ("lmeval", "run_dir=DIR tasks=[sst2,...]", "a saved run on lm-evaluation-harness's tasks ('.[lmeval]')"),
    ("doctor", "[key=value ...]", "does this machine run embexp right and fast (make gpu-check)"),
    ("xcheck", "authors=DIR [only=...]", "each method's module against the authors' own code (make xcheck)"),
)


def main() -> None:
    print("embexp entry points:")
    for name, args, what in ENTRY_POINTS:
        print(f"  python -m embexp.{name:<8} {args:<42} {what}")


if __name__ == "__main__":
    main()
