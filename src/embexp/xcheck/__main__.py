"""python -m embexp.xcheck: each method's module against the authors' own code; see embexp/xcheck/__init__.py."""

import sys

from embexp.xcheck import main

sys.exit(main(sys.argv[1:]))
