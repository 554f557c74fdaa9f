"""python -m embexp.doctor: the GPU check (make gpu-check); see embexp/doctor/checkup.py."""

from embexp.doctor.checkup import main

main()
