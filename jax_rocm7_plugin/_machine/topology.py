"""The KFD topology the amdgpu driver publishes in sysfs, parsed defensively.

Format (one file per node, `/sys/class/kfd/kfd/topology/nodes/<N>/properties`):
one `key value` pair per line, value a decimal integer. CPU nodes report
`simd_count 0`; GPU nodes report their compute units' SIMDs, their target as
`gfx_target_version` (major*10000 + minor*100 + stepping) and their DRM render
minor (`/dev/dri/renderD<minor>`).

Pure functions over a sysroot. Nothing here raises for bad input: malformed lines
are skipped, unreadable or oversized files become problems the caller reports.
"""

from __future__ import annotations

import os
from pathlib import Path

from jax_rocm7_plugin._machine import host_path
from jax_rocm7_plugin._record import NamedTuple

TOPOLOGY_DIR = "/sys/class/kfd/kfd/topology/nodes"
# Real properties files are ~1.5 KB; anything far larger is not a KFD file.
MAX_PROPERTIES_BYTES = 64 * 1024


# Records on the loader's path are _record.NamedTuple classes: a dataclass costs ~0.6 ms to define,
# typing.NamedTuple ~0.3 ms (it compiles each annotation), ours ~0.03 ms, inside every `import jax`.


class KfdNode(NamedTuple):
    """One node of the KFD topology (a CPU or a GPU agent)."""

    index: int
    properties: dict[str, int]

    @property
    def simd_count(self) -> int:
        return self.properties.get("simd_count", 0)

    @property
    def is_gpu(self) -> bool:
        return self.simd_count > 0

    @property
    def gfx_target_version(self) -> int | None:
        return self.properties.get("gfx_target_version") or None

    @property
    def gfx_target(self) -> str | None:
        version = self.gfx_target_version
        return gfx_name(version) if version is not None else None

    @property
    def drm_render_minor(self) -> int | None:
        minor = self.properties.get("drm_render_minor")
        return minor if minor is not None and minor >= 0 else None

    @property
    def vendor_id(self) -> int | None:
        return self.properties.get("vendor_id")


class Topology(NamedTuple):
    """What the topology directory held: nodes read, and files that could not be."""

    present: bool
    nodes: tuple[KfdNode, ...] = ()
    problems: tuple[str, ...] = ()

    @property
    def gpus(self) -> tuple[KfdNode, ...]:
        return tuple(node for node in self.nodes if node.is_gpu)


def gfx_name(target_version: int) -> str | None:
    """gfx name for a KFD `gfx_target_version`: 90402 -> gfx942, 90010 -> gfx90a.

    Minor and stepping are one hex digit each in LLVM's processor names.
    """
    if target_version <= 0:
        return None
    major, rest = divmod(target_version, 10000)
    minor, stepping = divmod(rest, 100)
    if minor > 0xF or stepping > 0xF:
        return None
    return f"gfx{major}{minor:x}{stepping:x}"


def parse_properties(text: str) -> dict[str, int]:
    """`key value` lines to a dict; lines that are not a name and an integer are skipped."""
    properties: dict[str, int] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) != 2:
            continue
        key, value = parts
        if not key.isidentifier():
            continue
        try:
            properties[key] = int(value, 10)
        except ValueError:
            continue
    return properties


def read_properties(path: Path) -> tuple[dict[str, int] | None, str | None]:
    """(properties, None) or (None, why the file could not be used)."""
    from jax_rocm7_plugin._safe_io import NotARegularFile, read_file

    try:
        data = read_file(path, MAX_PROPERTIES_BYTES)
    except NotARegularFile as error:
        return None, str(error)
    except OSError as error:
        return None, f"{path}: {error.strerror or error}"
    if len(data) > MAX_PROPERTIES_BYTES:
        return None, f"{path}: larger than {MAX_PROPERTIES_BYTES} bytes, not a KFD properties file"
    return parse_properties(data.decode("utf-8", errors="replace")), None


def read_topology(root: Path) -> Topology:
    """Every node under the sysroot's KFD topology, in node order."""
    nodes_dir = host_path(root, TOPOLOGY_DIR)
    try:
        entries = os.listdir(nodes_dir)
    except FileNotFoundError:
        return Topology(present=False)
    except OSError as error:
        return Topology(present=False, problems=(f"{nodes_dir}: {error.strerror or error}",))
    nodes: list[KfdNode] = []
    problems: list[str] = []
    for name in sorted((e for e in entries if e.isdigit()), key=int):
        properties, problem = read_properties(nodes_dir / name / "properties")
        if problem is not None:
            problems.append(problem)
        elif properties is not None:
            nodes.append(KfdNode(index=int(name), properties=properties))
    return Topology(present=True, nodes=tuple(nodes), problems=tuple(problems))


def pci_functions(gpus: tuple[KfdNode, ...]) -> dict[int, tuple[str, int]]:
    """KFD node index -> (the PCI function of its GPU as domain:bus:device.function, its partition index).

    `location_id` is the function's bus << 8 | device << 3 | function. A partitioned GPU (MI300's DPX/QPX/CPX) is
    one KFD node per partition, and the driver ORs each partition's index into the low bits (kfd_topology.c:
    `location_id |= node_id`): partitions 0-7 of 0000:05:00.0 read as 05:00.0 to 05:00.7. Nodes that share
    everything but those bits are therefore partitions of one function, never functions of their own."""
    located = [
        (n.index, n.properties.get("domain", 0), n.properties["location_id"])
        for n in gpus
        if "location_id" in n.properties
    ]
    groups: dict[tuple[int, int], list[tuple[int, int]]] = {}
    for index, domain, location in located:
        groups.setdefault((domain, location & ~0x7), []).append((index, location))
    found: dict[int, tuple[str, int]] = {}
    for (domain, base), members in groups.items():
        for index, location in members:
            function = base if len(members) > 1 else location
            partition = location & 0x7 if len(members) > 1 else 0
            found[index] = (_bdf(domain, function), partition)
    return found


def _bdf(domain: int, location: int) -> str:
    return f"{domain:04x}:{(location >> 8) & 0xFF:02x}:{(location >> 3) & 0x1F:02x}.{location & 0x7}"
