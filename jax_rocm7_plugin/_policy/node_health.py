"""What a healthy GPU node looks like, per GPU kind, and the health read's thresholds (data: node_health.json).

Stdlib only; the JSON is read once per process, and only where health is judged (never inside `import jax`).
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any, Literal

from jax_rocm7_plugin._policy.gfx_targets import APU_DEVICE_IDS, APU_PROCESSORS
from jax_rocm7_plugin._record import NamedTuple

POLICY = Path(__file__).resolve().parent / "node_health.json"
Kind = Literal["instinct", "radeon", "apu", "unknown"]


@cache
def _policy() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(POLICY.read_text(encoding="utf-8"))
    return data


class KindRules(NamedTuple):
    """How a GPU of one kind reaches its host (see node_health.json, "kinds")."""

    kind: Kind
    link_speed_at_rest: bool  # the trained speed holds at idle: a slower link is a fault
    internal_switch: bool  # the card's own PCIe switch: the host link is its upstream port
    integrated: bool  # an APU: no PCIe link to judge
    partitions: bool  # compute and memory partition modes exist


def kind_of(target: str | None, device_id: int | None) -> Kind:
    if target is None:
        return "unknown"
    if target in APU_PROCESSORS or (device_id is not None and device_id in APU_DEVICE_IDS):
        return "apu"
    kinds = _policy()["kinds"]
    if target in kinds["instinct"]["targets"]:
        return "instinct"
    if target.startswith(tuple(kinds["radeon"]["target_prefixes"])):
        return "radeon"
    return "unknown"


def rules(target: str | None, device_id: int | None) -> KindRules:
    kind = kind_of(target, device_id)
    if kind == "unknown":  # judged as little as possible: no link speed, no switch, no partitions
        return KindRules(kind, False, False, False, False)
    entry = _policy()["kinds"][kind]
    return KindRules(
        kind,
        bool(entry["link_speed_at_rest"]),
        bool(entry["internal_switch"]),
        bool(entry["integrated"]),
        target in entry["partitions"],
    )


def on_xgmi_platform(device_id: int | None) -> bool:
    """A GPU made only for a baseboard whose GPUs form one XGMI hive."""
    return device_id is not None and f"0x{device_id:04x}" in _policy()["xgmi_platforms"]["device_ids"]


def devices_per_gpu(mode: str, device_id: int | None) -> int | None:
    """Devices jax lists for one GPU in compute mode `mode` (CPX: one per XCD), None where not known."""
    table = _policy()["partition_modes"]
    if mode == "CPX":
        count = table["xcds"].get(f"0x{device_id:04x}") if device_id is not None else None
        return int(count) if count is not None else None
    value = table["devices_per_gpu"].get(mode)
    return int(value) if value is not None else None


def default_modes() -> tuple[str, str]:
    """(compute, memory) modes a GPU comes in: SPX, NPS1."""
    table = _policy()["partition_modes"]
    return str(table["default_compute"]), str(table["default_memory"])


def threshold(name: str) -> float:
    return float(_policy()["thresholds"][name]["value"])


def bad_page_threshold(parameter: int | None, target: str | None, vram_bytes: int | None) -> int | None:
    """The retired pages past which the driver stops trusting a GPU, from amdgpu's `bad_page_threshold` module
    parameter (None: not readable, taken as the default -1); None where the GPU keeps no threshold."""
    if parameter is not None and parameter > 0:
        return parameter
    if parameter == -2:
        cover = int(threshold("bad_page_cover_bytes"))
        return vram_bytes // cover if vram_bytes else None
    if parameter == 0:  # retirement off
        return None
    value = _policy()["bad_page_thresholds"].get(target) if target is not None else None
    return int(value) if value is not None else None
