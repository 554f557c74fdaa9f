"""Resumable checkpoints of a run (``trainer.save_every``), no pickles.

``<run_dir>/checkpoint/`` holds ``state.safetensors`` (the trainable tensors, the optimizer moments, the
RNG states, the kept best state; its header names the step) and ``meta.json`` (step, strategy, parameter
groups, Python and NumPy RNG, the result so far). A checkpoint is written whole by the main process (under
FSDP every process first gathers the shards) into ``checkpoint.tmp``, then rotated into place (latest ->
``checkpoint.prev``, tmp -> latest, the older prev removed), so a kill at any point leaves at least one whole
checkpoint. A failed write, an unreadable checkpoint and a file at a checkpoint's name: docs/running.md, "Runs
that stop".
"""

from __future__ import annotations

import errno
import json
import logging
import os
import random
import shutil
from dataclasses import asdict
from pathlib import Path

import numpy as np
import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import save_file

from embexp import EmbexpError
from embexp.core.records import note_checkpoint, os_error
from embexp.run import sharding

log = logging.getLogger("embexp")
# what an unreadable checkpoint raises (a missing or truncated file, bad JSON, a tensor of another shape)
UNREADABLE = (OSError, ValueError, KeyError, IndexError, TypeError, RuntimeError, SafetensorError)


class Checkpoint:
    """The checkpoint of one Trainer: ``directory`` (None: the run keeps none), written under ``strategy``
    (ddp or fsdp), of the trained tensors ``names`` / ``params`` (``shapes``: as the method has them)
    and their ``optimizer``."""

    def __init__(self, directory: Path | None, acc, strategy: str, names: list[str], params: list, shapes: list,
                 optimizer):
        self.dir, self.acc, self.strategy = directory, acc, strategy
        self.names, self.params, self.shapes, self.optimizer = names, params, shapes, optimizer
        self.prev = directory.with_name(directory.name + ".prev") if directory is not None else None
        self.latest_bad = False  # the latest could not be read: the next save replaces it, prev stays
        if directory is not None:
            only_folders(directory)

    def exists(self) -> bool:
        return self.dir is not None and any((d / "meta.json").is_file() for d in (self.dir, self.prev))

    def kept(self) -> str:
        """What a failed run leaves, for its one error line."""
        if not self.exists():
            return "no checkpoint had been written"
        return f"the last checkpoint ({self.dir if (self.dir / 'meta.json').is_file() else self.prev}) is kept"

    def save(self, step: int, result, best_state: dict | None) -> None:
        """Whole tensors, written by the main process; sharded tensors are gathered first, by every
        process (so a checkpoint is the same files under either strategy)."""
        if self.dir is None or not (self.acc.is_main_process or self.strategy == "fsdp"):
            return
        whole = lambda t: sharding.full(t.detach()).cpu().contiguous()  # noqa: E731
        tensors = {f"param/{n}": whole(p).reshape(s) for n, p, s in zip(self.names, self.params, self.shapes)}
        opt = self.optimizer.state_dict()
        for idx, st in opt["state"].items():
            for k, v in st.items():
                tensors[f"opt/{idx}/{k}"] = whole(torch.as_tensor(v)).clone()
        if not self.acc.is_main_process:
            return
        tensors["rng/torch"] = torch.get_rng_state()
        if torch.cuda.is_available():
            tensors["rng/cuda"] = torch.cuda.get_rng_state()
        if best_state is not None:
            tensors.update({f"best/{n}": t for n, t in best_state.items()})
        numpy_rng = np.random.get_state()
        meta = {
            "step": step,
            "strategy": self.strategy,
            "param_groups": opt["param_groups"],
            "python_rng": random.getstate(),  # its tuples become JSON lists (_tuplify reads them back)
            "numpy_rng": [numpy_rng[0], numpy_rng[1].tolist(), *numpy_rng[2:]],
            "result": asdict(result),
        }
        tmp = self.dir.with_name(self.dir.name + ".tmp")
        target = tmp
        try:
            _clear(tmp)
            tmp.mkdir(parents=True)
            target = tmp / "state.safetensors"
            save_file(tensors, target, metadata={"step": str(step)})
            target = tmp / "meta.json"
            target.write_text(json.dumps(meta))
            target = self.dir
            self._rotate(tmp)
            note_checkpoint(self.dir.parent, step)  # so a resume can tell it is gone (run.ownership)
        except (OSError, SafetensorError) as e:
            if tmp.is_dir() and not tmp.is_symlink():
                shutil.rmtree(tmp, ignore_errors=True)
            raise EmbexpError(f"cannot write checkpoint {getattr(e, 'filename', None) or target}: "
                              f"{os_error(e) or str(e).splitlines()[0]}; run stopped and marked failed; "
                              f"{self.kept()} (free space or fix the permissions, then rerun with "
                              f"trainer.resume=true)") from None

    def _rotate(self, tmp: Path) -> None:
        """latest -> prev, tmp -> latest, the older prev removed; a latest that could not be read is
        dropped instead, so prev stays the last good one."""
        old = self.dir.with_name(self.dir.name + ".old")
        _clear(old)
        if self.dir.exists():
            if self.latest_bad:
                self.dir.rename(old)
            else:
                if self.prev.exists():
                    self.prev.rename(old)
                self.dir.rename(self.prev)
        tmp.rename(self.dir)
        self.latest_bad = False
        shutil.rmtree(old, ignore_errors=True)  # a folder left here stops the next save in one line (_clear)

    def load(self) -> tuple[int, dict, dict | None] | None:
        """Restore the tensors, optimizer and RNG states from the latest checkpoint, else the previous one
        (one warning line naming what failed); (step, the result so far as a dict, the kept best state or
        None), or None where there is no checkpoint. None readable: one error line."""
        if self.dir is None or not (self.dir.exists() or self.prev.exists()):
            return None
        failed = []
        for d in (self.dir, self.prev):
            if not d.exists():
                failed.append(f"{d}: missing")
                continue
            try:
                found = self._load(d)
            except UNREADABLE as e:
                failed.append(f"{d}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
                continue
            if failed:
                log.warning("checkpoint unreadable (%s): resuming from the previous one, %s (step %d)",
                            failed[0], d, found[0])
            self.latest_bad = d != self.dir
            return found
        raise EmbexpError(f"no readable checkpoint ({'; '.join(failed)}): delete {self.dir} and {self.prev} to "
                          f"train again from the start (or trainer.resume=false)")

    def _load(self, d: Path) -> tuple[int, dict, dict | None]:
        meta = json.loads((d / "meta.json").read_text())
        if meta.get("strategy", "ddp") != self.strategy:  # its best/ state is in that strategy's form
            raise EmbexpError(f"checkpoint {d} was written under "
                              f"trainer.strategy={meta.get('strategy', 'ddp')}: "
                              f"resume it with that strategy (or trainer.resume=false to start again)")
        if "best_eval_loss" in meta["result"]:
            raise EmbexpError(f"checkpoint {d} was written by an embexp that selected on the evaluation split; "
                              "delete it to train again from the start (or trainer.resume=false)")
        flat = [p for g in self.optimizer.param_groups for p in g["params"]]  # the optimizer's indices
        state, best = {}, {}
        # tensor by tensor: no whole copy per process
        with safe_open(d / "state.safetensors", framework="pt") as fh:
            written = (fh.metadata() or {}).get("step")
            if written is not None and int(written) != meta["step"]:
                raise ValueError(f"state.safetensors is of step {written}, meta.json of step {meta['step']}")
            missing = [n for n in self.names if f"param/{n}" not in fh.keys()]
            if missing:
                raise KeyError(f"no tensor param/{missing[0]}")
            with torch.no_grad():  # a later failure leaves these half restored: the previous checkpoint rewrites all
                for n, p in zip(self.names, self.params):
                    p.copy_(sharding.place(finite(fh, f"param/{n}").reshape(p.shape), p))
            for key in fh.keys():
                if key.startswith("opt/"):
                    _, idx, k = key.split("/", 2)
                    state.setdefault(int(idx), {})[k] = sharding.place(finite(fh, key), flat[int(idx)])
                elif key.startswith("best/"):
                    best[key[5:]] = finite(fh, key)
            rng = {k: fh.get_tensor(k) for k in ("rng/torch", "rng/cuda") if k in fh.keys()}
        self.optimizer.load_state_dict({"state": state, "param_groups": meta["param_groups"]})
        torch.set_rng_state(rng["rng/torch"])
        if "rng/cuda" in rng and torch.cuda.is_available():
            torch.cuda.set_rng_state(rng["rng/cuda"])
        random.setstate(_tuplify(meta["python_rng"]))
        st = meta["numpy_rng"]
        np.random.set_state((st[0], np.array(st[1], dtype=np.uint32), *st[2:]))
        return meta["step"], meta["result"], best or None


def only_folders(directory: Path) -> None:
    """Anything but a folder at a checkpoint's names (``directory`` and its .prev, .tmp, .old; embexp writes only
    folders there): one line naming it, before the model loads (``train.run_owned``) and before any step."""
    for path in (directory.with_name(directory.name + name) for name in ("", ".prev", ".tmp", ".old")):
        if path.is_symlink() or (path.exists() and not path.is_dir()):
            what = "a symbolic link" if path.is_symlink() else "a file" if path.is_file() else "not a folder"
            raise EmbexpError(f"{path} is {what}, not a checkpoint folder (embexp writes only folders there, and "
                              f"does not remove what it did not write): move it out of the run directory, then rerun")


def _clear(path: Path) -> None:
    """Remove one of the save's own folders (checkpoint.tmp, checkpoint.old); anything else there is an OSError
    (the save's one line), never left in the rotation's way."""
    if path.is_symlink() or (path.exists() and not path.is_dir()):
        raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), str(path))
    shutil.rmtree(path, ignore_errors=True)
    if path.exists():
        raise OSError(errno.ENOTEMPTY, f"{os.strerror(errno.ENOTEMPTY)} (cannot be removed)", str(path))


def finite(fh, key: str) -> torch.Tensor:
    """A checkpoint's tensor, refused (ValueError: the checkpoint is unreadable) where it holds NaN or inf: a run
    never resumes from weights or moments a training loss could not have left (it stops before such a step)."""
    t = fh.get_tensor(key)
    if t.is_floating_point() and not bool(torch.isfinite(t).all()):
        raise ValueError(f"tensor {key} holds non-finite values (NaN or inf)")
    return t


def _tuplify(x):
    return tuple(_tuplify(v) for v in x) if isinstance(x, list) else x
