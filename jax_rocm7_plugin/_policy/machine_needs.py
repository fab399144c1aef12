"""What the GPU stack needs of the machine beyond its own files (data: machine_needs.json, each entry with its
source). Stdlib only; the doctor's."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

from jax_rocm7_plugin._record import NamedTuple

DATA = Path(__file__).resolve().parent / "machine_needs.json"


class KernelFeature(NamedTuple):
    option: str
    when: str  # gpu, gpus (two or more on the host), gpus-or-rdma
    severity: str
    purpose: str
    source: str


@cache
def _data() -> dict[str, Any]:
    return json.loads(DATA.read_text(encoding="utf-8"))


def kernel_features() -> tuple[KernelFeature, ...]:
    return tuple(
        KernelFeature(f["option"], f["when"], f["severity"], f["for"], f["source"]) for f in _data()["kernel_features"]
    )


def runtime_interface(file_name: str) -> str | None:
    """The single-instance interface a shared object's file name provides (libgomp.so.1, a vendored
    libgomp-a34b3233.so.1), or None."""
    match = _runtime_names().fullmatch(file_name)
    return _interface_of()[match.group(1)] if match else None


@cache
def _interface_of() -> dict[str, str]:
    return {
        stem: str(entry["interface"])
        for entry in _data()["single_instance_runtimes"]["interfaces"]
        for stem in entry["stems"]
    }


@cache
def _runtime_names() -> re.Pattern[str]:
    """Any stem, with auditwheel's hash where vendored, then .so and a version."""
    stems = "|".join(re.escape(stem) for stem in sorted(_interface_of(), key=len, reverse=True))
    return re.compile(rf"({stems})(?:-[0-9a-f]{{6,}})?\.so(?:\.[0-9.]+)?")


def write_room_bytes() -> int:
    return int(_data()["write_room_bytes"]["value"])


def stack_modules() -> frozenset[str]:
    """The kernel modules the GPU stack runs on, whose parameters are judged."""
    return frozenset(_data()["stack_modules"]["modules"])


class ManifestPolicy(NamedTuple):
    pip_prefixes: tuple[str, ...]
    system_prefixes: tuple[str, ...]  # ROCm's packages, in dpkg's and rpm's databases
    hash_max_bytes: int
    hash_budget_bytes: int


def manifest_policy() -> ManifestPolicy:
    data = _data()["manifests"]
    return ManifestPolicy(
        tuple(data["pip_prefixes"]), tuple(data["system_prefixes"]), int(data["hash_max_bytes"]),
        int(data["hash_budget_bytes"]),
    )  # fmt: skip


class NetworkFallback(NamedTuple):
    network_types: frozenset[str]  # mountinfo's names of the file systems MIOpen takes for network ones
    temp_variables: tuple[str, ...]  # where std::filesystem::temp_directory_path looks, in order (else /tmp)
    folders: Mapping[str, str]  # the variables whose unset default MIOpen moves -> the fix's folder name for each
    sources: tuple[str, ...]


def miopen_network_fallback() -> NetworkFallback:
    data = _data()["miopen_network_fallback"]
    return NetworkFallback(
        frozenset(data["network_types"]), tuple(data["temp_variables"]), dict(data["folders"]), tuple(data["sources"])
    )


class ConfigReader(NamedTuple):
    """A reader that reads the kernel's configuration itself, from one path (`path`, with {release})."""

    reader: str
    path: str
    options: tuple[str, ...]
    asked_by: str  # the variable under which it looks (judged at its effective value)
    effect: str
    force: str  # its own switch past the check, where its release has it
    sources: tuple[str, ...]


def kernel_config_readers() -> tuple[ConfigReader, ...]:
    readers = _data()["kernel_config_readers"]["readers"]
    return tuple(_config_reader(r) for r in readers)


def _config_reader(raw: dict[str, Any]) -> ConfigReader:
    sources = (raw["source"], raw["force_source"])
    options = tuple(raw["options"])
    return ConfigReader(raw["reader"], raw["path"], options, raw["asked_by"], raw["effect"], raw["force"], sources)
