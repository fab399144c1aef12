"""Environment variables that decide whether jax sees the AMD GPUs: pure functions of the environment.

Device selection happens in two layers. ROCr applies ROCR_VISIBLE_DEVICES to the
GPUs of the KFD topology (indices, or UUIDs `GPU-<16 hex digits>` made from the
node's `unique_id`). HIP then applies HIP_VISIBLE_DEVICES -- or, when that is
unset, CUDA_VISIBLE_DEVICES -- and GPU_DEVICE_ORDINAL, as indices into what ROCr
left. Like CUDA, a list is read up to its first invalid entry; an empty value or
-1 hides everything.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import NamedTuple

from jax_rocm7_plugin import findings as catalog
from jax_rocm7_plugin.findings import Finding
from jax_rocm7_plugin.topology import KfdNode

ROCR_VISIBLE = "ROCR_VISIBLE_DEVICES"
HIP_VISIBLE = "HIP_VISIBLE_DEVICES"
CUDA_VISIBLE = "CUDA_VISIBLE_DEVICES"
GPU_ORDINAL = "GPU_DEVICE_ORDINAL"
# jax's platform aliases (xla_bridge._platform_aliases): "gpu" means any of these.
PLATFORM_ALIASES: dict[str, tuple[str, ...]] = {"gpu": ("cuda", "rocm", "oneapi")}


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


def visible_selection(environ: Mapping[str, str], gpus: Sequence[KfdNode]) -> tuple[list[Selection], list[int]]:
    """How each device-selection variable that is set narrows the GPUs, in the order they apply.

    Also returns the positions (into `gpus`) of the GPUs left visible, in HIP's order.
    """
    remaining: list[int] = list(range(len(gpus)))
    applied: list[Selection] = []
    hip_variable = HIP_VISIBLE if HIP_VISIBLE in environ else CUDA_VISIBLE if CUDA_VISIBLE in environ else None
    for variable, uuids in ((ROCR_VISIBLE, True), (hip_variable, False), (GPU_ORDINAL, False)):
        if variable is None or variable not in environ:
            continue
        value = environ[variable]
        if value.strip() == "":
            remaining, note = [], "an empty value hides every GPU"
        else:
            unique_ids = [gpus[i].properties.get("unique_id") for i in remaining]
            positions, note = _select(value, unique_ids, uuids=uuids)
            remaining = [remaining[p] for p in positions]
        applied.append(Selection(variable, value, len(remaining), note))
    return applied, remaining


def hip_view(environ: Mapping[str, str], gpus: Sequence[KfdNode]) -> list[tuple[int, KfdNode]]:
    """The GPUs HIP will use, each with the index HIP_VISIBLE_DEVICES knows it by: its place among ROCr's GPUs."""
    _, visible = visible_selection(environ, gpus)
    rocr_only = {ROCR_VISIBLE: environ[ROCR_VISIBLE]} if ROCR_VISIBLE in environ else {}
    _, rocr = visible_selection(rocr_only, gpus)
    return [(rocr.index(position), gpus[position]) for position in visible]


def visible_device_findings(environ: Mapping[str, str], gpus: Sequence[KfdNode]) -> list[Finding]:
    if not gpus:
        return []
    found: list[Finding] = []
    selections, _ = visible_selection(environ, gpus)
    if selections and selections[-1].visible == 0:
        evidence = tuple(
            f"{s.variable}={s.value!r} leaves {s.visible} of the GPUs" + (f" ({s.note})" if s.note else "")
            for s in selections
        )
        found.append(catalog.visible_devices_hide_all(len(gpus), (*evidence, f"KFD topology: {len(gpus)} GPU(s)")))
    if CUDA_VISIBLE in environ:
        shadowed = " (HIP_VISIBLE_DEVICES is also set and wins)" if HIP_VISIBLE in environ else ""
        found.append(catalog.cuda_visible_devices_set((f"CUDA_VISIBLE_DEVICES={environ[CUDA_VISIBLE]!r}{shadowed}",)))
    return found


def sysroot_finding(environ: Mapping[str, str]) -> Finding | None:
    """JAX_ROCM_SYSROOT when it cannot be a machine's root (nothing under it can then be read)."""
    sysroot = environ.get("JAX_ROCM_SYSROOT")
    if not sysroot:
        return None
    if not sysroot.startswith("/"):
        problem = "is not an absolute path"
    elif not os.path.isdir(sysroot):
        problem = "does not exist" if not os.path.lexists(sysroot) else "is not a directory"
    else:
        return None
    return catalog.environment_variable_invalid("JAX_ROCM_SYSROOT", sysroot, problem, blocks=True)


def variable_findings(environ: Mapping[str, str], root: Path | None = None) -> list[Finding]:
    """The plugin's own path variables, each checked before anything reads through it.

    ROCM_PATH names a machine path: it is looked for under `root` (the sysroot), when given.
    """
    from jax_rocm7_plugin.sysroot import host_path

    bad_root = sysroot_finding(environ)
    found: list[Finding] = [bad_root] if bad_root is not None else []
    library = environ.get("JAX_ROCM_PJRT_LIBRARY")
    if library and not library.startswith("/"):
        problem = "is a relative path (it would depend on the working directory)"
        found.append(catalog.environment_variable_invalid("JAX_ROCM_PJRT_LIBRARY", library, problem, blocks=True))
    rocm_path = environ.get("ROCM_PATH")
    if rocm_path and root is not None and not any(f.blocks_rocm for f in found):
        problem = None
        if not rocm_path.startswith("/"):
            problem = "is not an absolute path; ROCm is looked for in the usual places instead"
        elif not os.path.isdir(host_path(root, rocm_path)):
            problem = "is not a directory; ROCm is looked for in the usual places instead"
        if problem is not None:
            found.append(catalog.environment_variable_invalid("ROCM_PATH", rocm_path, problem, blocks=False))
    return found


def platforms_findings(environ: Mapping[str, str]) -> list[Finding]:
    """jax-platforms-excludes-rocm, read from JAX_PLATFORMS without importing jax."""
    value = environ.get("JAX_PLATFORMS", "")
    if not value.strip():
        return []
    names = [p.strip().lower() for p in value.split(",") if p.strip()]
    expanded = {alias for name in names for alias in PLATFORM_ALIASES.get(name, (name,))}
    if "rocm" in expanded:
        return []
    return [catalog.jax_platforms_excludes_rocm(value, (f"JAX_PLATFORMS={value!r}",))]
