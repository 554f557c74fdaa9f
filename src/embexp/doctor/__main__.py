"""python -m embexp.doctor: the GPU check (make gpu-check); see embexp/doctor/__init__.py."""

from embexp.doctor import main

main()
