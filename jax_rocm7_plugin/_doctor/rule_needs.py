"""A need is met: what the stack needs of the machine (_policy/machine_needs.json: the kernel options it is built
with, room where it writes), against what this machine has, scaled by its GPUs and fabric. The locked-memory, open
files and /dev/shm needs are the health read's and the job check's (host-memlock-limited, shm-too-small,
cluster-open-files-low)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jax_rocm7_plugin import _findings as catalog
from jax_rocm7_plugin._engine import RuleSet
from jax_rocm7_plugin._findings import Finding
from jax_rocm7_plugin._machine.gpu_health import NodeHealth
from jax_rocm7_plugin._machine.kernel import KernelFacts
from jax_rocm7_plugin._machine.write_dirs import WriteDirs
from jax_rocm7_plugin._policy.machine_needs import kernel_features, write_room_bytes

RULES = RuleSet("needs")


@RULES.rule("find", reads=("kernel", "checked", "health"))
def _kernel_features(facts: Mapping[str, Any]) -> list[Finding]:
    """Options the running kernel was built without, where this machine needs them: any AMD GPU (KFD), two or more
    (peer-to-peer DMA), or RDMA devices beside them (dma-buf to the NIC). Judged only from a configuration read."""
    kernel: KernelFacts | None = facts["kernel"]
    machine = facts["checked"].facts.machine
    if kernel is None or kernel.config is None or machine is None:
        return []
    gpus = len(machine.topology.gpus)
    if not gpus:
        return []
    read = facts["health"].read  # the node's health read holds the host's RDMA devices (a rule reads no machine)
    rdma = isinstance(read, NodeHealth) and bool(read.host.rdma_devices)
    wanted = {"gpu": True, "gpus": gpus > 1, "gpus-or-rdma": gpus > 1 or rdma}
    found = []
    for severity in ("error", "warning"):
        missing = [
            (f.option, f.purpose)
            for f in kernel_features()
            if f.severity == severity and wanted.get(f.when, False) and kernel.option(f.option) == "n"
        ]
        if missing:
            context = f"which this host's {gpus} AMD GPU(s){' and RDMA devices' if rdma else ''} need"
            source = kernel.config_source or "the kernel's configuration"
            found.append(catalog.kernel_feature_missing(severity, missing, kernel.release, source, context))  # type: ignore[arg-type]
    return found


@RULES.rule("find", reads=("write-dirs", "checked"))
def _write_room(facts: Mapping[str, Any]) -> list[Finding]:
    """Room where the stack writes, for a process that will run on a GPU."""
    dirs: WriteDirs | None = facts["write-dirs"]
    machine = facts["checked"].facts.machine
    if dirs is None or machine is None or not machine.usable_gpus:
        return []
    need = write_room_bytes()
    return [
        catalog.write_dir_full(d.purpose, d.path, d.named_by, d.free_bytes, need, d.variable)
        for d in dirs.dirs
        if d.base is not None and d.free_bytes is not None and d.free_bytes < need and not d.read_only
    ]
