"""What one process of a job publishes: a bounded record of what its job depends on.

Built from the facts the pipeline learned and its verdict (no second spelling of the checks): by the
preflight from the doctor's report, at backend start from the loader's reading. The preflight adds
the per-host facts only it compares (network interfaces, RDMA devices, /dev/shm, the open-file
limit); both add the host name and the variables that steer collectives. Secrets never leave the
process: values of variables whose names look like credentials, credentials in URLs, and any such
value seen again inside another value become `<redacted>`. JSON only at the edge (`to_json` /
`from_json`); `encode` keeps the record within the policy's bound.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jax_rocm7_plugin._findings import Finding
from jax_rocm7_plugin._job.steering import steering_environment
from jax_rocm7_plugin._machine.network import Interface
from jax_rocm7_plugin._pipeline import Facts
from jax_rocm7_plugin._policy import cluster_policy
from jax_rocm7_plugin._record import NamedTuple

if TYPE_CHECKING:
    from jax_rocm7_plugin._machine.gpu_health import NodeHealth
    from jax_rocm7_plugin._machine.pjrt_library import LibraryChoice

SCHEMA = 4  # 2: the library's identity (not always a full sha256), the PJRT C API among the versions; 3: health;
# 4: the transport RCCL would use between hosts


class GpuFact(NamedTuple):
    node: int  # KFD node index
    gfx: str | None
    unique_id: str | None  # "GPU-<16 hex digits>", as ROCR_VISIBLE_DEVICES names it
    pci_bus: str | None  # "0000:c1:00.0"


class RocmFact(NamedTuple):
    version: str | None
    source: str
    location: str


class JoinFact(NamedTuple):
    """How this process joined: from the launcher (detected) or the command line."""

    process_id: int
    num_processes: int
    local_process_id: int | None
    local_device_ids: tuple[int, ...] | None
    coordinator: str
    method: str  # "slurm", "ompi", "k8s", "mpi4py", ... or "arguments"


class GpuHealthFact(NamedTuple):
    """One physical GPU's health as the processes of a job compare it (None: not read)."""

    ordinal: int
    pci: str | None
    uncorrectable: int | None
    modes: str | None  # "SPX/NPS1"
    link: str | None  # "32 GT/s x16"
    power_cap: int | None  # watts
    level: str | None  # the forced performance level


class Fault(NamedTuple):
    """One of the node's own warnings: its id, its summary, and the ordinals of the GPUs it concerns (none: the
    host's own setting)."""

    id: str
    summary: str
    gpus: tuple[int, ...] = ()


class HealthFact(NamedTuple):
    """The node's health: its GPUs, and its own warnings."""

    gpus: tuple[GpuHealthFact, ...]
    faults: tuple[Fault, ...]


class TransportFact(NamedTuple):
    """The network RCCL would use between hosts on this host (_machine/transport.py), as the preflight compares it."""

    chosen: str  # IB, RoCE, Socket, plugin, none
    said: str  # "IB over mlx5_0:1, mlx5_1:1", "Socket over eth0"
    fastest: str | None  # the fastest this host has, in words
    fastest_kind: str | None  # IB, RoCE, Slingshot, EFA, Socket
    reasons: tuple[str, ...]  # why not a faster one
    steps: tuple[str, ...]  # what closes the gap
    gbps: float | None = None  # the line rate of what it would use (its active ports added up)

    @property
    def slower(self) -> bool:
        return self.chosen in ("Socket", "none") and self.fastest_kind not in (None, "Socket")


class ProcessRecord(NamedTuple):
    join: JoinFact
    host: str
    versions: tuple[tuple[str, str | None], ...]  # python, plugin, pjrt, jax, jaxlib, the PJRT C API
    library_path: str | None
    library_identity: str | None  # see `library_identity`
    rocm: RocmFact | None  # the install the library will load its HIP runtime from
    gpus: tuple[GpuFact, ...]
    visible: tuple[int, ...]  # KFD nodes left to HIP, in HIP's order
    ok: bool  # the doctor's verdict: the ROCm backend would come up
    first_error: tuple[str, str, str] | None  # id, summary, fix
    environment: tuple[tuple[str, str], ...]
    shm_bytes: int | None
    open_files: tuple[int | None, int | None]  # soft, hard; None: unlimited
    interfaces: tuple[Interface, ...]
    rdma_devices: tuple[str, ...]
    verbs_nodes: tuple[str, ...]
    truncated: tuple[str, ...] = ()  # what was left out to stay within the bound
    health: HealthFact | None = None  # read in the preflight, and at backend start by a host's first process
    transport: TransportFact | None = None  # read in the preflight (None: no fabric, or not read)

    @property
    def process_id(self) -> int:
        return self.join.process_id

    @property
    def used_gpus(self) -> tuple[int, ...] | None:
        """KFD nodes this process's backend would use: local_device_ids index HIP's devices.
        None when a local device id names no visible GPU."""
        ids = self.join.local_device_ids
        if ids is None:
            return self.visible
        if any(i < 0 or i >= len(self.visible) for i in ids):
            return None
        return tuple(self.visible[i] for i in ids)

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "join": self.join._asdict(),
            "host": self.host,
            "versions": dict(self.versions),
            "library": {"path": self.library_path, "identity": self.library_identity},
            "rocm": self.rocm._asdict() if self.rocm is not None else None,
            "gpus": [g._asdict() for g in self.gpus],
            "visible": list(self.visible),
            "ok": self.ok,
            "first_error": list(self.first_error) if self.first_error is not None else None,
            "environment": dict(self.environment),
            "shm_bytes": self.shm_bytes,
            "open_files": list(self.open_files),
            "interfaces": [[i.name, i.up, list(i.addresses)] for i in self.interfaces],
            "rdma": {"devices": list(self.rdma_devices), "verbs_nodes": list(self.verbs_nodes)},
            "truncated": list(self.truncated),
            "health": None if self.health is None else _health_json(self.health),
            "transport": None if self.transport is None else _transport_json(self.transport),
        }


def _health_json(health: HealthFact) -> dict[str, object]:
    return {"gpus": [list(g) for g in health.gpus], "faults": [[f.id, f.summary, list(f.gpus)] for f in health.faults]}


def from_json(data: Mapping[str, Any]) -> ProcessRecord:
    """A record another process published; ValueError when it is not one (another schema, garbage)."""
    return ProcessRecord(**_own_fields(data), **_shared_fields(data))


# What differs from process to process in a job; the rest is the same for a host or the whole job (`encode`).
_OWN_KEYS = ("schema", "join", "host", "environment", "truncated")


def _own_fields(data: Mapping[str, Any]) -> dict[str, Any]:
    try:
        if data.get("schema") != SCHEMA:
            raise ValueError(f"record schema {data.get('schema')!r}, expected {SCHEMA}")
        join = data["join"]
        ids = join["local_device_ids"]
        return {
            "join": JoinFact(
                int(join["process_id"]),
                int(join["num_processes"]),
                None if join["local_process_id"] is None else int(join["local_process_id"]),
                None if ids is None else tuple(int(i) for i in ids),
                str(join["coordinator"]),
                str(join["method"]),
            ),
            "host": str(data["host"]),
            "environment": tuple((str(k), str(v)) for k, v in data["environment"].items()),
            "truncated": tuple(str(t) for t in data.get("truncated", ())),
        }
    except (KeyError, TypeError, IndexError, AttributeError) as error:
        raise ValueError(f"not a cluster record: {type(error).__name__}: {error}") from None


def _shared_fields(data: Mapping[str, Any]) -> dict[str, Any]:
    try:
        rocm = data["rocm"]
        first = data["first_error"]
        return {
            "versions": tuple((str(k), None if v is None else str(v)) for k, v in data["versions"].items()),
            "library_path": _optional_str(data["library"]["path"]),
            "library_identity": _optional_str(data["library"]["identity"]),
            "rocm": None
            if rocm is None
            else RocmFact(_optional_str(rocm["version"]), str(rocm["source"]), str(rocm["location"])),
            "gpus": tuple(
                GpuFact(
                    int(g["node"]), _optional_str(g["gfx"]), _optional_str(g["unique_id"]), _optional_str(g["pci_bus"])
                )
                for g in data["gpus"]
            ),
            "visible": tuple(int(n) for n in data["visible"]),
            "ok": bool(data["ok"]),
            "first_error": None if first is None else (str(first[0]), str(first[1]), str(first[2])),
            "shm_bytes": None if data["shm_bytes"] is None else int(data["shm_bytes"]),
            "open_files": (_optional_int(data["open_files"][0]), _optional_int(data["open_files"][1])),
            "interfaces": tuple(
                Interface(str(n), bool(u), tuple(str(a) for a in addrs)) for n, u, addrs in data["interfaces"]
            ),
            "rdma_devices": tuple(str(d) for d in data["rdma"]["devices"]),
            "verbs_nodes": tuple(str(d) for d in data["rdma"]["verbs_nodes"]),
            "health": _health(data["health"]),
            "transport": _transport(data.get("transport")),
        }
    except (KeyError, TypeError, IndexError, AttributeError) as error:
        raise ValueError(f"not a cluster record: {type(error).__name__}: {error}") from None


def _transport_json(fact: TransportFact) -> dict[str, Any]:
    return {**fact._asdict(), "reasons": list(fact.reasons), "steps": list(fact.steps)}


def _transport(data: Any) -> TransportFact | None:
    if data is None:
        return None
    return TransportFact(
        str(data["chosen"]),
        str(data["said"]),
        None if data["fastest"] is None else str(data["fastest"]),
        None if data["fastest_kind"] is None else str(data["fastest_kind"]),
        tuple(str(r) for r in data["reasons"]),
        tuple(str(r) for r in data["steps"]),
        None if data.get("gbps") is None else float(data["gbps"]),
    )


def _health(data: Any) -> HealthFact | None:
    if data is None:
        return None
    gpus = tuple(
        GpuHealthFact(
            int(g[0]),
            _optional_str(g[1]),
            _optional_int(g[2]),
            _optional_str(g[3]),
            _optional_str(g[4]),
            _optional_int(g[5]),
            _optional_str(g[6]),
        )
        for g in data["gpus"]
    )
    # A record of a release before the GPUs were named as data carries (id, summary) only.
    faults = tuple(
        Fault(str(f[0]), str(f[1]), tuple(int(o) for o in f[2]) if len(f) > 2 else ()) for f in data["faults"]
    )
    return HealthFact(gpus, faults)


def decode(text: str, shared: dict[str, dict[str, Any]] | None = None) -> ProcessRecord:
    """A record as `encode` wrote it; ValueError when it is none. `shared`: a cache the caller keeps across
    the records of one job, of the part that is the same for a host or the whole job (most of a record),
    so that 10,000 alike records are parsed as a few."""
    from jax_rocm7_plugin._job import peer

    # A peer's bytes (_job/peer.py): bounded before they are parsed (a record is at most the policy's size; twice
    # that is room for another release's), nested and valued as JSON a record can be; any field of the wrong type
    # makes the whole record unreadable, never an exception past this function.
    limit = 2 * cluster_policy.record_max_bytes()
    own_text, _, shared_text = text.partition("\n")
    try:
        own = _own_fields(peer.loads(own_text, limit))
        fields = shared.get(shared_text) if shared is not None else None
        if fields is None:
            fields = _shared_fields(peer.loads(shared_text, limit))
            if shared is not None:
                shared[shared_text] = fields
    except (peer.Malformed, KeyError, IndexError, TypeError, AttributeError, OverflowError, RecursionError) as error:
        raise ValueError(f"not a cluster record: {type(error).__name__}: {error}") from None
    merged = {**own, **fields}
    return ProcessRecord._make([merged[name] for name in ProcessRecord._fields])  # by position: 10,000 are fast


def _optional_int(value: Any) -> int | None:
    return None if value is None else int(value)


def _optional_str(value: Any) -> str | None:
    """Text a record states as it is, or None; anything else (a list where a name belongs) makes it unreadable."""
    if value is None or isinstance(value, str):
        return value
    raise TypeError(f"{value!r} where text belongs")


def encode(record: ProcessRecord) -> str:
    """Compact JSON (`decode` reads it) within the policy's bound: the largest parts are cut, each cut named in
    `truncated`."""
    limit = cluster_policy.record_max_bytes()
    text = _dumps(record)
    for name, cut in _CUTS:
        if len(text.encode()) <= limit:
            break
        record = cut(record)._replace(truncated=(*record.truncated, name))
        text = _dumps(record)
    if len(text.encode()) > limit:  # only a host name of kilobytes is left: keep the verdict, lose the rest
        record = _bare(record)._replace(truncated=(*record.truncated, "everything but the verdict"))
        text = _dumps(record)
    return text


def _dumps(record: ProcessRecord) -> str:
    """Two lines of compact JSON: what is this process's own, then what it shares with its host or job."""
    data = record.to_json()
    own = {key: data.pop(key) for key in _OWN_KEYS}
    return f"{_compact(own)}\n{_compact(data)}"


def _compact(data: Mapping[str, Any]) -> str:
    return json.dumps(data, separators=(",", ":"), ensure_ascii=True)  # never a raw newline


def _bare(record: ProcessRecord) -> ProcessRecord:
    first = record.first_error
    return record._replace(
        host=record.host[:64],
        library_path=None,
        environment=(),
        interfaces=(),
        gpus=record.gpus[:8],
        visible=record.visible[:8],
        first_error=None if first is None else (first[0], first[1][:200], first[2][:200]),
    )


_CUTS = (
    (
        "interface addresses",
        lambda r: r._replace(interfaces=tuple(i._replace(addresses=i.addresses[:2]) for i in r.interfaces)),
    ),
    ("environment values", lambda r: r._replace(environment=tuple((k, v[:64]) for k, v in r.environment))),
    ("interfaces", lambda r: r._replace(interfaces=tuple(i for i in r.interfaces if i.up)[:16])),
    ("environment", lambda r: r._replace(environment=r.environment[:32])),
    ("gpus", lambda r: r._replace(gpus=r.gpus[:16])),
    ("health faults", lambda r: r._replace(health=r.health and r.health._replace(faults=r.health.faults[:8]))),
)


# --- building the record ---------------------------------------------------------------------


def file_sha256(path: Path) -> str | None:
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as stream:
            while chunk := stream.read(1 << 20):
                digest.update(chunk)
    except OSError:
        return None
    return digest.hexdigest()


_SAMPLE_BYTES = 1 << 20


def library_identity(library: LibraryChoice, *, full: bool) -> str | None:
    """What says two processes load the same library build, the same way on every host (never an inode).

    `full` (the preflight): the file's sha256. At backend start, hashing 500 MB in every process would cost
    seconds: the sha256 that the pjrt wheel's build_info states for its library, where the file still has the
    size stated there; else (JAX_ROCM_PJRT_LIBRARY, a runfile, a file swapped in the wheel) the size with a
    sha256 of its first and last MiB, where the ELF header, the build id and the section table live.
    """
    path = library.path
    if full:
        digest = file_sha256(path)
        return f"sha256:{digest}" if digest is not None else None
    try:
        size = path.stat().st_size
    except OSError:
        return None
    if library.pjrt_version is not None:
        stated = _stated_build(size)
        if stated is not None:
            return f"sha256:{stated}"
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as stream:
            digest.update(stream.read(_SAMPLE_BYTES))
            if size > 2 * _SAMPLE_BYTES:
                stream.seek(size - _SAMPLE_BYTES)
            digest.update(stream.read(_SAMPLE_BYTES))
    except OSError:
        return None
    return f"sampled:{size}:{digest.hexdigest()}"


def _stated_build(size: int) -> str | None:
    """The library sha256 in the pjrt wheel's build_info, where the size stated beside it is `size`."""
    import importlib

    from jax_rocm7_plugin._names import PJRT_PACKAGE

    try:
        info = importlib.import_module(PJRT_PACKAGE).build_info()
        stated, stated_size = info.get("library_sha256"), info.get("library_size")
    except (ImportError, OSError, ValueError, AttributeError):
        return None
    return str(stated) if isinstance(stated, str) and stated_size == size else None


def gpu_facts(facts: Facts) -> tuple[tuple[GpuFact, ...], tuple[int, ...]]:
    """Every GPU of the KFD topology, and the nodes HIP will use (in HIP's order)."""
    machine, view = facts.machine, facts.view
    if machine is None:
        return (), ()
    from jax_rocm7_plugin._machine.topology import pci_functions

    nodes = machine.topology.gpus
    functions = pci_functions(nodes)  # partitions of one GPU share its function
    gpus = tuple(
        GpuFact(
            node.index,
            node.gfx_target,
            f"GPU-{node.properties['unique_id']:016x}" if node.properties.get("unique_id") else None,
            functions[node.index][0] if node.index in functions else None,
        )
        for node in nodes
    )
    visible = tuple(node.index for _, node in view.gpus) if view is not None else ()
    return gpus, visible


def health_fact(facts: Facts, *, full: bool) -> HealthFact | None:
    """The node's health (_machine/gpu_health.py): everything in the preflight (`full`); at backend start only
    what is cheap and decisive, the error counters and partition modes."""
    machine = facts.machine
    if machine is None or not machine.topology.gpus:
        return None
    from jax_rocm7_plugin._machine.gpu_health import read_in_time
    from jax_rocm7_plugin._safe_io import Deadline

    try:
        node = read_in_time(facts.settings.sysroot, machine.topology, full=full)
    except Deadline:
        return None  # a hung driver: the backend's own start says more than a record could
    return summarised(node)


def summarised(node: NodeHealth) -> HealthFact:
    """What a record carries of a node's health: per GPU what hosts are compared by, and the node's warnings."""
    from jax_rocm7_plugin._machine.health_findings import health_findings

    gpus = tuple(
        GpuHealthFact(
            g.ordinal,
            g.pci,
            g.uncorrectable if g.ras else None,
            f"{g.compute_partition}/{g.memory_partition}" if g.compute_partition else None,
            f"{g.link.speed:g} GT/s x{g.link.width}" if g.link is not None and g.link.speed else None,
            round(g.power_cap_watts) if g.power_cap_watts is not None else None,
            g.performance_level,
        )
        for g in node.gpus
    )
    faults = tuple(
        Fault(f.id, f.summary, tuple(g.ordinal for g in f.concerns.gpus if g.ordinal is not None) if f.concerns else ())
        for f in health_findings(node)
        if f.severity == "warning"
    )
    return HealthFact(gpus, faults)


def rocm_fact(facts: Facts) -> RocmFact | None:
    """The ROCm install the library will load its HIP runtime from, as the pipeline chose it (`rocm_install`)."""
    from jax_rocm7_plugin._pipeline import rocm_install

    install = rocm_install(facts)
    if install is None and facts.runtime is not None and facts.runtime.installs:
        install = facts.runtime.installs[0]  # no ROCm 7 where the library looks: say which ROCm is there
    return None if install is None else RocmFact(install.version, install.source, install.location)


def failed_record(join: JoinFact, host: str, error: BaseException) -> ProcessRecord:
    """The record of a process whose doctor failed in a way no finding foresees: its backend counts as down."""
    from jax_rocm7_plugin._names import PLUGIN_PACKAGE

    summary = f"the doctor failed: {type(error).__name__}: {error}"[:500]
    fix = f"run `python -m {PLUGIN_PACKAGE} doctor` on that host and report what it prints"
    return ProcessRecord(
        join,
        host,
        (),
        None,
        None,
        None,
        (),
        (),
        False,
        ("doctor-internal-error", summary, fix),
        (),
        None,
        (None, None),
        (),
        (),
        (),
    )


class BackendVerdict(NamedTuple):
    """Would the ROCm backend come up in this process, and if not, the first reason (id, summary, fix)."""

    ok: bool
    first_error: tuple[str, str, str] | None

    @classmethod
    def of(cls, blocking: Finding | None) -> BackendVerdict:
        if blocking is None:
            return cls(True, None)
        return cls(False, (blocking.id, blocking.summary, blocking.fix))


def build_record(
    facts: Facts,
    join: JoinFact,
    environ: Mapping[str, str],
    host: str,
    *,
    verdict: BackendVerdict,
    packages: tuple[tuple[str, str | None], ...],
    host_probes: bool,
    node: NodeHealth | None = None,
) -> ProcessRecord:
    """This process's record from the pipeline's facts and verdict (`host`: its name, as
    `_machine.host.host_name` reads it under the sysroot; `packages`: (distribution, version) pairs).

    `host_probes` (the preflight): the file's full sha256 and the host's interfaces, RDMA devices, /dev/shm and
    open-file limit; without it (backend start) those stay empty and the library's identity is the cheap one.
    """
    root = facts.settings.sysroot
    gpus, visible = gpu_facts(facts)
    library = facts.library
    python = ("python", ".".join(str(n) for n in sys.version_info[:3]))
    c_api = facts.verdict.c_api_version if facts.verdict is not None else None
    record = ProcessRecord(
        join=join,
        host=host,
        versions=(python, *packages, ("PJRT C API", c_api)),
        library_path=str(library.path) if library is not None else None,
        library_identity=library_identity(library, full=host_probes) if library is not None else None,
        rocm=rocm_fact(facts),
        gpus=gpus,
        visible=visible,
        ok=verdict.ok,
        first_error=verdict.first_error,
        environment=steering_environment(environ),
        shm_bytes=None,
        open_files=(None, None),
        interfaces=(),
        rdma_devices=(),
        verbs_nodes=(),
    )
    if host_probes or join.local_process_id in (0, None):  # at backend start one process per host reads it
        # `node`: the health the caller read already (a job's plan keeps the files it was read from).
        record = record._replace(health=summarised(node) if node is not None else health_fact(facts, full=host_probes))
    if not host_probes:
        return record
    from jax_rocm7_plugin._machine.host import open_files_limit
    from jax_rocm7_plugin._machine.network import interfaces, rdma_devices
    from jax_rocm7_plugin._machine.shm import shm_size
    from jax_rocm7_plugin._machine.transport import read_transport

    rdma = rdma_devices(root)
    verdict = read_transport(facts.settings, facts.runtime.installs if facts.runtime is not None else ())
    transport = (
        None
        if verdict is None
        else TransportFact(
            verdict.chosen, verdict.said()[:200], verdict.fastest, verdict.fastest_kind,
            tuple(r[:200] for r in verdict.reasons[:4]), tuple(t[:300] for t in verdict.steps[:4]), verdict.gbps,
        )
    )  # fmt: skip
    return record._replace(
        shm_bytes=shm_size(root)[0],
        open_files=open_files_limit(),
        interfaces=interfaces(root),
        rdma_devices=rdma.devices,
        verbs_nodes=rdma.verbs_nodes,
        transport=transport,
    )
