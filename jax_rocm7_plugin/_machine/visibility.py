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


def gpu_uuid(token: str | None) -> int | None:
    """The KFD unique_id a `GPU-<16 hex digits>` names (as ROCR_VISIBLE_DEVICES and cluster records write it)."""
    if token is None or not token.upper().startswith("GPU-"):
        return None
    try:
        return int(token[4:], 16)
    except ValueError:
        return None


def _position(token: str, candidates: Sequence[int | None], *, uuids: bool) -> int | None:
    if uuids and token.upper().startswith("GPU-"):
        wanted = gpu_uuid(token)
        if wanted is None:
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


class IndexProblem(NamedTuple):
    """A HIP-level variable with indices past the GPUs ROCR_VISIBLE_DEVICES leaves."""

    variable: str
    value: str
    bad: tuple[str, ...]  # its entries that select no GPU
    indexes: int  # how many GPUs its indices count (what ROCr left)
    meant: str | None  # the value that selects the machine's GPUs these entries name, where ROCr left them


def index_problems(devices: DeviceSelection, unique_ids: Sequence[int | None]) -> list[IndexProblem]:
    """HIP_VISIBLE_DEVICES (or CUDA_VISIBLE_DEVICES) and GPU_DEVICE_ORDINAL count the GPUs that
    ROCR_VISIBLE_DEVICES leaves, not the machine's: name the entries that point past that list, and where the
    user evidently counted the machine's GPUs (the index is a machine GPU ROCr left), the value that selects it.
    `unique_ids`: each GPU of the machine's unique_id (None where the topology has none)."""
    rocr = list(range(len(unique_ids)))
    if devices.rocr is not None and devices.rocr.strip():
        rocr, _ = _select(devices.rocr, unique_ids, uuids=True)
    hip = (HIP_VISIBLE, devices.hip) if devices.hip is not None else (CUDA_VISIBLE, devices.cuda)
    found = []
    for variable, value in (hip, (GPU_ORDINAL, devices.ordinal)):
        if value is None or not value.strip() or value.strip() == "-1":
            continue  # unset, or hiding every GPU on purpose (visible-devices-hide-all says so)
        tokens = [t.strip() for t in value.split(",")]
        bad = [t for t in tokens if not (t.lstrip("-").isdigit() and 0 <= int(t) < len(rocr))]
        if not bad:
            continue
        meant = None
        if devices.rocr is not None and all(t.isdigit() and int(t) in rocr for t in tokens):
            meant = f"{variable}={','.join(str(rocr.index(int(t))) for t in tokens)}"
        found.append(IndexProblem(variable, value, tuple(bad), len(rocr), meant))
    return found


def index_finding(problems: Sequence[IndexProblem], machine_gpus: int, rocr: str | None) -> Finding | None:
    """visible-devices-index-invalid for `problems` (None when there are none)."""
    if not problems:
        return None
    first = problems[0]
    left = f"the {first.indexes} GPU(s) ROCR_VISIBLE_DEVICES={rocr!r} leaves" if rocr is not None else None
    counted = left or f"the machine's {machine_gpus} GPU(s)"
    summary = (
        f"{first.variable}={first.value!r} names {', '.join(first.bad)}, but its indices count {counted} "
        f"(0-{max(first.indexes - 1, 0)}): HIP ignores {'that entry' if len(first.bad) == 1 else 'those entries'} "
        "and everything after the first"
    )
    if first.meant is not None:
        fix = (
            f"to use the machine's GPU(s) {first.value} that ROCR_VISIBLE_DEVICES keeps, set {first.meant} with "
            f"ROCR_VISIBLE_DEVICES={rocr}; or unset ROCR_VISIBLE_DEVICES and keep {first.variable}={first.value}"
        )
    elif rocr is not None:
        fix = f"count from 0 within what ROCR_VISIBLE_DEVICES={rocr} leaves, or add those GPUs to ROCR_VISIBLE_DEVICES"
    else:
        fix = f"use indices 0-{max(machine_gpus - 1, 0)} (this machine's GPUs in KFD order)"
    evidence = tuple(
        f"{p.variable}={p.value!r}: {', '.join(p.bad)} past {p.indexes} GPU(s)"
        + (f"; meant: {p.meant}" if p.meant else "")
        for p in problems
    )
    return catalog.visible_devices_index_invalid(summary, fix, (*evidence, f"KFD topology: {machine_gpus} GPU(s)"))


def visible_device_findings(
    devices: DeviceSelection, gpus: Sequence[KfdNode], view: HipView | None = None
) -> list[Finding]:
    """`view`: hip_view of the same arguments, where the caller has it."""
    if not gpus:
        return []
    found: list[Finding] = []
    selections = (view or hip_view(devices, gpus)).selections
    problems = index_problems(devices, [g.properties.get("unique_id") for g in gpus])
    if selections and selections[-1].visible == 0:
        evidence = tuple(
            f"{s.variable}={s.value!r} leaves {s.visible} of the GPUs" + (f" ({s.note})" if s.note else "")
            for s in selections
        )
        meant = tuple(f"meant: {p.meant} with ROCR_VISIBLE_DEVICES={devices.rocr}" for p in problems if p.meant)
        found.append(
            catalog.visible_devices_hide_all(
                len(gpus),
                (*evidence, *meant, f"KFD topology: {len(gpus)} GPU(s)"),
                ", ".join(f"{s.variable}={s.value!r}" for s in selections),
            )
        )
    else:
        index = index_finding(problems, len(gpus), devices.rocr)
        found.extend([index] if index is not None else [])
    if devices.cuda is not None:
        shadowed = " (HIP_VISIBLE_DEVICES is also set and wins)" if devices.hip is not None else ""
        # Advice, not a fault: it warns only where the variable changes which GPUs (or their order) HIP uses.
        with_it = [node.index for _, node in (view or hip_view(devices, gpus)).gpus]
        without = [node.index for _, node in hip_view(devices._replace(cuda=None), gpus).gpus]
        found.append(
            catalog.cuda_visible_devices_set(
                (f"CUDA_VISIBLE_DEVICES={devices.cuda!r}{shadowed}",), changes_gpus=with_it != without
            )
        )
    return found
