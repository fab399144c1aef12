"""Can this machine run ROCm? Device nodes and driver state, read under a sysroot.

`probe_machine` gathers facts (cheap: a directory listing and a few stats and
small reads); `machine_findings` turns them into findings. Both are pure over
the sysroot, so tests drive every branch with synthetic trees.
"""

from __future__ import annotations

import os
from pathlib import Path

from jax_rocm7_plugin import _findings as catalog
from jax_rocm7_plugin._findings import Finding
from jax_rocm7_plugin._machine import host_path
from jax_rocm7_plugin._machine.topology import TOPOLOGY_DIR, Topology, read_topology
from jax_rocm7_plugin._record import NamedTuple

KFD_DEVICE = "/dev/kfd"
DXG_DEVICE = "/dev/dxg"
AMDGPU_MODULE = "/sys/module/amdgpu"


class DeviceNode(NamedTuple):
    path: Path
    exists: bool
    accessible: bool  # readable and writable by this process
    wrong_kind: str | None = None  # "a FIFO", "a socket", "a directory": not a device node at all


class GpuState(NamedTuple):
    node_index: int
    gfx_target: str | None
    render_node: DeviceNode | None  # None: the topology names no render minor


class MachineState(NamedTuple):
    root: Path
    topology: Topology
    amdgpu_module_loaded: bool
    kfd: DeviceNode
    wsl_dxg: bool
    gpus: tuple[GpuState, ...]
    other_vendor: str | None = None  # where no AMD driver is: evidence of another vendor's GPU driver (NVIDIA's)

    @property
    def usable_gpus(self) -> tuple[GpuState, ...]:
        if not self.kfd.accessible:
            return ()
        return tuple(g for g in self.gpus if g.render_node is not None and g.render_node.accessible)


def _device_node(path: Path) -> DeviceNode:
    """Stat only (device nodes are never opened here). Character devices are what drivers make;
    plain files stand in for them in synthetic sysroots; anything else is not a device node."""
    import stat

    try:
        mode = os.stat(path).st_mode
    except OSError:
        return DeviceNode(path, False, False)
    for test, kind in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory")):
        if test(mode):
            return DeviceNode(path, False, False, kind)
    return DeviceNode(path, True, os.access(path, os.R_OK | os.W_OK))


def probe_machine(root: Path) -> MachineState:
    topology = read_topology(root)
    amdgpu = os.path.isdir(host_path(root, AMDGPU_MODULE))
    other = None
    if not topology.present and not amdgpu:  # no AMD driver at all: is this another vendor's GPU machine?
        from jax_rocm7_plugin._machine.driver import nvidia_driver

        other = nvidia_driver(root)
    gpus = []
    for node in topology.gpus:
        minor = node.drm_render_minor
        render = None if minor is None else _device_node(host_path(root, f"/dev/dri/renderD{minor}"))
        gpus.append(GpuState(node.index, node.gfx_target, render))
    return MachineState(
        root=root,
        topology=topology,
        amdgpu_module_loaded=amdgpu,
        kfd=_device_node(host_path(root, KFD_DEVICE)),
        wsl_dxg=os.path.exists(host_path(root, DXG_DEVICE)),
        gpus=tuple(gpus),
        other_vendor=other,
    )


def unknown_state(root: Path) -> MachineState:
    """What is known of a machine whose probe did not finish: nothing."""
    return MachineState(
        root, Topology(present=False), False, DeviceNode(host_path(root, KFD_DEVICE), False, False), False, ()
    )


def probe_within_deadline(root: Path) -> MachineState | Finding:
    """probe_machine, or machine-probe-timeout naming the file that did not answer (a hung driver)."""
    from jax_rocm7_plugin._safe_io import Deadline, with_deadline

    try:
        return with_deadline(lambda: probe_machine(root))
    except Deadline as late:
        return catalog.machine_probe_timeout(late.path, late.seconds)


def machine_findings(state: MachineState) -> list[Finding]:
    """Findings about the driver and device nodes, most decisive first."""
    if state.wsl_dxg and not state.topology.present:
        # WSL exposes GPUs through /dev/dxg, not KFD: driver checks do not apply.
        return [catalog.wsl_detected((f"{host_path(state.root, DXG_DEVICE)} exists",))]
    topo_dir = host_path(state.root, TOPOLOGY_DIR)
    problems = state.topology.problems
    if not state.topology.present:
        if not state.amdgpu_module_loaded and state.other_vendor is not None:
            return [catalog.other_vendor_gpu((state.other_vendor, f"{topo_dir} does not exist", *problems))]
        if not state.amdgpu_module_loaded:
            module_dir = host_path(state.root, AMDGPU_MODULE)
            return [
                catalog.amdgpu_driver_missing((f"{topo_dir} does not exist", f"{module_dir} does not exist", *problems))
            ]
        # Module loaded but no topology: the KFD part of the driver did not come up.
        return [catalog.no_gpu_nodes((f"{topo_dir} does not exist although the amdgpu module is loaded", *problems))]
    if not state.gpus:
        count = len(state.topology.nodes)
        return [catalog.no_gpu_nodes((f"{topo_dir}: {count} node(s), none with simd_count > 0", *problems))]
    found: list[Finding] = []
    if not state.kfd.exists:
        what = f"is {state.kfd.wrong_kind}, not a device node" if state.kfd.wrong_kind else "does not exist"
        found.append(catalog.kfd_device_missing((f"{state.kfd.path} {what}",)))
    elif not state.kfd.accessible:
        found.append(catalog.kfd_permission_denied(_permission_evidence(state.kfd.path)))
    missing = [g for g in state.gpus if g.render_node is None or not g.render_node.exists]
    denied = [
        g for g in state.gpus if g.render_node is not None and g.render_node.exists and not g.render_node.accessible
    ]
    all_blocked = len(missing) + len(denied) == len(state.gpus)
    if missing:
        found.append(
            catalog.render_node_missing(
                "error" if all_blocked else "warning",
                tuple(_render_evidence(g) for g in missing),
            )
        )
    if denied:
        found.append(
            catalog.render_node_permission_denied(
                "error" if all_blocked else "warning",
                tuple(e for g in denied for e in _permission_evidence(g.render_node.path)),  # type: ignore[union-attr]
            )
        )
    return found


def _render_evidence(gpu: GpuState) -> str:
    if gpu.render_node is None:
        return f"KFD node {gpu.node_index} has no drm_render_minor"
    node = gpu.render_node
    what = f"is {node.wrong_kind}, not a device node" if node.wrong_kind else "does not exist"
    return f"KFD node {gpu.node_index} ({gpu.gfx_target or 'unknown target'}): {node.path} {what}"


def _permission_evidence(path: Path) -> tuple[str, ...]:
    try:
        info = os.stat(path)
    except OSError as error:
        return (f"{path}: {error.strerror}",)
    group = _group_name(info.st_gid)
    return (f"{path} is owned by group '{group}' with mode {info.st_mode & 0o777:o}; uid {os.getuid()} is not allowed",)


def _group_name(gid: int) -> str:
    try:
        import grp

        return grp.getgrgid(gid).gr_name
    except (KeyError, ImportError):
        return str(gid)
