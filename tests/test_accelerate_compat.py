"""What src/embexp/run/accelerate_compat.py assumes of Accelerate's internals, each assumption checked against the
installed Accelerate: a release that changes one fails here, naming it, before a launch or an FSDP run on CPU
behaves otherwise (tests/test_fsdp.py and tests/test_spine.py launch the real thing)."""

from __future__ import annotations

import ast
import inspect
import os
import sys
import textwrap

import accelerate
import pytest
from accelerate import Accelerator
from accelerate.commands.launch import launch_command_parser
from accelerate.state import AcceleratorState
from accelerate.utils import DistributedType, FullyShardedDataParallelPlugin, prepare_simple_launcher_cmd_env

from embexp.run import accelerate_compat
from embexp.run.accelerate_compat import WRITTEN_AGAINST, shard_on_cpu, single_process_cpu_launch

CHANGED = f"(accelerate_compat was written against Accelerate {WRITTEN_AGAINST}, this is {accelerate.__version__})"


def cpu_launch(*flags: str) -> tuple[list[str], dict]:
    """The command and environment ``accelerate launch --cpu <flags> -m embexp.train debug=smoke`` runs."""
    args = launch_command_parser().parse_args(["--cpu", "--num_machines", "1", "--mixed_precision", "no",
                                               "--dynamo_backend", "no", *flags, "-m", "embexp.train", "debug=smoke"])
    return prepare_simple_launcher_cmd_env(args)


def test_accelerate_launch_cpu_starts_one_process_that_is_refused_in_one_line():
    """Assumption 1: Accelerate's launcher runs N > 1 CPU processes as one, exporting MASTER_ADDR to it."""
    cmd, env = cpu_launch("--num_processes", "2")
    assert cmd == [sys.executable, "-m", "embexp.train", "debug=smoke"], f"one process no longer {CHANGED}: {cmd}"
    assert "MASTER_ADDR" in env and env["ACCELERATE_USE_CPU"].lower() == "true", CHANGED
    assert single_process_cpu_launch(env).startswith("accelerate launch --cpu --num_processes N starts one process")
    assert "torchrun --nproc_per_node N -m embexp.train" in single_process_cpu_launch(env)
    cmd, env = cpu_launch("--num_processes", "1")
    assert single_process_cpu_launch(env) is None  # one process asked for, one process run


@pytest.mark.parametrize("world", [
    {"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0"},  # torchrun
    {"PMI_SIZE": "2", "PMI_RANK": "0"},  # accelerate launch --mpirun_hostfile (Intel MPI)
    {"OMPI_COMM_WORLD_SIZE": "2", "OMPI_COMM_WORLD_RANK": "0"},  # Open MPI
], ids=["torchrun", "intel-mpi", "open-mpi"])
def test_a_launcher_that_gives_a_world_size_is_not_refused(world):
    env = {"ACCELERATE_USE_CPU": "True", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500", **world}
    assert single_process_cpu_launch(env) is None


def fsdp_switch(init) -> list[str]:
    """The device types whose branch of ``AcceleratorState.__init__`` sets ``self.distributed_type =
    DistributedType.FSDP``: the names in the ``if self.distributed_type in [...]`` around that assignment."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(init)))
    sets_fsdp = [n for n in ast.walk(tree) if isinstance(n, ast.Assign)
                 and ast.unparse(n.targets[0]) == "self.distributed_type" and ast.unparse(n.value).endswith(".FSDP")]
    guards = [n for n in ast.walk(tree) if isinstance(n, ast.If) and isinstance(n.test, ast.Compare)
              and ast.unparse(n.test.left) == "self.distributed_type" and isinstance(n.test.ops[0], ast.In)
              and any(s in ast.walk(n) for s in sets_fsdp)]
    return [ast.unparse(e).split(".")[-1] for g in guards for e in g.test.comparators[0].elts]


def test_accelerate_sets_fsdp_for_a_plugin_only_on_accelerator_devices():
    """Assumption 2, first half: without shard_on_cpu, a multi-CPU Accelerator given an FSDP plugin stays MULTI_CPU.
    When Accelerate takes MULTI_CPU in, shard_on_cpu has nothing left to do: remove it."""
    types = fsdp_switch(AcceleratorState.__init__)
    assert "MULTI_GPU" in types, f"AcceleratorState no longer sets FSDP where shard_on_cpu expects {CHANGED}"
    assert "MULTI_CPU" not in types, f"Accelerate now shards CPU processes itself: remove shard_on_cpu {CHANGED}"


def test_the_fields_shard_on_cpu_sets_are_what_the_accelerator_reads(monkeypatch):
    """Assumption 2, second half, on a state of its own (Accelerate's shared one is left alone): after shard_on_cpu a
    multi-CPU Accelerator is FSDP2 with the plugin, and ACCELERATE_USE_FSDP has its value from before."""
    acc, state = object.__new__(Accelerator), object.__new__(AcceleratorState)
    acc.state, state.distributed_type, state.fsdp_plugin = state, DistributedType.MULTI_CPU, None
    assert (acc.distributed_type, acc.is_fsdp2) == (DistributedType.MULTI_CPU, False), CHANGED
    plugin = object.__new__(FullyShardedDataParallelPlugin)
    plugin.fsdp_version = 2
    monkeypatch.setenv(accelerate_compat.FSDP_ENV, "true")  # what Accelerator(fsdp_plugin=...) exports
    shard_on_cpu(acc, plugin, None)
    assert acc.distributed_type == DistributedType.FSDP and acc.is_fsdp2 and acc.state.fsdp_plugin is plugin, CHANGED
    assert accelerate_compat.FSDP_ENV not in os.environ
    source = inspect.getsource(Accelerator.__init__)
    assert f'os.environ["{accelerate_compat.FSDP_ENV}"] = "true"' in source, f"the plugin's export moved {CHANGED}"
