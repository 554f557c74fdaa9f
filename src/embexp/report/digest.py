"""The claims' run records, committed: one check's runs under ``runs/<folder>`` over its digest
``records/<folder>.jsonl`` (report/claims.py reads them; ``python -m embexp.report paper=claims``).

A run enters a check only when its config is one the check's runs have: ``run_config`` in report/claims.yaml
(as src/embexp/sweep/papers/claims.py writes them: the model, the task and its rows, the budget, the methods
compared). Any other run (another model, a ``debug=smoke`` run, other rows) and any record that is not a
run's (a digest line without its metrics or config) is skipped, and one warning line names it and why; the same
holds for a digest's lines. A record under ``runs`` replaces the digest's line of the same run (keyed by its path
under the folder); runs only the digest holds are kept.

Rendering the page never writes a digest: where the runs would change one, a warning line says which lines
(added, replaced, removed, by run key). ``write_digests=true`` is the step that writes them (``make claims``),
and says the same of each digest it writes.
"""

from __future__ import annotations

import json
from pathlib import Path

from embexp import EmbexpError
from embexp.core.cli import warn
from embexp.core.records import collect_runs, write_digest

# What a digest line (and a run record read into a check) holds, at the least: (key, its type, how it reads)
SHAPE = (("run", str, "run (its path under the runs folder)"), ("method", str, "method"), ("seed", int, "seed"),
         ("task", str, "task"), ("subset", str, "subset"), ("config", dict, "config (the run's config.yaml)"),
         ("metrics", dict, "metrics"))
CONFIG = (("model", dict), ("task", dict), ("method", dict), ("trainer", dict))
EXPECTED = ("one JSON object a line, a run's record as `write_digests=true` writes it: "
            + ", ".join(t for _, _, t in SHAPE) + "; config with model, task, method and trainer (its lr a number); "
            "metrics a mapping of numbers")


def check_folders(cfg, defaults: dict) -> None:
    """Before any work: a ``compare`` the command line names is a folder; ``records`` is a folder (one that does
    not exist yet only where write_digests=true will make it, or the default, which a new checkout may lack)."""
    if cfg.compare != defaults["compare"] and not Path(cfg.compare).is_dir():
        raise EmbexpError(f"compare={cfg.compare} is not a folder (the comparison's rendered tables: "
                          f"{defaults['compare']}, which make compare writes)")
    records = Path(cfg.records) if cfg.records else None
    if records and records.exists() and not records.is_dir():
        raise EmbexpError(f"records={cfg.records} is a file: records names the folder of the digests "
                          f"(<runs folder>.jsonl, e.g. {defaults['records']})")
    if records and not records.exists() and cfg.records != defaults["records"] and not cfg.write_digests:
        raise EmbexpError(f"records={cfg.records} does not exist (the folder of the digests, e.g. "
                          f"{defaults['records']}; write_digests=true makes it)")
    if cfg.write_digests and not cfg.records:
        raise EmbexpError("write_digests=true needs records= a folder for the digests (e.g. docs/claims)")


def shape_error(rec) -> str:
    """'' for a record the checks can read, else what it lacks."""
    if not isinstance(rec, dict):
        return f"a JSON {type(rec).__name__}, not an object"
    for key, typ, _ in SHAPE:
        if key not in rec:
            return f"no '{key}'"
        if not isinstance(rec[key], typ) or (typ is int and isinstance(rec[key], bool)):
            return f"'{key}' is {json.dumps(rec[key])[:40]}, not a {typ.__name__}"
    for key, typ in CONFIG:
        if not isinstance(rec["config"].get(key), typ):
            return f"no config.{key} mapping"
    lr = rec["config"]["trainer"].get("lr")
    number = lambda v: v is None or (isinstance(v, (int, float)) and not isinstance(v, bool))  # noqa: E731
    bad = [k for k, v in rec["metrics"].items() if not number(v)]
    if bad:
        return f"metrics.{bad[0]} is not a number"
    if lr is None or not number(lr):
        return "config.trainer.lr is not a number"
    for key, typ in (("curve", list), ("train", dict)):
        if rec.get(key) is not None and not isinstance(rec[key], typ):
            return f"'{key}' is not a {typ.__name__}"
    return ""


def read(path: Path) -> list[tuple[int, dict]]:
    """(line number, record) of every line of a digest; a line that is not a run's record is one error line
    naming the file, the line and what a line holds."""
    try:
        data = path.read_bytes()
    except OSError as e:
        raise EmbexpError(f"cannot read the digest {path}: {e.strerror or e}") from None
    out, seen = [], {}
    for i, raw in enumerate(data.split(b"\n"), 1):
        if not raw.strip():
            continue
        try:
            rec = json.loads(raw.decode("utf-8"))
        except UnicodeDecodeError:
            raise EmbexpError(f"{path}:{i}: not UTF-8 text (expected {EXPECTED})") from None
        except ValueError as e:
            raise EmbexpError(f"{path}:{i}: not JSON ({str(e).splitlines()[0]}; expected {EXPECTED})") from None
        why = shape_error(rec)
        if why:
            raise EmbexpError(f"{path}:{i}: {why} (expected {EXPECTED})")
        if rec["run"] in seen:
            raise EmbexpError(f"{path}:{i}: the run '{rec['run']}' again (line {seen[rec['run']]}): one line a run")
        seen[rec["run"]] = i
        out.append((i, rec))
    return out


def value_at(config: dict, dotted: str):
    node = config
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return KeyError
        node = node[part]
    return node


def mismatch(config: dict, alternative: dict) -> list[str]:
    """The fields where a run's config is not the alternative's: 'model.name is tiny_bert (the check's: minilm)'."""
    out = []
    for key, want in alternative.items():
        got = value_at(config, key)
        if got == want or (isinstance(want, list) and not isinstance(got, list) and got in want):
            continue
        shown = "missing" if got is KeyError else f"is {json.dumps(got)}"
        wanted = " or ".join(json.dumps(w) for w in want) if isinstance(want, list) and not isinstance(got, list) \
            else json.dumps(want)
        out.append(f"{key} {shown} (the check's runs: {wanted})")
    return out


def protocol_error(rec: dict, check: dict) -> str:
    """'' for a run of the check's protocol (claims.yaml run_config), else the fields that differ, from the
    alternative it is nearest."""
    alternatives = check.get("run_config") or [{}]
    misses = min((mismatch(rec["config"], alt) for alt in alternatives), key=len)
    return "; ".join(misses[:3]) + (f"; {len(misses) - 3} more" if len(misses) > 3 else "")


def line(rec: dict) -> str:
    return json.dumps(rec, sort_keys=True, separators=(",", ":"))


def fresh_runs(root: Path, check: dict, strict: bool) -> dict[str, dict]:
    """The finished runs under root that are the check's, by their path under it; each other is named."""
    out = {}
    for r in collect_runs(str(root), strict):
        where = r.pop("run_dir")
        r["run"] = Path(where).resolve().relative_to(root.resolve()).as_posix()
        why = shape_error(r) or protocol_error(r, check)
        if why:
            warn(f"skipped the run {where} for the check '{check['name']}': {why}")
            continue
        out[r["run"]] = r
    return out


def claim_runs(check: dict, cfg, writes: list) -> list[dict]:
    """One check's runs (``check['runs']`` the folder): the runs under ``cfg.runs/<folder>`` that are the check's
    over the lines of its digest that are. A change to the digest is named; under ``cfg.write_digests`` its write
    joins ``writes``, which the page runs once every check has read its records (nothing half-written)."""
    folder = check["runs"]
    root = Path(cfg.runs) / folder
    fresh = fresh_runs(root, check, cfg.strict)
    digest = Path(cfg.records) / f"{folder}.jsonl" if cfg.records else None
    old = {rec["run"]: (i, rec) for i, rec in read(digest)} if digest and digest.is_file() else {}
    runs = {}
    for key, (i, rec) in old.items():
        why = protocol_error(rec, check)
        if why:
            warn(f"skipped {digest}:{i} ({key}) for the check '{check['name']}': {why}")
        else:
            runs[key] = rec
    runs.update(fresh)
    if digest:
        write = change(digest, {k: line(r) for k, (_, r) in old.items()}, [runs[k] for k in sorted(runs)],
                       cfg.write_digests)
        writes += [write] if write else []
    if not runs:  # a new checkout without the digest: the page can only say pending
        warn(f"no run records under {root} and no digest {digest}: its checks render as pending")
    return [runs[k] for k in sorted(runs)]


def change(digest: Path, old: dict[str, str], runs: list[dict], write: bool):
    """Name the lines the runs change in the digest (by run key); where asked, return the write that makes it."""
    new = {r["run"]: line(r) for r in runs}
    added = [k for k in new if k not in old]
    replaced = [k for k in new if k in old and new[k] != old[k]]
    removed = [k for k in old if k not in new]
    if not (added or replaced or removed):
        return None
    parts = [f"{len(keys)} {what} ({', '.join(keys)})" for what, keys in
             (("added", added), ("replaced", replaced), ("removed", removed)) if keys]
    summary = f"{len(old)} -> {len(new)} lines: {'; '.join(parts)}"
    if not write:
        warn(f"{digest} left as it is; the runs would change it, {summary} (write_digests=true writes it)")
        return None

    def written() -> None:
        write_digest(digest, runs)
        print(f"(written: {digest}, {summary})")
    return written
