from embexp.sweep.runner import entry

entry()
