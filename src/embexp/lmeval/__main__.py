"""python -m embexp.lmeval: an embexp run on lm-evaluation-harness's tasks; see embexp/lmeval/__init__.py."""

from embexp.lmeval import main

main()
