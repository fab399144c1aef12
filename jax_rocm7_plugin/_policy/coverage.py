"""Does the PJRT library carry code for these GPUs? gpu-arch-not-in-library and HSA_OVERRIDE_GFX_VERSION.

Without code for its processor (exact, or through a generic family), a GPU makes
the HIP runtime abort with hipErrorNoBinaryForGpu the first time a kernel loads.
We say so before that happens.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from jax_rocm7_plugin import _findings as catalog
from jax_rocm7_plugin._findings import Finding
from jax_rocm7_plugin._names import PJRT_DISTRIBUTION, ROCM
from jax_rocm7_plugin._policy.gfx_targets import covering_target, describe, override_suggestion, override_target
from jax_rocm7_plugin._record import NamedTuple
from jax_rocm7_plugin._settings import HSA_OVERRIDE

OVERRIDE_VARIABLE = HSA_OVERRIDE  # HSA_OVERRIDE_GFX_VERSION, as the settings read it


class GpuCoverage(NamedTuple):
    position: int | None  # the index HIP_VISIBLE_DEVICES names this GPU by; None: the variables hide it
    node_index: int
    own_target: str | None
    effective_target: str | None  # after HSA_OVERRIDE_GFX_VERSION
    covered_by: str | None


def gpu_coverage(
    gpus: Sequence[tuple[int | None, int, str | None]], library_targets: Collection[str], override_value: str | None
) -> list[GpuCoverage]:
    """`gpus`: (HIP_VISIBLE_DEVICES index or None when hidden, KFD node index, gfx target) of each GPU;
    `override_value`: HSA_OVERRIDE_GFX_VERSION as set."""
    override = override_target(override_value) if override_value else None
    targets = frozenset(library_targets)
    result = []
    for position, node, target in gpus:
        effective = override or target
        covered = covering_target(effective, targets) if effective else None
        result.append(GpuCoverage(position, node, target, effective, covered))
    return result


def override_findings(value: str | None, used_targets: Collection[str | None] = ()) -> list[Finding]:
    """hsa-override-gfx-version: a warning where the override makes some GPU HIP uses (`used_targets`, their own
    gfx names; empty: not known) run another processor's code; info where every one of them is that processor."""
    if value is None:
        return []
    target = override_target(value)
    unset = catalog.Remedy(environment=((OVERRIDE_VARIABLE, None),))
    if not value.strip():  # exported empty (docker run -e NAME, ${NAME:-}): ROCm/ROCR-Runtime#354
        return [
            catalog.hsa_override_gfx_version(
                f"{OVERRIDE_VARIABLE} is set but empty: ROCr releases before ROCm/rocm-systems#5686 reject it "
                "('is invalid'), hsa_init fails and no GPU can be used",
                (f"{OVERRIDE_VARIABLE}={value!r}", "https://github.com/ROCm/ROCR-Runtime/issues/354"),
                fix=f"unset {OVERRIDE_VARIABLE} (do not export it empty)",
                remedy=unset,
            )
        ]
    if target is None:
        return [
            catalog.hsa_override_gfx_version(
                f"{OVERRIDE_VARIABLE}={value!r} is not of the form X.Y.Z: ROCr rejects it ('is invalid'), hsa_init "
                "fails and no GPU can be used",
                (f"{OVERRIDE_VARIABLE}={value!r}",),
                "error",
                fix=f"unset {OVERRIDE_VARIABLE}, or write all three numbers of the processor to run as (e.g. 11.0.0)",
                remedy=unset,
            )
        ]
    evidence = (f"{OVERRIDE_VARIABLE}={value!r}", *(f"GPU {t}" for t in used_targets if t))
    if used_targets and all(t == target for t in used_targets):
        return [
            catalog.hsa_override_gfx_version(
                f"{OVERRIDE_VARIABLE}={value} names the GPUs' own processor ({target}): it changes nothing here",
                evidence,
                "info",
            )
        ]
    return [
        catalog.hsa_override_gfx_version(
            f"{OVERRIDE_VARIABLE}={value} makes ROCm treat every GPU as {target}; coverage is judged for {target}",
            evidence,
        )
    ]


def coverage_findings(
    coverage: Sequence[GpuCoverage], library_targets: Collection[str] | None, override_value: str | None
) -> list[Finding]:
    """gpu-arch-not-in-library, judged for the GPUs HIP will use (`coverage` of the others is left out):
    an error when none is covered, a warning when some are not."""
    coverage = [c for c in coverage if c.position is not None]
    if not coverage or not library_targets:
        return []  # no GPUs, or a library without GPU code objects (nothing to judge)
    missing = [c for c in coverage if c.covered_by is None and c.effective_target is not None]
    if not missing:
        return []
    covered = [c for c in coverage if c.covered_by is not None]
    names = ", ".join(dict.fromkeys(describe(c.effective_target) for c in missing))
    overridden = " (after HSA_OVERRIDE_GFX_VERSION)" if override_value else ""
    evidence = (
        *(
            f"KFD node {c.node_index}: {describe(c.own_target)}"
            + (f", treated as {c.effective_target}" if c.effective_target != c.own_target else "")
            + (f" -> runs code for {c.covered_by}" if c.covered_by else " -> no code object")
            for c in coverage
        ),
        f"library targets: {', '.join(sorted(library_targets))}",
    )
    if covered:
        visible = ",".join(str(c.position) for c in covered)
        return [
            catalog.gpu_arch_not_in_library(
                "warning",
                f"the PJRT library has no code for {names}{overridden}; HIP aborts with hipErrorNoBinaryForGpu "
                "if such a GPU is used",
                f"hide it from HIP: HIP_VISIBLE_DEVICES={visible}",
                evidence,
            )
        ]
    fix = f"use a {PJRT_DISTRIBUTION} built for this GPU (build/build.py wheels on a {ROCM} host with its gfx target)"
    suggestion = next(
        (s for c in missing if c.own_target and (s := override_suggestion(c.own_target, frozenset(library_targets)))),
        None,
    )
    if suggestion is not None and not override_value:
        fix += f"; as an unsupported workaround, HSA_OVERRIDE_GFX_VERSION={suggestion} runs a sibling's code"
    return [
        catalog.gpu_arch_not_in_library("error", f"the PJRT library has no code for {names}{overridden}", fix, evidence)
    ]
