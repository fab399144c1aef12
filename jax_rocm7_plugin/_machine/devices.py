"""Can this machine run ROCm? Device nodes and driver state, read under a sysroot.

`probe_machine` gathers facts (cheap: a directory listing and a few stats and
small reads); `machine_findings` turns them into findings. Both are pure over
the sysroot, so tests drive every branch with synthetic trees.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from jax_rocm7_plugin import _findings as catalog
from jax_rocm7_plugin._findings import Finding
from jax_rocm7_plugin._machine import host_path
from jax_rocm7_plugin._machine.identity import OVERFLOW_ID, Identity, may_read_write
from jax_rocm7_plugin._machine.topology import TOPOLOGY_DIR, Topology, read_topology
from jax_rocm7_plugin._record import NamedTuple

KFD_DEVICE = "/dev/kfd"
DXG_DEVICE = "/dev/dxg"
AMDGPU_MODULE = "/sys/module/amdgpu"
CONTAINER_MARKERS = ("/.dockerenv", "/run/.containerenv")  # what docker and podman put in their containers


class DeviceNode(NamedTuple):
    path: Path
    exists: bool
    accessible: bool  # readable and writable by this process
    wrong_kind: str | None = None  # "a FIFO", "a socket", "a directory": not a device node at all
    gid: int | None = None  # the owning group id (None: not statted)
    mode: int = 0  # its permission bits


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
    identity: Identity | None = None  # who opens the nodes, by number (read where access is judged by numbers)

    @property
    def usable_gpus(self) -> tuple[GpuState, ...]:
        if not self.kfd.accessible:
            return ()
        return tuple(g for g in self.gpus if g.render_node is not None and g.render_node.accessible)


def _device_node(path: Path, identity: Identity | None, added: tuple[int, ...]) -> DeviceNode:
    """Stat only (device nodes are never opened here). Character devices are what drivers make;
    plain files stand in for them in synthetic sysroots; anything else is not a device node.

    Access: the kernel's answer for this process (os.access, which knows ACLs such as logind's on render nodes)
    where the identity is this process's own; by the numbers of `identity` where it describes another process
    (a sysroot's /proc/self/status) or gains `added` groups (the doctor checking a group fix)."""
    import stat

    try:
        info = os.stat(path)
    except OSError:
        return DeviceNode(path, False, False)
    mode = info.st_mode
    for test, kind in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory")):
        if test(mode):
            return DeviceNode(path, False, False, kind)
    if identity is None or identity.source == "this process":
        assumed = bool(added) and identity is not None and may_read_write(info, identity)
        accessible = os.access(path, os.R_OK | os.W_OK) or assumed
    else:
        accessible = may_read_write(info, identity)
    return DeviceNode(path, True, accessible, None, info.st_gid, mode & 0o777)


def probe_machine(root: Path, groups_added: tuple[int, ...] = ()) -> MachineState:
    identity = None
    if str(root) != "/" or groups_added:  # another machine's process, or an assumed one: judged by numbers
        from jax_rocm7_plugin._machine.identity import read_identity

        identity = read_identity(root, groups_added)
    topology = read_topology(root)
    amdgpu = os.path.isdir(host_path(root, AMDGPU_MODULE))
    other = None
    if not topology.present and not amdgpu:  # no AMD driver at all: is this another vendor's GPU machine?
        from jax_rocm7_plugin._machine.driver import nvidia_driver

        other = nvidia_driver(root)
    gpus = []
    for node in topology.gpus:
        minor = node.drm_render_minor
        render = None
        if minor is not None:
            render = _device_node(host_path(root, f"/dev/dri/renderD{minor}"), identity, groups_added)
        gpus.append(GpuState(node.index, node.gfx_target, render))
    return MachineState(
        root=root,
        topology=topology,
        amdgpu_module_loaded=amdgpu,
        kfd=_device_node(host_path(root, KFD_DEVICE), identity, groups_added),
        wsl_dxg=os.path.exists(host_path(root, DXG_DEVICE)),
        gpus=tuple(gpus),
        other_vendor=other,
        identity=identity,
    )


def unknown_state(root: Path) -> MachineState:
    """What is known of a machine whose probe did not finish: nothing."""
    return MachineState(
        root, Topology(present=False), False, DeviceNode(host_path(root, KFD_DEVICE), False, False), False, ()
    )


def probe_within_deadline(root: Path, groups_added: tuple[int, ...] = ()) -> MachineState | Finding:
    """probe_machine, or machine-probe-timeout naming the file that did not answer (a hung driver)."""
    from jax_rocm7_plugin._safe_io import Deadline, with_deadline

    try:
        return with_deadline(lambda: probe_machine(root, groups_added))
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
        found.append(catalog.kfd_permission_denied(*access_fix(state, [state.kfd])))
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
        nodes = [g.render_node for g in denied if g.render_node is not None]
        severity = "error" if all_blocked else "warning"
        found.append(catalog.render_node_permission_denied(severity, *access_fix(state, nodes)))
    return found


def _render_evidence(gpu: GpuState) -> str:
    if gpu.render_node is None:
        return f"KFD node {gpu.node_index} has no drm_render_minor"
    node = gpu.render_node
    what = f"is {node.wrong_kind}, not a device node" if node.wrong_kind else "does not exist"
    return f"KFD node {gpu.node_index} ({gpu.gfx_target or 'unknown target'}): {node.path} {what}"


def access_fix(state: MachineState, nodes: list[DeviceNode]) -> tuple[str, tuple[str, ...], catalog.Remedy | None]:
    """The fix for device nodes this process may not open, by number: the group id each node is owned by that the
    process lacks (never a group name it already holds: a container's 'render' is often another number than the
    host's), said the way this machine takes it (a container's --group-add, podman's keep-groups, an LXC idmap, a
    host's usermod). With the evidence, and the groups as a remedy the doctor can check."""
    from jax_rocm7_plugin._machine.identity import described, group_names, read_identity
    from jax_rocm7_plugin._policy.access_policy import privileged_group

    identity = state.identity or read_identity(state.root)
    names = group_names(state.root)
    held = ", ".join(described(g, names) for g in identity.gids) or "none"
    owners = [described(node.gid, names) if node.gid is not None else "an unknown group" for node in nodes]
    evidence = (
        *(f"{n.path} is owned by {owner} with mode {n.mode:o}" for n, owner in zip(nodes, owners, strict=True)),
        f"this process (uid {identity.uid}, read from {identity.source}) holds {held}",
    )
    group_rw = [n for n in nodes if n.gid is not None and n.mode & 0o060 == 0o060]
    owner_only = [n for n in nodes if n not in group_rw]
    if owner_only:
        paths = ", ".join(str(n.path) for n in owner_only)
        return (
            f"{paths} let no group read and write it (mode {owner_only[0].mode:o}): on the host, give the node the "
            "mode 0660 and the render group the way AMD's packages do (a udev rule: "
            'SUBSYSTEM=="kfd", GROUP="render", MODE="0660"; SUBSYSTEM=="drm", KERNEL=="renderD*", GROUP="render", '
            'MODE="0660"), then reload udev',
            evidence,
            None,
        )
    gids = tuple(dict.fromkeys(n.gid for n in group_rw if n.gid not in identity.gids))  # type: ignore[misc]
    if not gids:  # every group is held and the bits allow it: an ACL, a mount or a security module refuses
        return (
            "the process holds the owning group and the mode allows it, so something else refuses (an ACL, a "
            "read-only or nodev mount, SELinux or AppArmor): check `getfacl` and the audit log for the node",
            evidence,
            None,
        )
    privileged = [why for g in gids if (why := privileged_group(g, names)) is not None]
    if privileged:
        why = (*evidence[:-1], *privileged, evidence[-1])  # the process's own groups stay last
        return _regroup_fix(state, nodes, names, privileged, identity.gids), why, None
    listed = " ".join(f"--group-add {g}" for g in gids)
    if OVERFLOW_ID in gids:
        fix = (
            f"the node's group is not mapped into this container (it shows as the overflow id {OVERFLOW_ID}): map "
            "the host's group id of the node into it: rootless Docker or podman, add the host's render and video gids "
            "to /etc/subgid for your user (then --group-add them, or podman's --group-add keep-groups); an LXC guest, "
            "lxc.idmap = g <id> <host id> 1"
        )
        return fix, evidence, None
    container = _in_container(state.root)
    plural = "s" if len(gids) > 1 else ""
    render = _render_gid(names)
    if not container and render is not None and render in identity.gids and all(g not in names for g in gids):
        # The nodes carry a number this system gives no name, while its own render group (which the user holds)
        # has another: the host's render gid passed into a guest (an LXC container) whose render group differs.
        paths = " ".join(str(n.path) for n in group_rw)
        first = group_rw[0].path
        fix = (
            f"the device node{plural} carr{'y' if plural else 'ies'} gid {', '.join(map(str, gids))}, which has no "
            f"name here, while this system's render group, which this user holds, is {render} (the host's render gid "
            f"passed into a guest whose render group has another number): give the node{plural} the render group "
            f"here, in a Proxmox LXC guest's dev entry (dev0: {first},gid={render},mode=0660) or with "
            f"`sudo chgrp render {paths}`; or add gid {', '.join(map(str, gids))} to this user ({listed})"
        )
        return fix, evidence, catalog.Remedy(groups=gids)
    if container:
        fix = (
            f"give the container the group id{plural} that own{'' if plural else 's'} the device node{plural}, by "
            f"number: {listed} (rootless podman: --group-add keep-groups; an LXC guest: map the id{plural} with "
            "lxc.idmap)"
        )
    else:
        named = [names[g] for g in gids if g in names]
        how = f"sudo usermod -aG {','.join(named)} $USER and log in again" if len(named) == len(gids) else ""
        fix = (
            f"give this user the group id{plural} {', '.join(str(g) for g in gids)} that own{'' if plural else 's'} "
            f"the device node{plural}" + (f": {how}" if how else "") + f"; in a container, pass {listed}"
        )
    return fix, evidence, catalog.Remedy(groups=gids)


def _regroup_fix(
    state: MachineState, nodes: list[DeviceNode], names: Mapping[int, str], why: list[str], held: tuple[int, ...]
) -> str:
    """The fix where the nodes' group is one no user should join (root, disk, docker, ...): give the nodes the render
    group, as AMD's packages do; never the user that group. The doctor cannot make this change, so it is not
    checked."""
    render = _render_gid(names)
    group = f"render (gid {render} here)" if render is not None else "render (create it first: groupadd -r render)"
    paths = " ".join(str(n.path) for n in nodes)
    container = _in_container(state.root)
    where = "on the host, " if container else ""
    return (
        f"do not join that group ({why[0].split(':', 1)[0]}); {where}give the device node"
        f"{'s' if len(nodes) > 1 else ''} the group {group} instead: `sudo chgrp render {paths}` for now, and "
        'for good the udev rules AMD\'s packages install (SUBSYSTEM=="kfd", GROUP="render", MODE="0660"; '
        'SUBSYSTEM=="drm", KERNEL=="renderD*", GROUP="render", MODE="0660"), then reload udev; a Proxmox LXC '
        "guest's dev entry takes the guest's render gid (dev0: /dev/kfd,gid=<render gid>,mode=0660)"
        + ("" if render is not None and render in held else "; then add this user to render")
    )


def _in_container(root: Path) -> bool:
    """Whether a container engine marked this system as its container (docker's and podman's files)."""
    return any(os.path.exists(host_path(root, p)) for p in CONTAINER_MARKERS)


def _render_gid(names: Mapping[int, str]) -> int | None:
    """The gid this system names render (None: no render group)."""
    return next((gid for gid, name in names.items() if name == "render"), None)
