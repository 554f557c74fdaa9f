"""The machine check, ``python -m embexp.doctor`` (``make gpu-check``): the runner is ``checkup.py``; each
check is a module of its own (env, numerics, memory, speed, fsdp) and ``report.py`` writes the report."""
