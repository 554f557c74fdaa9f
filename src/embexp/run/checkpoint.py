"""Resumable checkpoints of a run (``trainer.save_every``), no pickles.

``<run_dir>/checkpoint/`` holds ``state.safetensors`` (the trainable tensors, the optimizer moments, the
RNG states, the kept best state) and ``meta.json`` (step, strategy, parameter groups, Python and NumPy
RNG, the result so far). A checkpoint is written whole by the main process (under FSDP every process
first gathers the shards) into ``checkpoint.tmp`` and renamed into place, so a kill mid-write leaves
the previous one.
"""

from __future__ import annotations

import json
import logging
import random
import shutil
from dataclasses import asdict
from pathlib import Path

import numpy as np
import torch
from safetensors import safe_open
from safetensors.torch import save_file

from embexp import EmbexpError
from embexp.run import sharding

log = logging.getLogger("embexp")


class Checkpoint:
    """The checkpoint of one Trainer: ``directory`` (None: the run keeps none), written under ``strategy``
    (ddp or fsdp), of the trained tensors ``names`` / ``params`` (``shapes``: as the method has them)
    and their ``optimizer``."""

    def __init__(self, directory: Path | None, acc, strategy: str, names: list[str], params: list, shapes: list,
                 optimizer):
        self.dir, self.acc, self.strategy = directory, acc, strategy
        self.names, self.params, self.shapes, self.optimizer = names, params, shapes, optimizer

    def exists(self) -> bool:
        return self.dir is not None and (self.dir / "meta.json").is_file()

    def kept(self) -> str:
        """What a failed run leaves, for its one error line."""
        return f"the last checkpoint ({self.dir}) is kept" if self.exists() else "no checkpoint had been written"

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
        tmp = self.dir.with_name("checkpoint.tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        tensors["rng/torch"] = torch.get_rng_state()
        if torch.cuda.is_available():
            tensors["rng/cuda"] = torch.cuda.get_rng_state()
        if best_state is not None:
            tensors.update({f"best/{n}": t for n, t in best_state.items()})
        save_file(tensors, tmp / "state.safetensors")
        meta = {
            "step": step,
            "strategy": self.strategy,
            "param_groups": opt["param_groups"],
            "python_rng": _jsonable(random.getstate()),
            "numpy_rng": _jsonable(np.random.get_state()),
            "result": asdict(result),
        }
        (tmp / "meta.json").write_text(json.dumps(meta))
        old = self.dir.with_name("checkpoint.old")
        if self.dir.exists():
            self.dir.rename(old)
        tmp.rename(self.dir)
        shutil.rmtree(old, ignore_errors=True)

    def load(self) -> tuple[int, dict, dict | None] | None:
        """Restore the tensors, optimizer and RNG states; (step, the result so far as a dict, the kept best
        state or None), or None where there is no checkpoint."""
        if not self.exists():
            return None
        meta = json.loads((self.dir / "meta.json").read_text())
        if meta.get("strategy", "ddp") != self.strategy:  # its best/ state is in that strategy's form
            raise EmbexpError(f"checkpoint {self.dir} was written under "
                              f"trainer.strategy={meta.get('strategy', 'ddp')}: "
                              f"resume it with that strategy (or trainer.resume=false to start again)")
        flat = [p for g in self.optimizer.param_groups for p in g["params"]]  # the optimizer's indices
        state, best = {}, {}
        # tensor by tensor: no whole copy per process
        with safe_open(self.dir / "state.safetensors", framework="pt") as fh:
            with torch.no_grad():
                for n, p in zip(self.names, self.params):
                    p.copy_(sharding.place(fh.get_tensor(f"param/{n}").reshape(p.shape), p))
            for key in fh.keys():
                if key.startswith("opt/"):
                    _, idx, k = key.split("/", 2)
                    state.setdefault(int(idx), {})[k] = sharding.place(fh.get_tensor(key), flat[int(idx)])
                elif key.startswith("best/"):
                    best[key[5:]] = fh.get_tensor(key)
            rng = {k: fh.get_tensor(k) for k in ("rng/torch", "rng/cuda") if k in fh.keys()}
        self.optimizer.load_state_dict({"state": state, "param_groups": meta["param_groups"]})
        torch.set_rng_state(rng["rng/torch"])
        if "rng/cuda" in rng and torch.cuda.is_available():
            torch.cuda.set_rng_state(rng["rng/cuda"])
        random.setstate(_tuplify(meta["python_rng"]))
        st = meta["numpy_rng"]
        np.random.set_state((st[0], np.array(st[1], dtype=np.uint32), *st[2:]))
        if "best_eval_loss" in meta["result"]:
            raise EmbexpError(f"checkpoint {self.dir} was written by an embexp that selected on the evaluation split; "
                              "delete it to train again from the start (or trainer.resume=false)")
        return meta["step"], meta["result"], best or None


def _jsonable(x):
    if isinstance(x, np.ndarray):
        return x.tolist()
    if isinstance(x, (tuple, list)):
        return [_jsonable(v) for v in x]
    return x


def _tuplify(x):
    return tuple(_tuplify(v) for v in x) if isinstance(x, list) else x
