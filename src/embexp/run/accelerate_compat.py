"""What embexp assumes about Accelerate beyond its public API, in one place, each assumption held by
tests/test_accelerate_compat.py (which fails, naming the assumption, when an Accelerate release changes it).

Written against Accelerate :data:`WRITTEN_AGAINST` (``pip show accelerate``).

1. ``accelerate launch --cpu --num_processes N`` starts one process unless it is given an MPI hostfile
   (``--mpirun_hostfile``): its simple launcher runs the script once and exports ``MASTER_ADDR`` for N > 1,
   and Accelerate then sees a world of one (no ``WORLD_SIZE``, ``PMI_SIZE``, ``OMPI_COMM_WORLD_SIZE``).
   Such a start is refused in one line (:func:`single_process_cpu_launch`) rather than training N = 1;
   CPU data parallelism runs under ``torchrun --nproc_per_node N -m embexp.train ...`` (docs/running.md).
2. ``AcceleratorState`` switches to ``DistributedType.FSDP`` for a given FSDP plugin only on accelerator
   devices (MULTI_GPU, MULTI_NPU, ...), never for MULTI_CPU; ``Accelerator.distributed_type`` and
   ``Accelerator.is_fsdp2`` read the state's ``distributed_type`` and ``fsdp_plugin``. So that FSDP2 runs,
   and is tested, on CPU processes (gloo), :func:`shard_on_cpu` sets those two fields itself.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

WRITTEN_AGAINST = "1.16.0"
FSDP_ENV = "ACCELERATE_USE_FSDP"  # what an FSDP accelerate config exports to the processes
WORLD_SIZE_ENV = ("WORLD_SIZE", "PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MV2_COMM_WORLD_SIZE")  # Accelerate's CPU world


def single_process_cpu_launch(env: Mapping[str, str]) -> str | None:
    """The one line for ``accelerate launch --cpu --num_processes N`` (N > 1) without MPI, else None: the
    launcher exported ``MASTER_ADDR`` to a single process that no launcher gave a world size."""
    if env.get("ACCELERATE_USE_CPU", "").lower() != "true" or "MASTER_ADDR" not in env:
        return None
    if "RANK" in env or any(k in env for k in WORLD_SIZE_ENV):
        return None
    return ("accelerate launch --cpu --num_processes N starts one process (Accelerate runs N CPU processes only "
            "through MPI, --mpirun_hostfile): run torchrun --nproc_per_node N -m embexp.train ... instead "
            "(docs/running.md)")


def shard_on_cpu(acc, plugin, env: str | None) -> None:
    """Switch a multi-CPU ``Accelerator`` made with an FSDP ``plugin`` to Accelerate's FSDP2 path (assumption 2).
    Accelerate also exported ACCELERATE_USE_FSDP=true for the plugin: it gets its value before (``env``) back,
    so a later Accelerator in this process is not made FSDP by it."""
    from accelerate.utils import DistributedType

    if acc.distributed_type == DistributedType.MULTI_CPU:
        acc.state.distributed_type = DistributedType.FSDP
        acc.state.fsdp_plugin = plugin
    if env is None:
        os.environ.pop(FSDP_ENV, None)
    else:
        os.environ[FSDP_ENV] = env
