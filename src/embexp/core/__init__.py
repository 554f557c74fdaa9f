"""Plumbing shared by every entry point: config schemas, plugin registries, the CLI path, run records."""
