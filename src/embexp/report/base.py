"""The fields every report module's ``Config`` shares: which table, where the runs are, where the
tables go, and the debug preset that moves both. Each module's ``Config`` inherits ``ReportConfig``
and redeclares a field where its default, help text or choices differ (its ``table`` always does).
"""

from __future__ import annotations

from dataclasses import dataclass

from embexp.core.config import option


@dataclass
class ReportConfig:
    table: str = option("all", "Which table (the module's TABLES), or all.")
    runs: str = option("", "Root (or glob) of the run directories ('' = outputs, or the debug preset's output_root).")
    out: str = option(
        "", "Folder for the tables ('' = tables/<paper>, or <output_root>/tables/<paper> with debug=...).")
    debug: str = option(
        "", "A conf/debug preset: read its output_root (smoke: outputs/smoke) and write tables under it.")
    strict: bool = option(False, "Stop in one line on a run record that cannot be read (a truncated metrics.json or "
                                 "status.json); false: name it in one warning line and leave the run out.")
