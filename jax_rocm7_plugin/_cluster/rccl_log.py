"""What RCCL says it chose, read from its own NCCL_DEBUG=INFO lines (subsystems INIT and NET).

`cluster --deep` on GPUs asks RCCL for these lines in a file per process (NCCL_DEBUG_FILE, not the user's output)
and reads them after the collectives: the network it took ("Using network IB"), the devices or interfaces it took
them over ("NET/IB : Using [0]mlx5_0:1/IB ...", "NET/Socket : Using [0]eth0:10.0.0.5<0>"), why a faster one was not
taken ("Failed to open libibverbs.so[.1]", "NET/IB : No device found.", "No plugin found (librccl-net.so)"), the
libfabric provider of a plugin ("NET/OFI Selected Provider is cxi") and whether the channels between hosts use GPU
Direct RDMA ("via NET/IB/0/GDRDMA"). The formats are those of RCCL 2.16 to 2.30 and NCCL's (the tests quote public
logs of each). Stdlib only; a line it does not know is skipped.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from jax_rocm7_plugin._record import NamedTuple

_INFO = re.compile(r"NCCL INFO (.*)$")
_NETWORK = re.compile(r"^Using network (.+?)\s*$")
_IB_USING = re.compile(r"^NET/IB ?: Using (.*?)(?:\s*;\s*OOB\s+(\S+))?\s*$")
_SOCKET_USING = re.compile(r"^NET/Socket ?: Using (.*)$")
_ENTRY = re.compile(r"\[\d+\]([^\s\[;]+)")
_NO_PLUGIN = re.compile(r"No plugin found \(([^)]+)\)")
_LOADED = re.compile(r"Loaded net plugin (.+?) \(v\d+\)")
_PROVIDER = re.compile(r"NET/OFI Selected Provider is (\w+)")
_CHANNEL = re.compile(r"via NET/([^/\s]+)/\d+(?:\(\d+\))?(/GDRDMA)?")
_VERSION = re.compile(r"^(?:NCCL|RCCL) version (\S+)")


class RcclNet(NamedTuple):
    network: str | None = None  # "IB", "Socket", "AWS Libfabric", "RCCL-ANP", ...
    devices: tuple[str, ...] = ()  # "mlx5_0:1/IB", "mlx5_10:1/RoCE"
    interfaces: tuple[str, ...] = ()  # sockets' interfaces, "eth0"
    plugin_missing: tuple[str, ...] = ()  # the plugin files RCCL did not find
    plugin: str | None = None  # the plugin it loaded, by its own name
    provider: str | None = None  # libfabric's provider under a plugin (cxi, efa)
    verbs_missing: bool = False  # "Failed to open libibverbs.so[.1]"
    no_ib_device: bool = False  # "NET/IB : No device found."
    gdr: bool | None = None  # whether channels between hosts use GPU Direct RDMA (None: none seen)
    version: str | None = None

    @property
    def said(self) -> str:
        """ "IB over mlx5_0:1, mlx5_1:1 (GPU Direct RDMA)", "Socket over eth0 (libibverbs could not be opened)"."""
        if self.network is None:
            return "no network chosen in RCCL's lines"
        over = [d.rsplit("/", 1)[0] for d in self.devices] if self.network != "Socket" else list(self.interfaces)
        text = self.network + (f" over {', '.join(over)}" if over else "")
        if self.provider:
            text += f" (libfabric provider {self.provider})"
        notes = []
        if self.gdr is not None and self.network != "Socket":
            notes.append("GPU Direct RDMA" if self.gdr else "without GPU Direct RDMA")
        if self.network == "Socket" and self.verbs_missing:
            notes.append("libibverbs could not be opened")
        if self.network == "Socket" and self.no_ib_device:
            notes.append("RCCL found no InfiniBand/RoCE device")
        return text + (f" ({'; '.join(notes)})" if notes else "")


def parse(lines: Iterable[str]) -> RcclNet:
    """RCCL's choice from its INFO lines (a process's whole log, in order: the last word on each counts)."""
    found: dict[str, object] = {}
    missing: list[str] = []
    channels: list[bool] = []
    for line in lines:
        match = _INFO.search(line)
        if match is None:
            continue
        text = match.group(1).strip()
        if (m := _NETWORK.match(text)) is not None:
            found["network"] = m.group(1)
        elif (m := _IB_USING.match(text)) is not None:
            found["devices"] = tuple(_ENTRY.findall(m.group(1)))
        elif (m := _SOCKET_USING.match(text)) is not None:
            found["interfaces"] = tuple(e.split(":", 1)[0] for e in _ENTRY.findall(m.group(1)))
        elif (m := _VERSION.match(text)) is not None:
            found["version"] = m.group(1)
        if (m := _NO_PLUGIN.search(text)) is not None and m.group(1) not in missing:
            missing.append(m.group(1))
        if (m := _LOADED.search(text)) is not None:
            found["plugin"] = m.group(1)
        if (m := _PROVIDER.search(text)) is not None:
            found["provider"] = m.group(1)
        if "Failed to open libibverbs" in text:
            found["verbs_missing"] = True
        if text.startswith(("NET/IB : No device found", "NET/IB: No device found")):
            found["no_ib_device"] = True
        if (m := _CHANNEL.search(text)) is not None:
            channels.append(m.group(2) is not None)
    if channels:
        found["gdr"] = all(channels)
    return RcclNet(plugin_missing=tuple(missing), **found)  # type: ignore[arg-type]


def asked_environment(environ: dict[str, str], folder: str) -> dict[str, str]:
    """`environ` with RCCL asked for its INIT/NET lines in a file per process under `folder` (its NCCL_DEBUG_FILE
    takes %h for the host and %p for the pid); a level or subsystems the user set are kept."""
    from jax_rocm7_plugin import _environment

    changed = dict(environ)
    if _environment.read("NCCL_DEBUG", environ) is None:
        changed["NCCL_DEBUG"] = "INFO"
        changed["NCCL_DEBUG_SUBSYS"] = "INIT,NET"
    changed["NCCL_DEBUG_FILE"] = f"{folder}/rccl.%h.%p.log"
    changed[_environment.RCCL_LOG_DIR] = folder
    return changed


def this_process(limit: int = 4 * 1024 * 1024) -> RcclNet | None:
    """What RCCL wrote for this process under the folder the parent gave (None: no folder, or no file yet)."""
    import glob
    import os

    from jax_rocm7_plugin import _environment

    folder = _environment.read(_environment.RCCL_LOG_DIR)
    if not folder:
        return None
    files = glob.glob(os.path.join(glob.escape(folder), f"rccl.*.{os.getpid()}.log"))
    if not files:
        return None
    with open(files[0], encoding="utf-8", errors="replace") as handle:
        return parse(handle.read(limit).splitlines())
