"""`python -m embexp` prints the entry points."""

print(
    "embexp entry points:\n"
    "  python -m embexp.train   method=... model=... task=... [overrides]   train + evaluate one run\n"
    "  python -m embexp.eval    run_dir=DIR                                  re-evaluate a saved run\n"
    "  python -m embexp.lmeval  run_dir=DIR tasks=[sst2,...]                 "
    "a saved run on lm-evaluation-harness's tasks (pip install -e '.[lmeval]')\n"
    "  python -m embexp.analyze <analysis> ...                                "
    "analyses that compute with models or data\n"
    "  python -m embexp.report  paper=<paper> table=<name> ...                "
    "render a paper's tables from run records (--help)\n"
    "  python -m embexp.doctor  [key=value ...]                               "
    "does this machine run embexp right and fast (make gpu-check)"
)
