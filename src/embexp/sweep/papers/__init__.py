"""The paper tables, one module per paper (``tinyte.py``: ``tinyte/table1``, ...): each table is a function
that yields its commands in order, registered by ``embexp.sweep.runner.table`` under ``<paper>/<function>``."""
