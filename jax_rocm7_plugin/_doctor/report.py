"""The doctor's report as typed records; JSON only at the edge (`to_json`)."""

from __future__ import annotations

import json
from typing import Any

from jax_rocm7_plugin._findings import Finding
from jax_rocm7_plugin._record import NamedTuple


class GpuEntry(NamedTuple):
    kfd_node: int
    gfx_target: str | None
    product: str | None
    render_node: str | None
    usable: bool  # /dev/kfd and its render node open for reading and writing
    visible: bool  # left to HIP by the device-selection variables
    library_code: str | None  # the library's target that runs on it (None: none, or no targets known)
    memory_bytes: int | None = None  # its frame buffer (on an APU: the VRAM carve-out); None: not listed
    apu: bool = False  # shares the CPU's memory


class LibraryEntry(NamedTuple):
    path: str
    source: str
    version: str | None
    needed: tuple[str, ...]
    runpath: tuple[str, ...]
    exports: tuple[str, ...]
    amdgpu_targets: tuple[str, ...] | None
    missing_dependencies: tuple[str, ...] | None = None  # None: not resolved


class RocmInstallEntry(NamedTuple):
    location: str
    source: str
    version: str | None
    major: int | None
    hip_runtimes: tuple[str, ...]


class ExtensionEntry(NamedTuple):
    module: str
    capability: str
    available: bool
    missing: tuple[str, ...]
    source: dict[str, Any] | None  # what build.py recorded in _native/build_info.json


class Report(NamedTuple):
    findings: tuple[Finding, ...]  # most severe first; among equals, in the order of the checks
    sysroot: str
    packages: tuple[tuple[str, str | None], ...]  # distribution, version (None: not installed)
    gpus: tuple[GpuEntry, ...] = ()
    library: LibraryEntry | None = None
    installs: tuple[RocmInstallEntry, ...] | None = None  # None: the runtime was not looked at
    hip: dict[str, Any] | None = None  # the deep probe's answers (--deep), as its child reported them
    extensions: tuple[ExtensionEntry, ...] = ()
    first_jit: dict[str, Any] | None = None  # --deep: the first jit's steps and outcome (None: not run)
    health: Any = None  # the node's health as read (NodeHealth; None: not read): for --html, not in the JSON

    @property
    def ok(self) -> bool:
        return not any(f.blocks_rocm for f in self.findings)

    def to_json(self) -> dict[str, Any]:
        library: dict[str, Any] = {"found": False}
        if self.library is not None:
            entry = self.library
            library = {
                "found": True,
                "path": entry.path,
                "source": entry.source,
                "version": entry.version,
                "needed": list(entry.needed),
                "runpath": list(entry.runpath),
                "exports": list(entry.exports),
                "amdgpu_targets": list(entry.amdgpu_targets) if entry.amdgpu_targets is not None else None,
            }
            if entry.missing_dependencies is not None:
                library["missing_dependencies"] = list(entry.missing_dependencies)
        rocm: dict[str, Any] = {}
        if self.installs is not None:
            rocm = {
                "installs": [{**i._asdict(), "hip_runtimes": list(i.hip_runtimes)} for i in self.installs],
                "hip": self.hip,
            }
        return {
            "ok": self.ok,
            "findings": [f.to_json() for f in self.findings],
            "gpus": [g._asdict() for g in self.gpus],
            "rocm": rocm,
            "library": library,
            "packages": dict(self.packages),
            "extensions": [{**e._asdict(), "missing": list(e.missing)} for e in self.extensions],
            "sysroot": self.sysroot,
            "first_jit": self.first_jit,
        }


def render_json(report: Report) -> str:
    return json.dumps(report.to_json(), indent=2)
