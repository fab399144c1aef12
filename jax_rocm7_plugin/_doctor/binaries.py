"""`doctor --binary PATH...`: does each HIP binary carry code the GPUs of this machine can run?

For users' own kernels and libraries (FFI modules with offload bundles, `.co`/`.hsaco` code objects):
the answer "hipErrorNoBinaryForGpu" / "invalid device function" would otherwise give at the first
launch. A GPU runs a code object built for its processor, or for the generic family that holds it
(gfx_targets), whose xnack and sramecc settings, where stated, match the GPU's: XNACK is on only
with HSA_XNACK=1; SRAM ECC is on where KFD reports HSA_CAP_SRAM_EDCSUPPORTED. HSA_OVERRIDE_GFX_VERSION
makes every GPU look like the processor it names, as the runtime does.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from jax_rocm7_plugin._binary.code_objects import BinaryCode, CodeObject
from jax_rocm7_plugin._findings import Finding
from jax_rocm7_plugin._record import NamedTuple
from jax_rocm7_plugin._settings import HSA_XNACK, Settings

HSA_CAP_SRAM_EDCSUPPORTED = 0x00080000  # KFD node `capability` bit (kfd_topology.h)


class Gpu(NamedTuple):
    """A GPU HIP will use, as a code object sees it."""

    kfd_node: int
    target: str | None  # after HSA_OVERRIDE_GFX_VERSION
    xnack: bool
    sramecc: bool


class Verdict(NamedTuple):
    gpu: Gpu
    runs: bool
    why: str  # the code object it runs, or why none


def machine_gpus(settings: Settings) -> list[Gpu] | Finding:
    """The GPUs HIP will use on this machine (under the sysroot), in HIP's order; machine-probe-timeout
    when the driver does not answer (read under the same deadline as the loader's)."""
    from jax_rocm7_plugin._machine.devices import probe_within_deadline
    from jax_rocm7_plugin._machine.visibility import hip_view
    from jax_rocm7_plugin._policy.gfx_targets import override_target

    machine = probe_within_deadline(settings.sysroot)
    if isinstance(machine, Finding):
        return machine
    override = override_target(settings.hsa_override) if settings.hsa_override else None
    xnack = (settings.xnack or "").strip() == "1"
    return [
        Gpu(
            node.index,
            override or node.gfx_target,
            xnack,
            bool(node.properties.get("capability", 0) & HSA_CAP_SRAM_EDCSUPPORTED),
        )
        for _, node in hip_view(settings.devices, machine.topology.gpus).gpus
    ]


def judge(code: Sequence[CodeObject], gpu: Gpu) -> Verdict:
    """Whether any of `code` runs on `gpu`, and the code object that does, or why none does."""
    from jax_rocm7_plugin._policy.gfx_targets import family_of

    if gpu.target is None:
        return Verdict(gpu, False, "the GPU's target is unknown (no gfx_target_version in KFD)")
    family = family_of(gpu.target)
    for_processor = [c for c in code if c.target in (gpu.target, family)]
    if not for_processor:
        carried = ", ".join(sorted({c.target for c in code})) or "nothing"
        return Verdict(gpu, False, f"no code for {gpu.target} (it carries {carried})")
    for candidate in for_processor:
        if _setting_matches(candidate.xnack, gpu.xnack) and _setting_matches(candidate.sramecc, gpu.sramecc):
            return Verdict(gpu, True, f"runs {candidate}")
    built = ", ".join(str(c) for c in for_processor)
    state = f"XNACK is {'on' if gpu.xnack else 'off'} ({HSA_XNACK}=1 turns it on), SRAM ECC is " + (
        "on" if gpu.sramecc else "off"
    )
    return Verdict(gpu, False, f"code for {gpu.target} is built as {built} only; {state}")


def _setting_matches(required: str | None, enabled: bool) -> bool:
    return required not in ("on", "off") or (required == "on") == enabled


def describe(binary: BinaryCode, verdicts: Sequence[Verdict]) -> str:
    """One line: the binary, what it carries, and where it runs."""
    if binary.kind in ("no GPU code", "unreadable"):
        why = f": {'; '.join(binary.problems)}" if binary.problems else ""
        return f"{binary.path}: {binary.kind}{why}"
    targets = sorted({str(c) for c in binary.code})
    carried = ", ".join(targets) if len(targets) <= 6 else f"{len(targets)} targets ({', '.join(targets[:4])}, ...)"
    if not verdicts:
        return f"{binary.path}: {binary.kind} for {carried}; no GPU here to run it"
    good = [v for v in verdicts if v.runs]
    bad = [v for v in verdicts if not v.runs]
    if not bad:
        return f"{binary.path}: {binary.kind} for {carried} -> runs on every GPU ({_nodes(good)})"
    by_reason: dict[str, list[Verdict]] = {}
    for verdict in bad:
        by_reason.setdefault(verdict.why, []).append(verdict)
    reasons = "; ".join(f"{_node_list(group)} ({why})" for why, group in by_reason.items())
    runs = f"; runs on {_nodes(good)}" if good else ""
    return f"{binary.path}: {binary.kind} for {carried} -> NOT on {reasons}{runs}"


def _node_list(verdicts: Sequence[Verdict]) -> str:
    return f"KFD node{'s' if len(verdicts) > 1 else ''} {', '.join(str(v.gpu.kfd_node) for v in verdicts)}"


def _nodes(verdicts: Sequence[Verdict]) -> str:
    return f"{_node_list(verdicts)}: {', '.join(sorted({v.gpu.target or '?' for v in verdicts}))}"


def check_binaries(paths: Sequence[Path], settings: Settings) -> tuple[list[str], dict[str, Any], bool]:
    """(one line per binary, the same as JSON, whether every GPU binary runs on every GPU HIP will use)."""
    from jax_rocm7_plugin._binary.code_objects import binaries_under, read_binary

    found = machine_gpus(settings)
    gpus = [] if isinstance(found, Finding) else found
    lines: list[str] = []
    entries: list[dict[str, Any]] = []
    ok = bool(gpus)
    for path in paths:
        for binary in map(read_binary, binaries_under(path)):
            verdicts = [judge(binary.code, gpu) for gpu in gpus] if binary.code else []
            ok = ok and all(v.runs for v in verdicts)
            lines.append(describe(binary, verdicts))
            entries.append(
                {
                    "path": binary.path,
                    "kind": binary.kind,
                    "code_objects": [{**c._asdict(), "name": str(c)} for c in binary.code],
                    "gpus": [
                        {"kfd_node": v.gpu.kfd_node, "target": v.gpu.target, "runs": v.runs, "why": v.why}
                        for v in verdicts
                    ],
                    "problems": list(binary.problems),
                }
            )
    data: dict[str, Any] = {"ok": ok, "gpus": [g._asdict() for g in gpus], "binaries": entries}
    if isinstance(found, Finding):
        data["machine_problem"] = found.sentence()
    return lines, data, ok
