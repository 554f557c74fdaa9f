"""`python -m embexp` prints the entry points."""

print(
    "embexp entry points:\n"
    "  python -m embexp.train   method=... model=... task=... [overrides]   train + evaluate one run\n"
    "  python -m embexp.eval    run_dir=DIR                                  re-evaluate a saved run\n"
    "  python -m embexp.analyze <analysis> ...                                analyses behind the tables\n"
    "  python -m embexp.report  ...                                           render tables from run records"
)
