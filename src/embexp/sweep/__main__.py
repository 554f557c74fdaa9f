from embexp.sweep import entry

entry()
