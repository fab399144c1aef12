"""What the pjrt wheel records about its library (build_info.json): ELF facts, offload targets, C API, ROCm."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from jax_rocm7_build.progress import Progress
from jax_rocm7_plugin._names import HIP_RUNTIME_PREFIX
from jax_rocm7_plugin._policy import releases


def library_c_api_version(path: Path) -> tuple[str | None, str | None]:
    """(version, None) from the loader's own load test (a child process), or (None, why not)."""
    from jax_rocm7_plugin._binary import load_test
    from jax_rocm7_plugin._settings import read_settings

    verdict = load_test.probe(path, "pjrt", read_settings(os.environ), use_cache=False)
    refused = load_test.verdict_finding(path, verdict)
    if refused is None and verdict.loaded and verdict.major is not None:
        return f"{verdict.major}.{verdict.minor or 0}", None
    why = refused.summary if refused is not None else verdict.error or "unknown error"
    return None, f"not loadable on the build machine: {why}"


def library_build_info(path: Path, progress: Progress, row: releases.Release | None) -> dict[str, Any]:
    """`row`: the release table's row when the library is the published one (it knows the ROCm version)."""
    from jax_rocm7_build.elf_facts import read_elf_facts

    progress.step("reading ELF facts and offload targets")
    facts = read_elf_facts(path)
    c_api, c_api_why = library_c_api_version(path)
    major = facts.hip_runtime_major
    rocm, evidence = (f"{major}.x", f"NEEDED {HIP_RUNTIME_PREFIX}{major}") if major is not None else (None, None)
    if row is not None and row.rocm_version is not None and (major is None or row.rocm_version.startswith(f"{major}.")):
        rocm, evidence = row.rocm_version, f"releases.json: {row.rocm_evidence}"
    return {
        "rocm_version": rocm,
        "rocm_version_evidence": evidence or "the library does not link libamdhip64",
        "amdgpu_targets": facts.offload_targets or None,
        "offload_bundles": facts.offload_bundles,
        "pjrt_c_api_version": c_api,
        "pjrt_c_api_version_unknown_because": c_api_why,
        "needed": facts.needed,
        "runpath": facts.runpath,
        "exports": facts.exports,
    }
