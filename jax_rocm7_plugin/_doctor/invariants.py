"""Invariants of a working machine, checked as such whatever broke them (the doctor's, not the loader's).

Known-issue entries each name one bug; what users meet most is a machine that breaks a rule every working
machine keeps. Each function here checks one rule over what the check pipeline learned, and where its fix is a
change the doctor can make, says it as a `Remedy` (checked by _doctor/proof.py):

- one ROCm per process: every ROCm library the PJRT library's dependency walk takes comes from one install;
- every GPU the process will use is served, or hidden: a GPU the libraries cannot serve beside GPUs they can is
  named with the HIP_VISIBLE_DEVICES value that hides it and keeps the others;
- the kernel the machine runs has the fixes its GPU needs (_policy/linux_kernels.json, read from /proc/version);
- every variable the stack reads has a valid value (_policy/stack_variables.json): an empty or malformed one is
  named with what its reader does with it, and the valid value that keeps what was meant, or unsetting it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from jax_rocm7_plugin import _findings as catalog
from jax_rocm7_plugin._findings import Finding, Remedy
from jax_rocm7_plugin._machine import resolved
from jax_rocm7_plugin._pipeline import used_gpus

if TYPE_CHECKING:
    from jax_rocm7_plugin._machine.rocm_install import RocmInstall
    from jax_rocm7_plugin._pipeline import Facts
    from jax_rocm7_plugin._settings import Settings

# Findings about a GPU the libraries cannot serve, which hiding that GPU clears.
UNSERVED_IDS = ("gpu-arch-not-in-library", "math-library-gpu-unsupported")


def hide_unserved(facts: Facts, found: Sequence[Finding], unserved_targets: Iterable[str]) -> list[Finding]:
    """`found` with the fix of each finding about an unserved GPU led by the value of HIP_VISIBLE_DEVICES that
    hides it, where other GPUs the process would use are served (the others are kept, in HIP's numbering)."""
    from jax_rocm7_plugin._policy.gfx_targets import override_target, product_name

    unserved_set = set(unserved_targets)
    if not unserved_set:
        return list(found)
    override = override_target(facts.settings.hsa_override) if facts.settings.hsa_override else None
    used = used_gpus(facts)
    unserved = [(i, n) for i, n in used if (override or n.gfx_target) in unserved_set]
    kept = [(i, n) for i, n in used if (i, n) not in unserved]
    if not unserved or not kept:
        return list(found)  # nothing to keep: hiding is no fix
    value = ",".join(str(i) for i, _ in kept)
    hidden = ", ".join(f"GPU {i} ({n.gfx_target}{_product(product_name(n.gfx_target))})" for i, n in unserved)
    keeping = ", ".join(f"GPU {i} ({n.gfx_target})" for i, n in kept)
    lead = f"hide {hidden} from HIP and keep {keeping}: HIP_VISIBLE_DEVICES={value}"
    remedy = Remedy(environment=(("HIP_VISIBLE_DEVICES", value),))
    result = []
    for finding in found:
        if finding.id in UNSERVED_IDS and finding.severity != "info" and finding.remedy is None:
            fix = finding.fix.removeprefix(f"hide it from HIP: HIP_VISIBLE_DEVICES={value}")
            fix = f"{lead}; or, to use it, {fix}" if fix else lead
            finding = finding._replace(fix=fix, remedy=remedy)
        result.append(finding)
    return result


def unneeded_override(facts: Facts, found: Sequence[Finding]) -> list[Finding]:
    """`found` with the fix of a warning about HSA_OVERRIDE_GFX_VERSION made "unset it" (checked) where the library
    carries code for every GPU the process uses as itself: the override is a leftover (a line in ~/.bashrc from
    another GPU) that makes them run another processor's code."""
    from jax_rocm7_plugin._policy.gfx_targets import covering_target

    targets = facts.library_targets
    if not facts.settings.hsa_override or not targets:
        return list(found)
    own = [node.gfx_target for _, node in used_gpus(facts)]
    library = frozenset(targets)
    if not own or not all(gfx and covering_target(gfx, library) for gfx in own):
        return list(found)
    gpus = ", ".join(dict.fromkeys(g for g in own if g))
    fix = (
        f"unset HSA_OVERRIDE_GFX_VERSION: the PJRT library carries code for every GPU here as itself ({gpus}), and "
        "the override makes them run another processor's code (a leftover line in ~/.bashrc or a container's "
        "environment?)"
    )
    remedy = Remedy(environment=(("HSA_OVERRIDE_GFX_VERSION", None),))
    return [
        f._replace(fix=fix, remedy=remedy)
        if f.id == "hsa-override-gfx-version" and f.severity == "warning" and f.remedy is None
        else f
        for f in found
    ]


def _product(name: str | None) -> str:
    return f", {name}" if name else ""


def mixed_rocm(facts: Facts) -> list[Finding]:
    """rocm-installs-mixed: the ROCm libraries the PJRT library's dependency walk takes come from more than one
    install (an old ROCm first on LD_LIBRARY_PATH, a module that prepends another, a pip ROCm beside /opt/rocm).
    The fix is the LD_LIBRARY_PATH without the other installs' folders, where that is what mixes them."""
    from jax_rocm7_plugin._policy.rocm_policy import is_rocm_library

    runtime = facts.runtime
    walk = runtime.dependencies if runtime is not None else None
    if runtime is None or walk is None:
        return []
    installs = [i for i in runtime.installs if i.library_dirs]
    taken: dict[str, RocmInstall] = {}  # soname -> its install (a library outside every install is no install's)
    for soname, path in walk.found.items():
        install = _install_of(path, installs) if is_rocm_library(soname) else None
        if install is not None:
            taken[soname] = install
    homes = list(dict.fromkeys(_root_key(i) for i in taken.values()))
    if len(homes) < 2:
        return []
    by_home: dict[str, list[str]] = {}
    for soname, install in taken.items():
        by_home.setdefault(_root_key(install), []).append(soname)
    describe = {_root_key(i): i for i in taken.values()}
    versions = {describe[h].version for h in homes if describe[h].version}
    # The install to keep: the ROCm the library's release was built with, else the newest, else the one most of
    # the libraries come from (an old ROCm put first is what usually mixes them).
    from jax_rocm7_plugin._pipeline import library_release
    from jax_rocm7_plugin._policy import releases
    from jax_rocm7_plugin._policy.known_issues import version_tuple

    row = releases.get(library_release(facts))
    built_for = version_tuple(row.rocm_version) if row is not None and row.rocm_version else None

    def preference(home: str) -> tuple[bool, tuple[int, ...], int]:
        version = version_tuple(describe[home].version or "") or ()
        return (built_for is not None and version[:3] == built_for[:3], version, len(by_home[home]))

    keep = max(homes, key=preference)
    others = [h for h in homes if h != keep]
    settings = facts.settings
    root = settings.sysroot
    drop = [
        entry
        for entry in settings.ld_library_path
        if any(_within(_machine_real(root, entry), describe[h]) for h in others)
    ]
    evidence = tuple(
        f"{describe[h].location} ({describe[h].version or 'version unknown'}): {', '.join(sorted(by_home[h]))}"
        for h in homes
    ) + ((f"LD_LIBRARY_PATH={':'.join(settings.ld_library_path)}",) if settings.ld_library_path else ())
    severity = "error" if len(versions) > 1 else "warning"
    what = f"ROCm {' and '.join(sorted(versions))}" if len(versions) > 1 else "two copies of ROCm"
    summary = (
        f"the PJRT library would load {what} in one process: {_count(by_home[keep])} from "
        f"{describe[keep].location}, {', '.join(f'{_count(by_home[h])} from {describe[h].location}' for h in others)}"
    )
    if drop:
        left = [e for e in settings.ld_library_path if e not in drop]
        value = ":".join(left)
        change = f"LD_LIBRARY_PATH={value}" if left else "unset LD_LIBRARY_PATH"
        fix = (
            f"use one ROCm, {describe[keep].location}: take {', '.join(drop)} off LD_LIBRARY_PATH ({change}); if an "
            "environment module put it there, unload that module"
        )
        remedy = Remedy(environment=(("LD_LIBRARY_PATH", value if left else None),))
        return [catalog.rocm_installs_mixed(severity, summary, fix, evidence, remedy)]
    fix = (
        f"use one ROCm, {describe[keep].location}: remove the other install's folders from the dynamic loader's "
        f"search (/etc/ld.so.conf.d, then ldconfig) or uninstall {', '.join(describe[h].location for h in others)}"
    )
    return [catalog.rocm_installs_mixed(severity, summary, fix, evidence)]


def kernel_findings(facts: Facts) -> list[Finding]:
    """kernel-unsupported: a GPU the process uses needs amdgpu/KFD fixes this kernel does not have."""
    from jax_rocm7_plugin._machine import host_path
    from jax_rocm7_plugin._names import ROCM
    from jax_rocm7_plugin._policy import linux_kernels
    from jax_rocm7_plugin._safe_io import read_text

    used = {node.gfx_target for _, node in used_gpus(facts)}
    if not used:
        return []
    needing = [r for r in linux_kernels.requirements() if used & set(r.gfx)]
    path = host_path(facts.settings.sysroot, "/proc/version")
    try:
        banner = read_text(path, 4096)
    except (OSError, ValueError):
        return []  # not known: no finding
    kernel = linux_kernels.parse(banner)
    if kernel is None:
        return []
    found = []
    if linux_kernels.older_than_any_supported(kernel):
        oldest = linux_kernels.oldest_for_rocm_7()
        found.append(
            catalog.kernel_unsupported(
                f"this Linux kernel ({kernel.release}) is older than any AMD supports {ROCM} on: {oldest.why}",
                f"upgrade to a distribution of AMD's compatibility matrix; the oldest kernels there: {oldest.names}",
                (f"{path}: {banner.strip()[:160]}", *oldest.sources),
            )
        )
    for requirement in needing:
        if linux_kernels.has_fixes(kernel, requirement) is not False:
            continue
        gpus = ", ".join(sorted(used & set(requirement.gfx)))
        first = "; ".join(f["name"] for f in requirement.first_fixed)
        found.append(
            catalog.kernel_unsupported(
                f"this Linux kernel ({kernel.release}) lacks what {requirement.product} ({gpus}) needs: "
                f"{requirement.needs}",
                f"upgrade the Linux kernel to one with the fixes, the first of each kind being: {first}",
                (f"{path}: {banner.strip()[:160]}", *requirement.sources),
            )
        )
    return found


NAMED_SECONDS = 3.0  # what a value names is looked up on the machine for at most this long (a stale mount)


def variable_findings(settings: Settings, release: str | None = None) -> list[Finding]:
    """environment-variable-invalid for each variable of the stack whose value its reader cannot use as meant;
    `release`: the PJRT library's jax release, whose XLA knows the flags XLA_FLAGS may name."""
    from jax_rocm7_plugin._machine.named_things import missing, present
    from jax_rocm7_plugin._policy.stack_variables import problems
    from jax_rocm7_plugin._safe_io import Deadline, with_deadline

    found = []
    in_job = settings.job_hosts is not None

    def here(kind: str, value: str) -> tuple[str, str | None] | None:
        # A value may name a path on a stale network mount: its stat would wait as long as the mount does.
        try:
            what = with_deadline(
                lambda: missing(kind, value, settings.sysroot, settings.ld_library_path), NAMED_SECONDS
            )
        except Deadline:
            return f"names {value}, whose file system did not answer within {NAMED_SECONDS:g} s", None
        return None if what is None else (what, present(kind, settings.sysroot))

    for problem in problems(settings.environ or {}, here, in_job=in_job, release=release):
        variable = problem.variable
        if problem.corrected is not None:
            fix = f"set {variable.name}={problem.corrected}"
        else:
            fix = f"unset {variable.name} (or give it a valid value, e.g. {variable.name}={variable.example})"
        summary = f"{variable.name}={problem.value!r} {problem.what}: {problem.effect}"
        evidence = (f"{variable.name}={problem.value!r}", f"read by {variable.reader}: {variable.source}")
        if variable.rule_source is not None:
            evidence += (f"how {variable.reader} parses it: {variable.rule_source}",)
        if variable.used_at is not None:
            evidence += (f"where {variable.reader} hands it to the call that decides: {variable.used_at}",)
        remedy = Remedy(environment=((variable.name, problem.corrected),))
        found.append(catalog.stack_variable_invalid(problem.severity, summary, fix, evidence, remedy))
    return found


def _count(names: list[str]) -> str:
    return f"{len(names)} librar{'y' if len(names) == 1 else 'ies'}"


def _root_key(install: RocmInstall) -> str:
    """One key per install tree: its first library folder's real path without the lib/... tail."""
    first = resolved(install.library_dirs[0])
    return str(first.parent if first.name == "lib" else first)


def _install_of(path: Path, installs: Sequence[RocmInstall]) -> RocmInstall | None:
    """The install whose library folders hold `path` (real paths); an install with a version first."""
    real = resolved(path).parent
    holding = [i for i in installs if any(real == resolved(d) for d in i.library_dirs)]
    return next((i for i in holding if i.version), holding[0] if holding else None)


def _machine_real(root: Path, entry: str) -> Path:
    from jax_rocm7_plugin._machine import host_path

    return resolved(host_path(root, entry))


def _within(folder: Path, install: RocmInstall) -> bool:
    return any(folder == resolved(d) for d in install.library_dirs)
