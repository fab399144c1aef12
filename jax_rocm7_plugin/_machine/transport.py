"""Which network RCCL will carry traffic between hosts over, on this machine as it is set, and the fastest it has.

RCCL (2.21.5, the line ROCm 7's is built from: src/net.cc, src/transport/net_ib.cc, src/misc/socket.cc at the commit
_policy/stack_variables_generated.json cites) tries, in order, a net plugin, its InfiniBand/RoCE transport, then TCP
sockets, and takes the first that has a device:
- the plugin: NCCL_NET_PLUGIN as given, then librccl-net-<value>.so; unset, librccl-net.so; by the dynamic loader's
  search (aws-ofi-rccl for Slingshot and EFA, librccl-anp.so for AMD's AI NICs);
- IB: off with NCCL_IB_DISABLE; needs libibverbs.so[.1] (dlopen), an IP interface for its out-of-band exchange, and
  ports whose state is ACTIVE with an InfiniBand or Ethernet (RoCE) link layer, filtered by NCCL_IB_HCA; each device is
  opened through /dev/infiniband;
- sockets otherwise, over NCCL_SOCKET_IFNAME's interfaces (by default ib*, else any but docker* and lo).
NCCL_NET names the one to use: where it names one that has no device, RCCL fails to create the communicator.

Pure functions over the fabric (_machine/fabric.py), the interfaces (_machine/network.py), the environment and a
resolver of library names (the dynamic loader's search as the doctor reproduces it).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from jax_rocm7_plugin._environment import read
from jax_rocm7_plugin._findings import transport_gap_words
from jax_rocm7_plugin._machine.fabric import Fabric, RdmaPort
from jax_rocm7_plugin._machine.network import Interface
from jax_rocm7_plugin._policy.grammar import rccl_list_matches
from jax_rocm7_plugin._record import NamedTuple

if TYPE_CHECKING:
    from jax_rocm7_plugin._machine.rocm_install import RocmInstall
    from jax_rocm7_plugin._settings import Settings

VERBS_SONAMES = ("libibverbs.so", "libibverbs.so.1")
DEFAULT_PLUGIN = "librccl-net.so"
# RCCL 2.21.5 tries librccl-net.so; ROCm 7.2's RCCL looks for NCCL's name (ROCm/rocm-systems#4001): either counts.
DEFAULT_PLUGINS = (DEFAULT_PLUGIN, "libnccl-net.so")
_IB_LINK_LAYERS = ("InfiniBand", "Ethernet")


class Gap(NamedTuple):
    """One fact of this machine that keeps RCCL off a faster network: its kind (_findings.TRANSPORT_GAPS holds the
    words for each) and the values it concerns."""

    kind: str
    values: tuple[tuple[str, str], ...] = ()

    @property
    def reason(self) -> str:
        return transport_gap_words(self.kind, dict(self.values))[0]

    @property
    def step(self) -> str:
        return transport_gap_words(self.kind, dict(self.values))[1]


class Transport(NamedTuple):
    chosen: str  # "IB", "RoCE", "Socket", "plugin" (a net plugin), or "none" (NCCL_NET names what is not there)
    over: tuple[str, ...]  # the ports, interfaces or plugin file it would use
    fastest: str | None  # the fastest way between hosts this machine has, in words ("mlx5_0:1 (InfiniBand, 400 Gb/s)")
    fastest_kind: str | None  # IB, RoCE, Slingshot, EFA, Socket
    gaps: tuple[Gap, ...] = ()  # why not a faster one, most direct first
    unset: tuple[str, ...] = ()  # variables whose unsetting closes it (a change the doctor can check)
    setting: tuple[tuple[str, str], ...] = ()  # variables whose value closes it
    gbps: float | None = None  # the line rate of what it would use: the active ports it takes, added up

    @property
    def reasons(self) -> tuple[str, ...]:
        return tuple(g.reason for g in self.gaps)

    @property
    def steps(self) -> tuple[str, ...]:
        # Where NCCL_NET names what is not there, the other gaps' steps come first: unsetting it alone falls back to
        # sockets.
        ordered = (*self.gaps[1:], *self.gaps[:1]) if self.chosen == "none" else self.gaps
        return tuple(g.step for g in ordered)

    @property
    def slower(self) -> bool:
        """It will use sockets (or nothing) where the machine has an RDMA fabric or Slingshot."""
        return self.chosen in ("Socket", "none") and self.fastest_kind not in (None, "Socket")

    def said(self) -> str:
        where = f" over {', '.join(self.over)}" if self.over else ""
        return {"plugin": "a net plugin", "none": "no network"}.get(self.chosen, self.chosen) + where


def _socket_interfaces(interfaces: Sequence[Interface], value: str | None) -> list[str]:
    """The interfaces RCCL's sockets would use: NCCL_SOCKET_IFNAME's, else ib*, else any but docker* and lo."""
    addressed = [i.name for i in interfaces if i.addresses or i.up]
    if value and len(value.strip()) > 1:
        return [n for n in addressed if rccl_list_matches(value, n)]
    for rule in ("ib", "^docker,lo", "docker", "lo"):
        chosen = [n for n in addressed if rccl_list_matches(rule, n)]
        if chosen:
            return chosen
    return []


def _rate(port: RdmaPort) -> str:
    return f"{port.rate_gbps:g} Gb/s" if port.rate_gbps else "rate unknown"


def predict(
    fabric: Fabric,
    interfaces: Sequence[Interface],
    environ: Mapping[str, str],
    resolve: Callable[[str], Path | None],
    verbs_usable: Callable[[str], bool],
    unloadable: Callable[[Path], str | None] = lambda _: None,
) -> Transport:
    """The transport RCCL would choose between hosts, and the fastest this machine has. `resolve`: where the dynamic
    loader finds a library name (None: not found); `verbs_usable`: whether this process can open a verbs node."""
    net = (read("NCCL_NET", environ) or "").strip()
    plugin_value = (read("NCCL_NET_PLUGIN", environ) or "").strip()
    names = [plugin_value, f"librccl-net-{plugin_value}.so"] if plugin_value else list(DEFAULT_PLUGINS)
    plugin = next((found for n in names if (found := resolve(n)) is not None), None)
    broken = unloadable(plugin) if plugin is not None else None
    efa = [p for p in fabric.ports if p.device.startswith("efa") and p.active]
    ib_ports = [p for p in fabric.ports if p.active and p.link_layer in _IB_LINK_LAYERS]
    fastest_port = max(ib_ports, key=lambda p: p.rate_gbps or 0.0, default=None)
    if fabric.cxi_devices:
        fastest, kind = f"Slingshot ({', '.join(fabric.cxi_devices)}), through a libfabric net plugin", "Slingshot"
    elif fastest_port is not None:
        label = "IB" if fastest_port.kind == "InfiniBand" else fastest_port.kind  # as RCCL's own names say it
        fastest, kind = f"{fastest_port.name} ({fastest_port.kind}, {_rate(fastest_port)})", label
    elif efa:
        fastest, kind = f"EFA ({', '.join(p.name for p in efa)}), through a libfabric net plugin", "EFA"
    else:
        fastest, kind = None, None
    sockets = _socket_interfaces(interfaces, read("NCCL_SOCKET_IFNAME", environ))
    if fastest is None:
        fastest, kind = (f"TCP sockets ({', '.join(sockets)})", "Socket") if sockets else (None, None)

    gaps: list[Gap] = []
    unset: list[str] = []
    setting: list[tuple[str, str]] = []
    # 1. A net plugin with devices wins (RCCL does not say which devices a plugin has: its presence is the fact).
    if plugin is not None and broken is None and net.lower() not in ("ib", "socket"):
        return Transport("plugin", (str(plugin),), fastest, kind)
    if broken is not None:
        gaps.append(Gap("net-plugin-unloadable", (("plugin", str(plugin)), ("why", broken))))
    elif plugin is None and kind in ("Slingshot", "EFA"):
        gaps.append(Gap("net-plugin-missing", (("names", " or ".join(names)), ("default", DEFAULT_PLUGIN))))
    # 2. RCCL's InfiniBand/RoCE transport.
    ib_on = True
    disabled = (read("NCCL_IB_DISABLE", environ) or "").strip()
    if disabled and disabled not in ("0",):
        ib_on = False
        gaps.append(Gap("ib-disabled", (("value", disabled),)))
        unset.append("NCCL_IB_DISABLE")
    verbs = next((found for n in VERBS_SONAMES if (found := resolve(n)) is not None), None)
    if ib_ports and verbs is None:
        ib_on = False
        gaps.append(Gap("verbs-library-missing"))
    hca = read("NCCL_IB_HCA", environ)
    selected = [p for p in ib_ports if rccl_list_matches(hca, p.device, p.port)]
    if ib_ports and not selected:
        ib_on = False
        devices = ",".join(dict.fromkeys(p.device for p in ib_ports))
        ports = ", ".join(p.name for p in ib_ports)
        gaps.append(Gap("ib-hca-selects-none", (("value", hca or ""), ("ports", ports), ("devices", devices))))
        setting.append(("NCCL_IB_HCA", devices))
    nodes = [n for n in fabric.verbs_nodes if n.startswith("uverbs")]
    if selected and not nodes:
        ib_on = False
        gaps.append(Gap("uverbs-node-missing"))
    elif selected and not any(verbs_usable(n) for n in nodes):
        ib_on = False
        gaps.append(Gap("uverbs-node-denied", (("node", nodes[0]),)))
    if ib_on and selected:
        used = tuple(p.name for p in selected)
        chosen = "RoCE" if all(p.kind == "RoCE" for p in selected) else "IB"
        if net and net.lower() not in ("ib",):
            if net.lower() == "socket":
                chooses = (Gap("net-chooses-sockets", (("value", net),)),)
                return Transport("Socket", tuple(sockets), fastest, kind, chooses, ("NCCL_NET",))
            return _not_found(net, fastest, kind)
        rate = sum(p.rate_gbps or 0.0 for p in selected) or None
        return Transport(chosen, used, fastest, kind, gbps=rate)
    if net and net.lower() != "socket":
        return _not_found(net, fastest, kind, gaps)
    return Transport("Socket", tuple(sockets), fastest, kind, tuple(gaps), tuple(unset), tuple(setting))


def _not_found(net: str, fastest: str | None, kind: str | None, gaps: Sequence[Gap] = ()) -> Transport:
    """NCCL_NET names a network with no device here: RCCL fails to create the communicator (its first reason)."""
    return Transport("none", (), fastest, kind, (Gap("net-not-found", (("value", net),)), *gaps), ("NCCL_NET",))


def verbs_node_usable(root: Path, node: str) -> bool:
    """Whether this process may open /dev/infiniband/<node> for reading and writing (its mode, owner, groups)."""
    from jax_rocm7_plugin._machine import host_path

    path = host_path(root, f"/dev/infiniband/{node}")
    try:
        return os.access(path, os.R_OK | os.W_OK)
    except OSError:
        return False


def read_transport(settings: Settings, installs: Sequence[RocmInstall] = ()) -> Transport | None:
    """The transport of this machine as `settings` read it, within the machine probes' deadline (None: no fabric and
    nothing asked of one, or sysfs that does not answer; the node-health read names such a file). The dynamic
    loader's search is LD_LIBRARY_PATH, ld.so.conf and the default folders, plus the folders of `installs` (the ROCm
    installs found: RCCL's own RUNPATH names them)."""
    from jax_rocm7_plugin._safe_io import Deadline, with_deadline

    try:
        return with_deadline(lambda: _read_transport(settings, [d for i in installs for d in i.library_dirs]))
    except Deadline:
        return None


def _read_transport(settings: Settings, library_dirs: Sequence[Path]) -> Transport | None:
    from jax_rocm7_plugin import _environment
    from jax_rocm7_plugin._machine.fabric import read_fabric
    from jax_rocm7_plugin._machine.ld_resolve import ld_so_conf_dirs, search_dirs
    from jax_rocm7_plugin._machine.network import interfaces

    root = settings.sysroot
    fabric = read_fabric(root)
    environ = dict(_environment.matching(("NCCL_", "RCCL_"), settings.environ or {}))
    if not fabric.ports and not fabric.cxi_devices and _environment.read("NCCL_NET", environ) is None:
        return None
    dirs = [root / d.lstrip("/") for d in search_dirs(settings.ld_library_path, ld_so_conf_dirs(root))]
    dirs += list(library_dirs)

    def resolve(name: str) -> Path | None:
        if "/" in name:
            path = root / name.lstrip("/")
            return path if path.is_file() else None
        return next((d / name for d in dirs if (d / name).is_file()), None)  # a FIFO there is no library

    def unloadable(path: Path) -> str | None:
        """Why dlopen would fail on a plugin found: not an x86-64 ELF, or a library it needs that is not found."""
        from jax_rocm7_plugin._binary.elf_header import shared_object_problem
        from jax_rocm7_plugin._machine.ld_resolve import resolve_dependencies

        problem = shared_object_problem(path)
        if problem is not None:
            return problem
        missing = resolve_dependencies([path], root, settings.ld_library_path, preloaded=frozenset()).missing_names
        return f"it needs {', '.join(missing)}, which the dynamic loader cannot find" if missing else None

    return predict(fabric, interfaces(root), environ, resolve, lambda node: verbs_node_usable(root, node), unloadable)
