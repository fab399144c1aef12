"""The catalog of findings: what can stop (or hurt) the ROCm backend, and the fix.

The loader's one-line warning and the doctor's report are both rendered from
these objects, so the two never disagree. Ids are part of the public interface:
a closed set (FindingId), one constructor each, listed in the README (a test
checks the list).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Literal, get_args

from jax_rocm7_plugin._names import (
    JAX_EXTRA_REQUIREMENT,
    PJRT_DISTRIBUTION,
    PLUGIN_DISTRIBUTION,
    PLUGIN_PACKAGE,
    ROCM,
)
from jax_rocm7_plugin._record import NamedTuple
from jax_rocm7_plugin.version import JAX_RELEASE

Severity = Literal["error", "warning", "info"]
_SEVERITY_RANK: dict[str, int] = {"error": 0, "warning": 1, "info": 2}

FindingId = Literal[
    "amdgpu-driver-missing",
    "other-vendor-gpu",
    "kfd-device-missing",
    "render-node-missing",
    "kfd-permission-denied",
    "render-node-permission-denied",
    "no-gpu-nodes",
    "wsl-detected",
    "gpu-arch-not-in-library",
    "hsa-override-gfx-version",
    "rocm-not-found",
    "transport-slower-than-fabric",
    "transport-not-found",
    "transport-setting-against-guide",
    "rocm-major-mismatch",
    "rocm-older-than-library",
    "rocm-path-mismatch",
    "rocm-installs-mixed",
    "kernel-unsupported",
    "library-dependency-missing",
    "library-dependency-preloaded",
    "pjrt-wheel-missing",
    "pjrt-library-invalid",
    "pjrt-c-api-mismatch",
    "jaxlib-missing",
    "plugin-source-tree-shadows-install",
    "version-skew-jaxlib",
    "version-skew-pjrt",
    "conflicting-rocm-plugin",
    "cuda-plugin-present",
    "jax-platforms-excludes-rocm",
    "visible-devices-hide-all",
    "visible-devices-index-invalid",
    "cuda-visible-devices-set",
    "shm-too-small",
    "xla-client-env-invalid",
    "device-bitcode-missing",
    "hip-no-device",
    "hip-probe-failed",
    "custom-calls-unavailable",
    "extension-module-unavailable",
    "machine-probe-timeout",
    "pjrt-library-crashed",
    "environment-variable-invalid",
    "loader-internal-error",
    "doctor-internal-error",
    "plugin-install-damaged",  # reported by the entry module (jax_plugins/rocm7), which needs none of this
    "apu-vram-carveout-small",
    "first-jit-failed",
    "math-library-gpu-unsupported",
    "compile-temp-dir-unusable",
    "kernel-feature-missing",
    "kernel-config-unseen",
    "module-option-ignored",
    "module-option-not-in-effect",
    "python-module-provided-twice",
    "runtime-provided-twice",
    "write-dir-unusable",
    "write-dir-full",
    "write-dir-shared",
    "install-file-changed",
    "runtime-library-missing",
    "rocm-client-failed",  # the loader's, in a multi-process job: the client did not start though every check passed
    "known-issue",  # a public bug of the versions this machine runs (_policy/known_issues.json); see `known_issue`
    # The node's health (_machine/health_findings.py): a degraded GPU or a host setting, named with GPU and address.
    "gpu-uncorrectable-errors",
    "gpu-ras-inaccessible",
    "gpu-pages-retired",
    "gpu-correctable-errors",
    "pcie-link-degraded",
    "pcie-replays-rising",
    "xgmi-link-missing",
    "gpu-partition-mode",
    "gpu-partition-mixed",
    "gpu-power-capped",
    "gpu-performance-level",
    "gpu-hot-at-rest",
    "host-iommu-not-pt",
    "host-numa-balancing",
    "host-memlock-limited",
]
FINDING_IDS: tuple[FindingId, ...] = get_args(FindingId)
HEALTH_IDS: tuple[FindingId, ...] = FINDING_IDS[FINDING_IDS.index("gpu-uncorrectable-errors") :]
# Errors after which the backend still comes up, but programs abort (the doctor's only: the loader registers).
PROGRAMS_ABORT: frozenset[str] = frozenset({"math-library-gpu-unsupported", "compile-temp-dir-unusable"})
SkewKind = Literal["jaxlib", "pjrt"]
_REINSTALL_PJRT = f'pip install --force-reinstall "{PJRT_DISTRIBUTION}=={JAX_RELEASE}.*"'
# The plugin with ROCm from pip. PyPI has no ROCm 7: TheRock's `rocm` packages come from AMD's index of the
# machine's GPU family (_policy/rocm_families.json, "per_family_index", with sources). The pipeline puts the
# family of the GPUs in use where PIP_FAMILY stands (_pipeline._with_pip_family); elsewhere it stays for the
# user to fill in, with the README's table of families.
PIP_FAMILY = "<gpu-family>"
PIP_ROCM_INDEX = f"https://repo.amd.com/rocm/whl/{PIP_FAMILY}/"
_PIP_ROCM = f'--extra-index-url {PIP_ROCM_INDEX} "{PLUGIN_DISTRIBUTION}[with-rocm]"'
_RUN_DOCTOR = f"`python -m {PLUGIN_PACKAGE} doctor`"


# Findings that follow from another one when both are present: its fix repairs them too, so the text, the JSON
# (`follows`) and the page fold them under it. No ROCm 7 at all: every ROCm library the PJRT library and the
# extension modules need is missing for that one reason.
FOLLOWS: dict[str, tuple[str, ...]] = {
    "rocm-not-found": ("library-dependency-missing", "extension-module-unavailable"),
    "rocm-major-mismatch": ("library-dependency-missing", "extension-module-unavailable"),
    # The source tree's package judged in place of the installed one: its versions and modules are not the install's.
    "plugin-source-tree-shadows-install": (
        "version-skew-jaxlib",
        "version-skew-pjrt",
        "extension-module-unavailable",
        "custom-calls-unavailable",
    ),
}


def with_causes(found: Sequence[Finding]) -> list[Finding]:
    """`found`, each finding that follows from another present one (FOLLOWS) saying which (`follows`)."""
    present = {f.id for f in found}
    causes = [cause for cause in FOLLOWS if cause in present]
    result = []
    for finding in found:
        cause = next((c for c in causes if finding.id in FOLLOWS[c]), None)
        result.append(finding._replace(follows=cause) if cause is not None and finding.follows is None else finding)
    return result


class Remedy(NamedTuple):
    """A fix as a change the doctor can make to what it reads, so that it can check the fix by reading the machine
    again as it would be after it (`_doctor/proof.py`).

    `environment`: variables to set (a value) or unset (None); `groups`: numeric group ids the process gains.
    `checked`: None until the doctor has checked it; then True (with the change it finds no error) or False, and
    `outcome` says what it found. None with an `outcome`: the doctor tried and could not check it (why).
    """

    environment: tuple[tuple[str, str | None], ...] = ()
    groups: tuple[int, ...] = ()
    checked: bool | None = None
    outcome: str = ""

    def words(self) -> str:
        """The change as a user types it: NAME=value, unset NAME, --group-add GID."""
        parts = [f"{n}={v}" if v is not None else f"unset {n}" for n, v in self.environment]
        parts += [f"group {g}" for g in self.groups]
        return ", ".join(parts)

    def to_json(self) -> dict[str, object]:
        return {
            "environment": {n: v for n, v in self.environment},
            "groups": list(self.groups),
            "checked": self.checked,
            "outcome": self.outcome,
        }


class GpuRef(NamedTuple):
    """A GPU a finding concerns: its ordinal on its host (the doctor's `GPU n`: KFD order of physical GPUs), its PCI
    address where one is known, and its host in a job's findings."""

    ordinal: int | None
    pci: str | None
    host: str | None = None

    def to_json(self) -> dict[str, object]:
        return {k: v for k, v in self._asdict().items() if v is not None}


class Concerns(NamedTuple):
    """What a finding is about, as data (the pages, `--json` and the job's records read these; nothing parses the
    words): GPUs, the variables and files it names, and for a difference between hosts the attribute that differs,
    each value it takes and who holds it (the largest group first)."""

    gpus: tuple[GpuRef, ...] = ()
    variables: tuple[str, ...] = ()
    files: tuple[str, ...] = ()
    attribute: str | None = None
    values: tuple[tuple[str, tuple[str, ...]], ...] = ()
    groups: tuple[str, ...] = ()  # the job's collective groups it measured ("host:a", "pair:a,b")

    def to_json(self) -> dict[str, object]:
        data: dict[str, object] = {}
        if self.gpus:
            data["gpus"] = [g.to_json() for g in self.gpus]
        for name in ("variables", "files", "groups"):
            if getattr(self, name):
                data[name] = list(getattr(self, name))
        if self.attribute is not None:
            data["attribute"] = self.attribute
            data["values"] = [{"value": value, "held_by": list(holders)} for value, holders in self.values]
        return data


def gpu_refs(gpus: Iterable[Any], host: str | None = None) -> tuple[GpuRef, ...]:
    """GpuRefs of records that have `ordinal` and `pci` (the health reader's GpuHealth, the job's GpuHealthFact)."""
    return tuple(GpuRef(g.ordinal, g.pci, host) for g in gpus)


class Finding(NamedTuple):
    id: FindingId
    severity: Severity
    summary: str
    fix: str
    evidence: tuple[str, ...] = ()
    known_issue: str | None = None  # the known_issues.json entry, for `known-issue` findings
    remedy: Remedy | None = None  # the fix as a change the doctor can check (None: one it cannot make)
    concerns: Concerns | None = None  # what it is about, as data
    follows: FindingId | None = None  # the finding it is a consequence of (its cause's fix repairs it too)

    @property
    def blocks_rocm(self) -> bool:
        """An error: jax will not get a working RocmDevice (none at all, or, for PROGRAMS_ABORT, one whose programs
        abort); the doctor's `ok` is False."""
        return self.severity == "error"

    def checked_fix(self) -> str:
        """The fix, and where the doctor checked it by diagnosing again with it made, what it found then."""
        remedy = self.remedy
        if remedy is None or (remedy.checked is None and not remedy.outcome):
            return self.fix
        if remedy.checked is None:  # it could not be checked (no environment known, no time left): said so
            return f"{self.fix} (not checked: {remedy.outcome})"
        return f"{self.fix} ({'checked' if remedy.checked else 'not enough on its own'}: {remedy.outcome})"

    def sentence(self) -> str:
        """One line: cause, then fix (bytes that are not UTF-8 and line breaks escaped)."""
        text = f"{self.summary}. Fix: {self.fix}".replace("\r", "\\r").replace("\n", "\\n")
        return text.encode("utf-8", "backslashreplace").decode("utf-8")

    def to_json(self) -> dict[str, object]:
        data: dict[str, object] = self._asdict()
        data["evidence"] = list(self.evidence)
        if self.known_issue is None:
            del data["known_issue"]
        if self.remedy is None:
            del data["remedy"]
        else:
            data["remedy"] = self.remedy.to_json()
        concerns = self.concerns.to_json() if self.concerns is not None else {}
        if concerns:
            data["concerns"] = concerns
        else:
            del data["concerns"]
        if self.follows is None:
            del data["follows"]
        if self.severity != "info":
            data["fix_check"] = self.fix_check
        return data

    @property
    def fix_check(self) -> str:
        """Whether the doctor checked the fix: "checked" (with it made, the problem is gone), "not enough" (it is not),
        "not checked: <why>" (it tried and could not), or "cannot be checked" (a change the doctor cannot make:
        a driver, a package, a device node's owner)."""
        remedy = self.remedy
        if remedy is None:
            return "cannot be checked"
        if remedy.checked is None:
            return f"not checked: {remedy.outcome}" if remedy.outcome else "not checked"
        return "checked" if remedy.checked else "not enough"

    @property
    def key(self) -> tuple[str, str | None]:
        """What makes two findings the same: the id, and for known issues the entry."""
        return self.id, self.known_issue


def most_severe_first(findings: list[Finding]) -> list[Finding]:
    return sorted(findings, key=lambda f: _SEVERITY_RANK[f.severity])


def first_blocking(findings: list[Finding]) -> Finding | None:
    return next((f for f in findings if f.blocks_rocm), None)


_CONTAINER_DEVICES = "--device=/dev/kfd --device=/dev/dri"


def amdgpu_driver_missing(evidence: tuple[str, ...]) -> Finding:
    return Finding(
        "amdgpu-driver-missing",
        "error",
        "no AMD GPU driver: the KFD topology is absent and the amdgpu kernel module is not loaded",
        "install the amdgpu driver (amdgpu-dkms from AMD's ROCm repository) and reboot; in a "
        f"container, run on a host that has it and pass {_CONTAINER_DEVICES}",
        evidence,
    )


def other_vendor_gpu(evidence: tuple[str, ...]) -> Finding:
    return Finding(
        "other-vendor-gpu",
        "error",
        "this is an NVIDIA GPU machine (NVIDIA's driver is loaded, AMD's is not): it has no AMD GPU for ROCm",
        f"jax runs on the NVIDIA GPUs with jax-cuda*-plugin; remove the ROCm pair it does not need (pip uninstall "
        f"{PLUGIN_DISTRIBUTION} {PJRT_DISTRIBUTION}), or leave it: jax goes on without ROCm",
        evidence,
    )


def kfd_device_missing(evidence: tuple[str, ...]) -> Finding:
    return Finding(
        "kfd-device-missing",
        "error",
        "the amdgpu driver is loaded but /dev/kfd does not exist here",
        f"start the container with {_CONTAINER_DEVICES}",
        evidence,
    )


def kfd_permission_denied(fix: str, evidence: tuple[str, ...], remedy: Remedy | None = None) -> Finding:
    return Finding(
        "kfd-permission-denied",
        "error",
        "/dev/kfd exists but this user cannot open it for reading and writing",
        fix,
        evidence,
        remedy=remedy,
    )


def render_node_missing(severity: Severity, evidence: tuple[str, ...]) -> Finding:
    return Finding(
        "render-node-missing",
        severity,
        "the render node of " + ("every" if severity == "error" else "some") + " AMD GPU is missing under /dev/dri",
        f"start the container with {_CONTAINER_DEVICES}",
        evidence,
    )


def render_node_permission_denied(
    severity: Severity, fix: str, evidence: tuple[str, ...], remedy: Remedy | None = None
) -> Finding:
    return Finding(
        "render-node-permission-denied",
        severity,
        "this user cannot open the render node of "
        + ("any" if severity == "error" else "every")
        + " AMD GPU for reading and writing",
        fix,
        evidence,
        remedy=remedy,
    )


def no_gpu_nodes(evidence: tuple[str, ...]) -> Finding:
    return Finding(
        "no-gpu-nodes",
        "error",
        "the amdgpu driver is loaded but its KFD topology lists no GPU (no node with simd_count > 0)",
        "check that the GPU is supported by this driver (dmesg | grep -i amdgpu) and not "
        "hidden from this container or VM",
        evidence,
    )


def wsl_detected(evidence: tuple[str, ...]) -> Finding:
    return Finding(
        "wsl-detected",
        "info",
        "WSL detected (/dev/dxg): the GPU is reached through the WSL driver, not KFD",
        "nothing to do if the GPU shows up: the runtime reaches it through librocdxg, which `doctor` looks for "
        "(runtime-library-missing where the loader would not find it); from release 7.13 on it detects WSL by "
        "itself, before that it needs HSA_ENABLE_DXG_DETECTION=1, which the loader sets (known issue "
        "wsl-dxg-detection-off-before-7.13)",
        evidence,
    )


def pjrt_wheel_missing(evidence: tuple[str, ...]) -> Finding:
    return Finding(
        "pjrt-wheel-missing",
        "error",
        f"the ROCm PJRT library is not installed (no {PJRT_DISTRIBUTION} wheel, no JAX_ROCM_PJRT_LIBRARY)",
        f'pip install "{PJRT_DISTRIBUTION}=={JAX_RELEASE}.*"',
        evidence,
    )


def pjrt_library_invalid(summary: str, evidence: tuple[str, ...], named_by: str | None = None) -> Finding:
    """`named_by`: how the user gave the library (JAX_ROCM_PJRT_LIBRARY, or the CLI's --library); None: the
    installed wheel's."""
    if named_by is not None and named_by.startswith("--"):
        fix = f"give {named_by} the path of a PJRT plugin .so (or leave it out to examine the installed library)"
    else:
        fix = "point JAX_ROCM_PJRT_LIBRARY at a PJRT plugin .so, or unset it and reinstall the library: "
        fix += _REINSTALL_PJRT
    return Finding("pjrt-library-invalid", "error", summary, fix, evidence)


def library_dependency_missing(summary: str, evidence: tuple[str, ...], fix: str | None = None) -> Finding:
    """`fix`: where the doctor knows better than the general one (the package that provides a system library)."""
    return Finding(
        "library-dependency-missing",
        "error",
        summary,
        fix
        or f"install {ROCM} (AMD's packages into /opt/rocm, or pip install "
        f"{_PIP_ROCM}) or add its lib directory to LD_LIBRARY_PATH",
        evidence,
    )


def library_dependency_preloaded(names: list[str], directories: list[str], evidence: tuple[str, ...]) -> Finding:
    """The libraries the PJRT library needs are in the ROCm install's private directory its RUNPATH misses: the
    loader loads them from there by absolute path first, so the library loads."""
    where = " and ".join(directories)
    return Finding(
        "library-dependency-preloaded",
        "info",  # the loader works around it: nothing for the user to do, so no warning
        f"the PJRT library needs {', '.join(names)}, which its RUNPATH does not reach; they are in {where}, "
        "so the loader loads them from there first",
        f"nothing to do; to not depend on it, export LD_LIBRARY_PATH={':'.join(directories)}:$LD_LIBRARY_PATH",
        evidence,
    )


def pjrt_library_crashed(path: str, how: str, evidence: tuple[str, ...]) -> Finding:
    return Finding(
        "pjrt-library-crashed",
        "error",
        f"loading {path} kills the process ({how}), so it was not loaded",
        f"reinstall it ({_REINSTALL_PJRT}); if that does not help, "
        f"the library was built for another CPU or ROCm: report it with the output of {_RUN_DOCTOR}",
        evidence,
    )


def machine_probe_timeout(path: str | None, seconds: float) -> Finding:
    what = path or "the machine probe"
    return Finding(
        "machine-probe-timeout",
        "error",
        f"{what} did not answer within {seconds:g} s: the GPU driver may be hung",
        "look for amdgpu errors in `dmesg`, then reset the GPU or reboot; JAX_PLATFORMS=cpu skips the probe",
        (f"reading {what}",),
    )


def environment_variable_invalid(
    name: str, value: str, problem: str, *, blocks: bool, fix: str | None = None
) -> Finding:
    """`fix`: where the caller knows better than "unset it or set it to a valid value" (from _environment)."""
    fix = fix or f"unset {name} or set it to {_VARIABLE_WANTS.get(name, 'a valid value')}"
    severity: Severity = "error" if blocks else "warning"
    return Finding("environment-variable-invalid", severity, f"{name}={value!r} {problem}", fix, (f"{name}={value!r}",))


def stack_variable_invalid(
    severity: Severity, summary: str, fix: str, evidence: tuple[str, ...], remedy: Remedy | None = None
) -> Finding:
    """A variable of the stack under jax (ROCr, HIP, RCCL, the math libraries, XLA, jax) whose reader cannot use
    its value as meant (_policy/stack_variables.json): the same id as the plugin's own variables."""
    return Finding("environment-variable-invalid", severity, summary, fix, evidence, remedy=remedy)


_VARIABLE_WANTS = {
    "JAX_ROCM_SYSROOT": "an absolute path of a directory (a machine image's root)",
    "JAX_ROCM_PJRT_LIBRARY": "the absolute path of a PJRT plugin .so",
    "ROCM_PATH": "the directory of a ROCm install (e.g. /opt/rocm)",
    "JAX_ROCM_LOAD_TIMEOUT": "a number of seconds (e.g. 120 on a slow shared filesystem)",
}


def custom_calls_unavailable(cause: str, evidence: tuple[str, ...]) -> Finding:
    return Finding(
        "custom-calls-unavailable",
        "warning",
        f"ROCm custom calls unavailable: {cause}; jnp.linalg, jax.experimental.sparse, the GPU PRNG, "
        "RNN and Pallas kernels cannot run on the 'rocm' devices",
        f"use the ROCm library of this release, not a stand-in: unset JAX_ROCM_PJRT_LIBRARY or {_REINSTALL_PJRT}",
        evidence,
    )


def extension_module_unavailable(summary: str, evidence: tuple[str, ...]) -> Finding:
    return Finding(
        "extension-module-unavailable",
        "warning",
        summary,
        f"install {ROCM}'s libraries (AMD's packages into /opt/rocm, or pip install "
        f"{_PIP_ROCM}) or add their directory to LD_LIBRARY_PATH",
        evidence,
    )


def source_tree_shadows_install(here: str, there: str, installed: str, tree: str, *, differs: bool) -> Finding:
    """This package was imported from a source tree (the current folder is first on sys.path) while a built wheel of
    it is installed: what jax loads from this folder is the tree, not the install. An error where their releases
    differ (the tree's versions are judged, not the install's), info where they are one release."""
    return Finding(
        "plugin-source-tree-shadows-install",
        "error" if differs else "info",
        f"{PLUGIN_PACKAGE} was imported from the source tree at {here} (version {tree}), not from the "
        f"{PLUGIN_DISTRIBUTION} {installed} installed at {there}: Python looks in the current folder first",
        f"run from another folder (cd elsewhere) to use the installed {installed}, or install this tree itself",
        (f"imported: {here}", f"installed: {there}"),
        concerns=Concerns(files=(here, there)),
    )


def compile_temp_dir_unusable(
    folder: str | None,
    named_by: str | None,
    why: str,
    evidence: tuple[str, ...],
    variables: tuple[str, ...],
    files: tuple[str, ...],
) -> Finding:
    """XLA writes every GPU kernel's compile-time files in the first existing temporary folder (TEST_TMPDIR, TMPDIR,
    TMP, /tmp) and checks neither its writes nor, before that, that it may write there (_machine/temp_dir.py)."""
    if folder is None:
        summary = f"XLA finds no temporary folder to compile GPU kernels in ({why}): every jit fails"
        fix = "create /tmp (mode 1777), or set TMPDIR to a folder this user can write in"
    else:
        summary = (
            f"XLA compiles every GPU kernel in {folder} (taken from {named_by}), where this process cannot write "
            f"({why}): every kernel compiles to nothing and the first jit fails"
        )
        fix = (
            "set TMPDIR to a folder this user can write in (e.g. TMPDIR=$HOME/tmp after mkdir -p $HOME/tmp)"
            if named_by == "/tmp"
            else f"set {named_by} to a folder this user can write in, or unset it where /tmp is writable"
        )
    concerns = Concerns(variables=variables, files=files)
    return Finding("compile-temp-dir-unusable", "error", summary, fix, evidence, concerns=concerns)


def kernel_feature_missing(
    severity: Severity, missing: Sequence[tuple[str, str]], release: str | None, source: str, context: str
) -> Finding:
    """The running kernel was built without options the stack needs here (`missing`: option, what it is for;
    _policy/machine_needs.json), read from its configuration at `source`."""
    kernel = f"the running kernel ({release})" if release else "the running kernel"
    options = ", ".join(o for o, _ in missing)
    summary = f"{kernel} is built without {options} ({'; '.join(f'{o}: {why}' for o, why in missing)}), {context}"
    built = " ".join(f"{o}=y" for o, _ in missing)
    fix = f"boot a kernel built with {built} (your distribution's kernel, or rebuild this one with them)"
    evidence = tuple(f"{source}: # {o} is not set" for o, _ in missing)
    return Finding("kernel-feature-missing", severity, summary, fix, evidence, concerns=Concerns(files=(source,)))


def module_option_ignored(
    module: str, parameter: str, value: str, source: str, why: str, instead: str | None
) -> Finding:
    """A module option the kernel ignores: its module is not loaded, or has no such parameter (`why`); `instead`:
    the loaded module that has a parameter of that name."""
    summary = f"{source} sets {module}.{parameter}={value}, but {why}: the option does nothing"
    where = "the kernel command line" if source == "/proc/cmdline" else source
    if instead is not None:
        fix = (
            f"set {instead}.{parameter}={value} instead (in {where}; in /etc/modprobe.d: options {instead} "
            f"{parameter}={value}), then reboot"
        )
    else:
        fix = f"remove {module}.{parameter} from {where}, or name the module and parameter the running kernel has"
    evidence = (f"{source}: {module}.{parameter}={value}", why)
    return Finding("module-option-ignored", "warning", summary, fix, evidence, concerns=Concerns(files=(source,)))


def module_option_not_in_effect(module: str, parameter: str, asked: str, in_effect: str, source: str) -> Finding:
    where = "the kernel command line" if source == "/proc/cmdline" else source
    summary = (
        f"{where} sets {module}.{parameter}={asked}, but {in_effect} is in effect "
        f"(/sys/module/{module}/parameters/{parameter}): {module} was loaded without it"
    )
    fix = (
        "regenerate the initramfs (update-initramfs -u, or dracut -f) so that the module loads with it, then reboot"
        if source != "/proc/cmdline"
        else "reboot with that command line (update-grub after editing /etc/default/grub), then check the value"
    )
    evidence = (f"{source}: {module}.{parameter}={asked}", f"/sys/module/{module}/parameters/{parameter}: {in_effect}")
    return Finding("module-option-not-in-effect", "warning", summary, fix, evidence, concerns=Concerns(files=(source,)))


def python_module_provided_twice(
    module: str, providers: Sequence[tuple[str, str, str, tuple[str, ...]]], keep: str | None
) -> Finding:
    """Two distributions install one top-level module (`providers`: name, version, folder, who requires it): the
    files of one overwrote the other's, or the first folder of the path hides the other."""
    said = "; ".join(
        f"{name} {version} in {folder} (required by {', '.join(who) if who else 'no installed distribution'})"
        for name, version, folder, who in providers
    )
    summary = f"two distributions install the Python module {module}: {said}"
    others = [name for name, *_ in providers if name != keep]
    if keep is not None:
        fix = f"keep one: pip uninstall {' '.join(others)}, then pip install --force-reinstall {keep}"
    else:
        fix = f"keep one: pip uninstall one of {', '.join(n for n, *_ in providers)}, then reinstall the other"
    evidence = tuple(f"{folder}/{name}: RECORD lists {module}/" for name, _, folder, _ in providers)
    return Finding("python-module-provided-twice", "warning", summary, fix, evidence)


def runtime_provided_twice(interface: str, providers: Sequence[tuple[str, str]]) -> Finding:
    """Two copies of a runtime a process may hold once (`providers`: the file, who brings it in)."""
    said = "; ".join(f"{path} (brought by {who})" for path, who in providers)
    summary = f"two copies of the {interface} would be in one process where their users are imported together: {said}"
    fix = (
        "keep one copy in the process: run the one that brings its own in a separate process, or install a build "
        f"of it that uses the system's {interface}"
    )
    evidence = tuple(f"{who}: {path}" for path, who in providers)
    return Finding(
        "runtime-provided-twice",
        "warning",
        summary,
        fix,
        evidence,
        concerns=Concerns(files=tuple(p for p, _ in providers)),
    )


def write_dir_unusable(purpose: str, path: str, named_by: str, why: str, variable: str | None) -> Finding:
    summary = f"{purpose} is {path} ({named_by}), where this process cannot write: {why}"
    fix = (
        f"set {variable} to a folder this user can write in (mkdir -p it first)"
        if variable is not None
        else "make the folder writable by this user"
    )
    concerns = Concerns(variables=(variable,) if variable else (), files=(path,))
    return Finding("write-dir-unusable", "warning", summary, fix, (f"{named_by}: {path}", why), concerns=concerns)


def write_dir_full(purpose: str, path: str, named_by: str, free: int, need: int, variable: str | None) -> Finding:
    summary = (
        f"{purpose} is {path} ({named_by}), whose file system has {free // 2**20} MiB free: writes there can fail "
        f"midway (under {need // 2**20} MiB)"
    )
    fix = f"free space there, or set {variable} to a folder with room" if variable else "free space there"
    concerns = Concerns(variables=(variable,) if variable else (), files=(path,))
    return Finding("write-dir-full", "warning", summary, fix, (f"{path}: {free} bytes free",), concerns=concerns)


def kernel_config_unseen(
    reader: str,
    path: str,
    found_at: str | None,
    options: Sequence[str],
    asked: str,
    effect: str,
    force: str,
    sources: Sequence[str],
) -> Finding:
    """A reader that reads the kernel's configuration from one path only, where that path is not readable: it
    concludes the options it looks for are missing (`found_at`: where the configuration is, if anywhere)."""
    import shlex

    where = f"the configuration is at {found_at}" if found_at else "no copy of it is readable here"
    summary = (
        f"{reader} (the releases that read the kernel's configuration only from {path}) looks there ({asked}), and "
        f"it is not there or not readable ({where}): it takes {' and '.join(options)} for missing, and {effect}"
    )
    if found_at and found_at.endswith(".gz"):
        fix = (
            f"write it where {reader} reads it: zcat {shlex.quote(found_at)} | sudo tee {shlex.quote(path)} >/dev/null"
        )
    elif found_at:
        fix = f"copy it where {reader} reads it: sudo cp {shlex.quote(found_at)} {shlex.quote(path)}"
    else:
        fix = f"install the kernel's configuration as {path} (the distribution's kernel package ships it)"
    fix += f"; or, with a {reader} release that has it and a kernel built with them, set {force}"
    evidence = (f"{asked}", f"{path}: not readable", *((f"read by the doctor at {found_at}",) if found_at else ()))
    concerns = Concerns(files=(path,))
    return Finding("kernel-config-unseen", "warning", summary, fix, (*evidence, *sources), concerns=concerns)


def write_dir_shared(
    purpose: str, path: str, named_by: str, folders: Sequence[tuple[str, str]], sources: Sequence[str]
) -> Finding:
    """A folder every user writes in (sticky, world-writable: /tmp) taken by a reader whose files there carry no
    user's name (MIOpen's, moved there from a default on a network file system): the first user to write one owns
    it on that node, and another's run fails to write it. `folders`: (variable, a folder of this user's) to set."""
    summary = (
        f"{purpose} is {path} ({named_by}), a folder shared by every user of this node: MIOpen names its files "
        f"there without the user, so a file another user wrote first is one this process cannot write"
    )
    steps = " ".join(f"{variable}={folder}" for variable, folder in folders)
    made = " ".join(folder for _, folder in folders)
    fix = f"set {steps} (folders of this user's on a local file system; mkdir -p {made} first)"
    evidence = (f"{named_by}: {path}", f"{path}: sticky and writable by every user", *sources)
    remedy = Remedy(environment=tuple((variable, folder) for variable, folder in folders))
    concerns = Concerns(variables=tuple(v for v, _ in folders), files=(path,))
    return Finding("write-dir-shared", "warning", summary, fix, evidence, remedy=remedy, concerns=concerns)


def install_file_changed(
    system: str, package: str, version: str | None, missing: Sequence[str], changed: Sequence[str], step: str
) -> Finding:
    """Files of an installed package missing, or not the ones it installed (`system`: pip or dpkg; `step`: the
    reinstall command, quoted by the caller from validated names)."""
    said = f"{package} {version}" if version else package
    parts = [f"{len(missing)} missing"] if missing else []
    parts += [f"{len(changed)} changed (another size or digest than the package installed)"] if changed else []
    first = [*missing, *changed][:3]
    summary = f"files of {system}'s {said} are not as it installed them: {', '.join(parts)}, e.g. {', '.join(first)}"
    evidence = (*(f"missing: {p}" for p in missing[:8]), *(f"changed: {p}" for p in changed[:8]))
    concerns = Concerns(files=tuple(first))
    return Finding("install-file-changed", "warning", summary, f"reinstall it: {step}", evidence, concerns=concerns)


def compile_temp_dir_unanswered(path: str | None, seconds: float, variables: tuple[str, ...]) -> Finding:
    """The same kind where reading the candidates ran out of time (a stale network mount): tsl stats them the same
    way before the first compile, and would wait as long."""
    what = path or "the temporary folders"
    summary = f"{what} did not answer within {seconds:g} s: XLA looks there before compiling each GPU kernel"
    fix = "set TMPDIR to a local folder this user can write in (e.g. TMPDIR=$HOME/tmp after mkdir -p $HOME/tmp)"
    concerns = Concerns(variables=variables, files=(path,) if path else ())
    return Finding("compile-temp-dir-unusable", "error", summary, fix, (f"reading {what}",), concerns=concerns)


def version_skew(kind: SkewKind, summary: str, fix: str, evidence: tuple[str, ...]) -> Finding:
    finding_id: FindingId = "version-skew-jaxlib" if kind == "jaxlib" else "version-skew-pjrt"
    return Finding(finding_id, "error", summary, fix, evidence)


def pjrt_c_api_mismatch(summary: str, fix: str, evidence: tuple[str, ...]) -> Finding:
    return Finding("pjrt-c-api-mismatch", "error", summary, fix, evidence)


def jaxlib_missing() -> Finding:
    return Finding(
        "jaxlib-missing",
        "error",
        "jaxlib is not installed",
        f'pip install "{JAX_EXTRA_REQUIREMENT}=={JAX_RELEASE}"',
    )


def xla_client_env_invalid(message: str, evidence: tuple[str, ...]) -> Finding:
    return Finding(
        "xla-client-env-invalid",
        "error",
        f"an XLA client setting in the environment is invalid: {message}",
        "correct or unset that variable (see https://docs.jax.dev/en/latest/gpu_memory_allocation.html)",
        evidence,
    )


def device_bitcode_missing(evidence: tuple[str, ...], summary: str | None = None, fix: str | None = None) -> Finding:
    """XLA's compiler will not find what it links kernels with; `summary`: which, where (default: pip ROCm);
    `fix`: where the doctor found them in a folder the library does not search."""
    if summary is None:
        return Finding(
            "device-bitcode-missing",
            "warning",
            "ROCm from pip is in use but its device bitcode (ocml.bc) or ld.lld is missing, so XLA cannot compile "
            "kernels",
            f"reinstall it: pip install --force-reinstall {_PIP_ROCM}",
            evidence,
        )
    return Finding(
        "device-bitcode-missing",
        "warning",
        summary,
        fix
        or f"install {ROCM}'s device libraries and LLVM (AMD's packages: rocm-device-libs and rocm-llvm; or pip "
        f"install {_PIP_ROCM}), or set HIP_DEVICE_LIB_PATH to an amdgcn/bitcode folder and put ld.lld on PATH",
        evidence,
    )


_INSTALL_ROCM = (
    f"install {ROCM}: AMD's packages (https://rocm.docs.amd.com, amdgpu-install --usecase=rocm) into /opt/rocm, "
    f"or ROCm from pip: pip install {_PIP_ROCM}"
)


_TRANSPORT_UNNAMED = "nothing this doctor can name: read RCCL's NCCL_DEBUG=INFO lines (INIT,NET)"


def transport_slower_than_fabric(
    severity: Severity,
    would_use: str,
    fastest: str | None,
    reasons: Sequence[str],
    steps: Sequence[str],
    remedy: Remedy | None = None,
) -> Finding:
    """RCCL would carry traffic between hosts over TCP sockets where this machine has an RDMA fabric or Slingshot
    (_machine/transport.py; `reasons` and `steps` in TRANSPORT_GAPS' words): collectives across hosts run at a
    fraction of the fabric's speed."""
    summary = (
        f"RCCL would carry traffic between hosts over {would_use}, though this machine has {fastest}: "
        f"{reasons[0] if reasons else 'no usable RDMA port'}"
    )
    evidence = _transport_evidence(would_use, fastest, reasons)
    fix = "; ".join(steps) or _TRANSPORT_UNNAMED
    return Finding("transport-slower-than-fabric", severity, summary, fix, evidence, remedy=remedy)


def transport_not_found(
    would_use: str, fastest: str | None, reasons: Sequence[str], steps: Sequence[str], remedy: Remedy | None = None
) -> Finding:
    """NCCL_NET names a network RCCL does not have here (`reasons[0]`): it fails to create the communicator."""
    summary = f"{reasons[0]}: RCCL fails to create its communicator"
    evidence = _transport_evidence(would_use, fastest, reasons)
    fix = "; ".join(steps) or _TRANSPORT_UNNAMED
    return Finding("transport-not-found", "error", summary, fix, evidence, remedy=remedy)


def _transport_evidence(would_use: str, fastest: str | None, reasons: Sequence[str]) -> tuple[str, ...]:
    return (f"RCCL would use: {would_use}", f"the fastest this machine has: {fastest or 'none'}", *reasons)


def transport_setting_against_guide(
    severity: Severity, summary: str, fix: str, evidence: tuple[str, ...], remedy: Remedy | None = None
) -> Finding:
    """A variable the sites' and vendors' guides require on this fabric, or mark harmful
    (_policy/fabric_guides.json)."""
    return Finding("transport-setting-against-guide", severity, summary, fix, evidence, remedy=remedy)


def rocm_not_found(evidence: tuple[str, ...]) -> Finding:
    return Finding("rocm-not-found", "error", "no ROCm runtime is installed (no libamdhip64)", _INSTALL_ROCM, evidence)


def rocm_major_mismatch(evidence: tuple[str, ...], found: str | None = None) -> Finding:
    """`found`: what is installed instead, in words ("ROCm 6.4.1 at /opt/rocm-6.4.1"), for the summary."""
    what = found or "ROCm"
    return Finding(
        "rocm-major-mismatch",
        "error",
        f"{what} is installed, but not {ROCM}, which this {PJRT_DISTRIBUTION} library is built for",
        _INSTALL_ROCM + " (it can sit beside the other version in /opt/rocm-7.x.y)",
        evidence,
    )


def rocm_older_than_library(summary: str, fix: str, evidence: tuple[str, ...]) -> Finding:
    """The ROCm the library loads is of its major but older than the release it was built against."""
    return Finding("rocm-older-than-library", "warning", summary, fix, evidence)


def gpu_arch_not_in_library(severity: Severity, summary: str, fix: str, evidence: tuple[str, ...]) -> Finding:
    return Finding("gpu-arch-not-in-library", severity, summary, fix, evidence)


def hsa_override_gfx_version(
    summary: str,
    evidence: tuple[str, ...],
    severity: Severity = "warning",
    fix: str | None = None,
    remedy: Remedy | None = None,
) -> Finding:
    """A warning where the override changes the code some GPU HIP uses runs; info where it changes nothing; an
    error where ROCr cannot read it at all."""
    return Finding(
        "hsa-override-gfx-version",
        severity,
        summary,
        fix
        or "unset HSA_OVERRIDE_GFX_VERSION unless you need it: code built for another processor can "
        "compute wrong results or hang",
        evidence,
        remedy=remedy,
    )


def jax_platforms_excludes_rocm(value: str, evidence: tuple[str, ...]) -> Finding:
    return Finding(
        "jax-platforms-excludes-rocm",
        "error",
        f"JAX_PLATFORMS={value} leaves out rocm, so jax never loads the ROCm backend",
        "unset JAX_PLATFORMS, or add rocm to it (JAX_PLATFORMS=rocm,cpu)",
        evidence,
    )


def visible_devices_hide_all(gpu_count: int, evidence: tuple[str, ...], variables: str | None = None) -> Finding:
    """`variables`: the settings that hide them, as set ("HIP_VISIBLE_DEVICES=''"), for the summary."""
    return Finding(
        "visible-devices-hide-all",
        "error",
        f"{variables or 'the device-selection variables'} hide{'s' if variables and ',' not in variables else ''} "
        f"all {gpu_count} AMD GPU(s) from HIP",
        "unset them, or list valid indices (0.."
        f"{max(gpu_count - 1, 0)}), e.g. HIP_VISIBLE_DEVICES=0; ROCR_VISIBLE_DEVICES also takes GPU-<uuid>",
        evidence,
    )


def visible_devices_index_invalid(summary: str, fix: str, evidence: tuple[str, ...]) -> Finding:
    """HIP's device-selection variables name indices past the list ROCr left; HIP ignores them and what follows."""
    return Finding("visible-devices-index-invalid", "warning", summary, fix, evidence)


def cuda_visible_devices_set(evidence: tuple[str, ...], *, changes_gpus: bool) -> Finding:
    """A warning where CUDA_VISIBLE_DEVICES changes which GPUs HIP uses; info where it changes nothing."""
    effect = "and HIP honours it: it hides or reorders GPUs" if changes_gpus else "(here it changes nothing)"
    return Finding(
        "cuda-visible-devices-set",
        "warning" if changes_gpus else "info",
        f"CUDA_VISIBLE_DEVICES is set on an AMD machine {effect}; HIP_VISIBLE_DEVICES, where set, wins",
        "use HIP_VISIBLE_DEVICES (or ROCR_VISIBLE_DEVICES) for AMD GPUs and unset CUDA_VISIBLE_DEVICES",
        evidence,
    )


def shm_too_small(size_text: str, gpu_count: int, evidence: tuple[str, ...]) -> Finding:
    return Finding(
        "shm-too-small",
        "warning",
        f"/dev/shm holds only {size_text}, but RCCL needs more for collectives across {gpu_count} GPUs",
        "give the container more shared memory: docker run --shm-size=16g (or --ipc=host)",
        evidence,
    )


def conflicting_rocm_plugin(summary: str, fix: str, evidence: tuple[str, ...]) -> Finding:
    return Finding("conflicting-rocm-plugin", "error", summary, fix, evidence)


def cuda_plugin_present(evidence: tuple[str, ...]) -> Finding:
    return Finding(
        "cuda-plugin-present",
        "info",
        "a jax CUDA plugin is installed too: jax skips it where no NVIDIA GPU is visible; where both "
        "backends work, both register at priority 500 and the first one discovered becomes the default",
        "choose explicitly: JAX_PLATFORMS=rocm, or jax.devices('rocm') in code",
        evidence,
    )


def rocm_installs_mixed(
    severity: Severity, summary: str, fix: str, evidence: tuple[str, ...], remedy: Remedy | None = None
) -> Finding:
    return Finding("rocm-installs-mixed", severity, summary, fix, evidence, remedy=remedy)


def kernel_unsupported(summary: str, fix: str, evidence: tuple[str, ...]) -> Finding:
    return Finding("kernel-unsupported", "warning", summary, fix, evidence)


def rocm_path_mismatch(evidence: tuple[str, ...]) -> Finding:
    return Finding(
        "rocm-path-mismatch",
        "warning",
        "ROCM_PATH names one ROCm, but the dynamic loader takes the HIP runtime from another, so device "
        "libraries and runtime can come from different releases",
        "make them agree: point ROCM_PATH at the ROCm whose lib directory the loader uses, or fix LD_LIBRARY_PATH",
        evidence,
    )


def hip_no_device(error_name: str, evidence: tuple[str, ...]) -> Finding:
    return Finding(
        "hip-no-device",
        "error",
        f"the HIP runtime starts but reports no usable GPU ({error_name})",
        "check the findings above (driver, /dev/kfd, groups, visible-device variables); run rocminfo to compare",
        evidence,
    )


def hip_probe_failed(summary: str, evidence: tuple[str, ...]) -> Finding:
    return Finding(
        "hip-probe-failed",
        "error",
        summary,
        "run the deep probe again with AMD_LOG_LEVEL=4 to see the runtime's own log, and report it",
        evidence,
    )


def apu_vram_carveout_small(summary: str, evidence: tuple[str, ...]) -> Finding:
    return Finding(
        "apu-vram-carveout-small",
        "warning",
        summary,
        'raise the VRAM carve-out ("UMA frame buffer size") in the firmware setup, or let jax allocate as it '
        "goes: XLA_PYTHON_CLIENT_PREALLOCATE=false (see https://docs.jax.dev/en/latest/gpu_memory_allocation.html)",
        evidence,
    )


_FIRST_JIT_FIXES = {
    "toolchain-missing": f"install {ROCM}'s device libraries and LLVM (amdgcn/bitcode, llvm/bin/ld.lld: AMD's "
    f"packages into /opt/rocm, or pip install {_PIP_ROCM}), or point HIP_DEVICE_LIB_PATH at amdgcn/bitcode",
    "no-code-object": "use a library and kernels built for this GPU (`doctor --binary PATH` says which carry code "
    "for it)",
    "out-of-memory": "free the GPU (other processes), or let jax allocate as it goes: "
    "XLA_PYTHON_CLIENT_PREALLOCATE=false",
    "hang": "look for amdgpu errors in `dmesg` and rerun with AMD_LOG_LEVEL=3; a GPU reset may be needed",
}


def first_jit_failed(cause: str, summary: str, evidence: tuple[str, ...]) -> Finding:
    """doctor --deep: the first jitted program on 'rocm' did not compile, run or give numpy's answer."""
    fix = _FIRST_JIT_FIXES.get(
        cause, f"report it: python -m {PLUGIN_PACKAGE} report -- python your_program.py (bundles this and the HLO)"
    )
    return Finding("first-jit-failed", "error", f"the first jit on 'rocm' failed: {summary}", fix, evidence)


def math_library_gpu_unsupported(severity: Severity, summary: str, fix: str, evidence: tuple[str, ...]) -> Finding:
    """A ROCm math library the PJRT library loads has no kernel files for a GPU this process uses (doctor)."""
    return Finding("math-library-gpu-unsupported", severity, summary, fix, evidence)


def runtime_library_missing(summary: str, fix: str, evidence: tuple[str, ...]) -> Finding:
    """A library the ROCm runtime opens by name at run time would not be found (doctor; e.g. librocdxg on WSL)."""
    return Finding("runtime-library-missing", "error", summary, fix, evidence)


def rocm_client_failed(error: Exception) -> Finding:
    """In a multi-process job (where the loader makes a refusal fall back to the CPU): the ROCm client did not
    start although every check passed; jax's own error, as one line."""
    return Finding(
        "rocm-client-failed",
        "error",
        f"the ROCm client did not start ({type(error).__name__}: {str(error)[:500]})",
        f"run `python -m {PLUGIN_PACKAGE} doctor --deep` on this host: it starts the runtime and a first jit in a "
        "child, and says where it stops",
    )


def loader_internal_error(plugin_version: str, error: Exception) -> Finding:
    return Finding(
        "loader-internal-error",
        "error",
        f"{PLUGIN_DISTRIBUTION} {plugin_version} failed unexpectedly ({type(error).__name__}: {error})",
        f"report this with the output of {_RUN_DOCTOR}",
    )


def doctor_internal_error(error: Exception) -> Finding:
    return Finding(
        "doctor-internal-error",
        "error",
        f"the doctor failed unexpectedly ({type(error).__name__}: {error})",
        "report this at the project's issue tracker with the command you ran",
    )


def node_health(
    id: FindingId, severity: Severity, summary: str, fix: str, evidence: tuple[str, ...], gpus: Iterable[Any] = ()
) -> Finding:
    """A degraded GPU or host setting of this node (one of HEALTH_IDS; the rules: _machine/health_findings.py), with
    the GPUs it concerns (none: the host's)."""
    assert id in HEALTH_IDS, id
    refs = gpu_refs(gpus)
    return Finding(id, severity, summary, fix, evidence, concerns=Concerns(gpus=refs) if refs else None)


def known_issue(
    entry: str, severity: Severity, summary: str, fix: str, evidence: tuple[str, ...], remedy: Remedy | None = None
) -> Finding:
    """A public bug of the versions this machine runs; `entry` is its id in _policy/known_issues.json."""
    return Finding("known-issue", severity, summary, fix, evidence, entry, remedy)


# What keeps RCCL off a faster network between hosts, by the kind _machine/transport.py finds: the reason (a fact of
# this machine) and the step that closes it, with the values the reader gives ({name}).
TRANSPORT_GAPS: dict[str, tuple[str, str]] = {
    "net-plugin-unloadable": (
        "the net plugin {plugin} would not load: {why}",
        "make {plugin} loadable: {why} (install it, or add its folder to LD_LIBRARY_PATH)",
    ),
    "net-plugin-missing": (
        "no net plugin is on the dynamic loader's path ({names})",
        "put the libfabric net plugin (aws-ofi-rccl: {default}) on the loader's path: load your site's module for "
        "it, or add its lib folder to LD_LIBRARY_PATH, or set NCCL_NET_PLUGIN to its file; and NCCL_NET=OFI, so "
        "that a missing plugin stops the job instead of falling back to sockets",
    ),
    "ib-disabled": ("NCCL_IB_DISABLE={value} turns RCCL's InfiniBand/RoCE transport off", "unset NCCL_IB_DISABLE"),
    "verbs-library-missing": (
        "libibverbs.so.1 is not on the dynamic loader's path (RCCL opens it to use RDMA)",
        "install rdma-core's verbs library (Debian/Ubuntu: libibverbs1; RHEL: libibverbs; SUSE: libibverbs1)",
    ),
    "ib-hca-selects-none": (
        "NCCL_IB_HCA={value} selects none of the active ports ({ports})",
        "set NCCL_IB_HCA={devices} (or unset it)",
    ),
    "uverbs-node-missing": (
        "/dev/infiniband has no uverbs node: RCCL cannot open the RDMA devices (a container without them?)",
        "pass the RDMA devices into the container (docker run --device=/dev/infiniband; Kubernetes: an RDMA device "
        "plugin)",
    ),
    "uverbs-node-denied": (
        "this process cannot open /dev/infiniband/{node} for reading and writing",
        "give the uverbs nodes back the mode rdma-core's udev rules give them, or this user their group",
    ),
    "net-chooses-sockets": ("NCCL_NET={value} chooses sockets", "unset NCCL_NET"),
    "net-not-found": (
        "NCCL_NET={value} names a network RCCL does not have here ('Error: network {value} not found')",
        "unset NCCL_NET",
    ),
}


def transport_gap_words(kind: str, values: dict[str, str]) -> tuple[str, str]:
    """The reason and the step of a transport gap (TRANSPORT_GAPS)."""
    reason, step = TRANSPORT_GAPS[kind]
    return reason.format(**values), step.format(**values)


# The step that installs ROCm libraries missing from an installed ROCm 7, by the way it was installed
# (_machine/rocm_package_step.py gives the way and the values): library-dependency-missing's fix there.
PACKAGE_STEPS: dict[str, str] = {
    "pip": "install ROCm {version}'s libraries for this GPU into this Python, which ship {names}: {commands}",
    "native": "install the package of this ROCm (TheRock's native packages, {package}) that ships {names}: "
    "{install} {packages}",
    "system": "install the package of this ROCm{version} that ships {names} (its HIP runtime is {system}'s package "
    "{package}; find the library's package with `{search}`, then {install} it)",
    "tarball": "this ROCm is TheRock's tarball, which ships {names}, and the unpacked copy at {location} lacks it: "
    "unpack the same release's tarball again{where}",
}


def package_step_words(way: str, values: dict[str, str]) -> str:
    return PACKAGE_STEPS[way].format(**values)
