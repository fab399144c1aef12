"""Which AMD GPUs the device-selection variables leave to HIP: pure functions of their values and the topology.

Device selection happens in two layers. ROCr applies ROCR_VISIBLE_DEVICES to the
GPUs of the KFD topology (indices, or UUIDs `GPU-<16 hex digits>` made from the
node's `unique_id`). HIP then applies HIP_VISIBLE_DEVICES -- or, when that is
unset, CUDA_VISIBLE_DEVICES -- and GPU_DEVICE_ORDINAL, as indices into what ROCr
left. Like CUDA, a list is read up to its first invalid entry; an empty value or
-1 hides everything.
"""

from __future__ import annotations

from collections.abc import Sequence

from jax_rocm7_plugin import _findings as catalog
from jax_rocm7_plugin._findings import Finding
from jax_rocm7_plugin._machine.topology import KfdNode
from jax_rocm7_plugin._record import NamedTuple
from jax_rocm7_plugin._settings import CUDA_VISIBLE, GPU_ORDINAL, HIP_VISIBLE, ROCR_VISIBLE, DeviceSelection


class Selection(NamedTuple):
    variable: str
    value: str
    visible: int  # GPUs left visible after this variable
    note: str  # why entries were dropped, "" when all were valid


def _select(value: str, candidates: Sequence[int | None], *, uuids: bool) -> tuple[list[int], str]:
    """Positions into `candidates` that `value` selects, and a note on what was dropped.

    `candidates` holds the unique_id of each GPU (None when the topology has none).
    """
    chosen: list[int] = []
    tokens = value.split(",")
    for number, token in enumerate(t.strip() for t in tokens):
        position = _position(token, candidates, uuids=uuids)
        if position is None:
            rest = "" if number == len(tokens) - 1 else " and everything after it"
            return chosen, f"entry {token!r} selects no GPU, so it{rest} is ignored"
        if position not in chosen:
            chosen.append(position)
    return chosen, ""


def _position(token: str, candidates: Sequence[int | None], *, uuids: bool) -> int | None:
    if uuids and token.upper().startswith("GPU-"):
        try:
            wanted = int(token[4:], 16)
        except ValueError:
            return None
        known = [i for i, uid in enumerate(candidates) if uid == wanted]
        return known[0] if known else None
    try:
        index = int(token, 10)
    except ValueError:
        return None
    return index if 0 <= index < len(candidates) else None


def visible_selection(devices: DeviceSelection, gpus: Sequence[KfdNode]) -> tuple[list[Selection], list[int]]:
    """How each device-selection variable that is set narrows the GPUs, in the order they apply.

    Also returns the positions (into `gpus`) of the GPUs left visible, in HIP's order.
    """
    remaining: list[int] = list(range(len(gpus)))
    applied: list[Selection] = []
    hip = (HIP_VISIBLE, devices.hip) if devices.hip is not None else (CUDA_VISIBLE, devices.cuda)
    for (variable, set_value), uuids in (
        ((ROCR_VISIBLE, devices.rocr), True),
        (hip, False),
        ((GPU_ORDINAL, devices.ordinal), False),
    ):
        if set_value is None:
            continue
        value = set_value
        if value.strip() == "":
            remaining, note = [], "an empty value hides every GPU"
        else:
            unique_ids = [gpus[i].properties.get("unique_id") for i in remaining]
            positions, note = _select(value, unique_ids, uuids=uuids)
            remaining = [remaining[p] for p in positions]
        applied.append(Selection(variable, value, len(remaining), note))
    return applied, remaining


class HipView(NamedTuple):
    """What the device-selection variables leave to HIP (the check pipeline works it out once)."""

    selections: tuple[Selection, ...]  # each variable that is set, in the order they apply
    gpus: tuple[tuple[int, KfdNode], ...]  # the GPUs HIP will use, in its order, each with its HIP index

    def hip_index(self, node_index: int) -> int | None:
        """The index HIP_VISIBLE_DEVICES knows KFD node `node_index` by; None when the variables hide it."""
        return next((index for index, node in self.gpus if node.index == node_index), None)


def hip_view(devices: DeviceSelection, gpus: Sequence[KfdNode]) -> HipView:
    """The GPUs HIP will use, each with the index HIP_VISIBLE_DEVICES knows it by: its place among ROCr's GPUs."""
    selections, visible = visible_selection(devices, gpus)
    # HIP's indices count the GPUs ROCr leaves, whatever HIP's own variables then hide.
    rocr = visible_selection(DeviceSelection(rocr=devices.rocr), gpus)[1] if devices.rocr is not None else None
    return HipView(
        tuple(selections),
        tuple((rocr.index(p) if rocr is not None else p, gpus[p]) for p in visible),
    )


def visible_device_findings(
    devices: DeviceSelection, gpus: Sequence[KfdNode], view: HipView | None = None
) -> list[Finding]:
    """`view`: hip_view of the same arguments, where the caller has it."""
    if not gpus:
        return []
    found: list[Finding] = []
    selections = (view or hip_view(devices, gpus)).selections
    if selections and selections[-1].visible == 0:
        evidence = tuple(
            f"{s.variable}={s.value!r} leaves {s.visible} of the GPUs" + (f" ({s.note})" if s.note else "")
            for s in selections
        )
        found.append(catalog.visible_devices_hide_all(len(gpus), (*evidence, f"KFD topology: {len(gpus)} GPU(s)")))
    if devices.cuda is not None:
        shadowed = " (HIP_VISIBLE_DEVICES is also set and wins)" if devices.hip is not None else ""
        found.append(catalog.cuda_visible_devices_set((f"CUDA_VISIBLE_DEVICES={devices.cuda!r}{shadowed}",)))
    return found
