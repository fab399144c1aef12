"""What a maintainer asks for besides the doctor: versions, the machine, the variables that steer JAX on AMD.

Each function returns text or JSON-able data for one file of the bundle. Machine files are read
under the sysroot through the bounded, non-blocking reads the loader uses; what cannot be read is
said in the file instead (a report never fails for a missing fact).
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from jax_rocm7_plugin import _environment
from jax_rocm7_plugin._machine import host_path
from jax_rocm7_plugin._names import PJRT_DISTRIBUTION, PJRT_PACKAGE, PLUGIN_DISTRIBUTION

# The variables that steer JAX, XLA, the ROCm runtime and its libraries, and the dynamic loader:
# shown with their values (secret-looking names redacted). Nothing else of the environment is listed.
VARIABLE_PREFIXES = (
    "JAX_", "XLA_", "TF_CPP_", "PJRT_", "HIP_", "ROCR_", "HSA_", "ROCM_", "HCC_", "AMD_", "GPU_", "RCCL_", "NCCL_",
    "MIOPEN_", "ROCBLAS_", "HIPBLASLT_", "TENSILE_", "OMPI_", "SLURM_", "PMI_",
)  # fmt: skip
VARIABLE_NAMES = (
    "LD_LIBRARY_PATH", "LD_PRELOAD", "PATH", "PYTHONPATH", "CUDA_VISIBLE_DEVICES", "XDG_CACHE_HOME",
    "VIRTUAL_ENV", "CONDA_PREFIX", "KUBERNETES_SERVICE_HOST",
)  # fmt: skip
# Distributions whose versions the report names (besides every jax plugin installed).
DISTRIBUTIONS = ("jax", "jaxlib", PLUGIN_DISTRIBUTION, PJRT_DISTRIBUTION, "numpy", "ml-dtypes", "scipy", "opt-einsum")
MACHINE_FILES = (
    "/etc/os-release",
    "/proc/version",
    "/proc/sys/kernel/osrelease",
    "/proc/meminfo",
    "/sys/module/amdgpu/version",
    "/proc/1/cgroup",
)
KFD_NODES = "/sys/class/kfd/kfd/topology/nodes"
MAX_FILE_BYTES = 256 * 1024
MAX_KERNEL_LOG_BYTES = 4 * 1024 * 1024
KERNEL_LOG_WORDS = ("amdgpu", "kfd", "drm")


def allowlisted(environ: Mapping[str, str]) -> list[tuple[str, str]]:
    """The variables a report lists, sorted by name."""
    return _environment.matching((*VARIABLE_PREFIXES, *VARIABLE_NAMES), environ)


def versions() -> dict[str, Any]:
    """Python, the OS as Python sees it, and the versions of the distributions that matter, with build info."""
    from jax_rocm7_plugin._machine import packages

    found = packages.inventory()
    plugins = sorted(
        {dist for name, _, dist in found.entry_points if name} | {n for n in found.distributions if "jax" in n}
    )
    info: dict[str, Any] = {
        "python": sys.version,
        "executable": sys.executable,
        "platform": platform.platform(),
        "machine": platform.machine(),
        "distributions": {name: packages.installed_version(name) for name in DISTRIBUTIONS},
        "jax_related_distributions": {
            name: found.distributions[name][0] for name in plugins if name in found.distributions
        },
        "jax_plugins_entry_points": [list(entry) for entry in found.entry_points],
        "jax_plugins_modules": list(found.namespace_modules),
    }
    try:
        import importlib

        info["pjrt_build_info"] = importlib.import_module(PJRT_PACKAGE).build_info()
    except Exception as error:  # noqa: BLE001 - an absent or damaged locator is itself a fact for the report
        info["pjrt_build_info"] = f"unavailable: {type(error).__name__}: {error}"
    from jax_rocm7_plugin._machine.native_modules import build_info

    info["plugin_extension_modules"] = build_info()
    return info


def machine_files(root: Path) -> Iterator[tuple[str, str]]:
    """(name in the bundle, text) of each machine file worth a look: OS, kernel, memory, driver, cgroup,
    and every KFD topology properties file (nodes, memory banks, caches, links)."""
    for absolute in MACHINE_FILES:
        yield f"machine{absolute}", _read(host_path(root, absolute))
    nodes = host_path(root, KFD_NODES)
    try:
        properties = sorted(p for p in nodes.rglob("properties") if len(p.relative_to(nodes).parts) <= 4)
    except OSError as error:
        yield f"machine{KFD_NODES}/UNREADABLE", f"{error}\n"
        return
    for path in properties[:512]:
        yield f"machine{KFD_NODES}/{path.relative_to(nodes)}", _read(path)


def gpu_health(root: Path) -> str:
    """The node's GPU health as the doctor read it (_machine/gpu_health.py: RAS counters, retired pages, PCIe
    links, XGMI, partition modes, power and heat, host settings), as JSON; what stopped the read, where it did."""
    from jax_rocm7_plugin._machine.gpu_health import as_json, read_in_time
    from jax_rocm7_plugin._safe_io import Deadline

    try:
        data = as_json(read_in_time(root))
    except (Deadline, OSError) as error:
        data = {"unreadable": str(error)}
    return json.dumps(data, indent=2) + "\n"


def cpu_model(root: Path) -> str | None:
    text = _read(host_path(root, "/proc/cpuinfo"))
    return next((line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("model name")), None)


def device_access(root: Path) -> dict[str, Any]:
    """/dev/kfd and the render nodes: mode, owning group, whether this process may open them; its groups."""
    import grp
    import stat

    def group_name(gid: int) -> str:
        try:
            return grp.getgrgid(gid).gr_name
        except KeyError:
            return str(gid)

    nodes: dict[str, Any] = {}
    dri = host_path(root, "/dev/dri")
    candidates = [host_path(root, "/dev/kfd")]
    with contextlib.suppress(OSError):  # no /dev/dri: no render nodes to list
        candidates += sorted(p for p in dri.iterdir() if p.name.startswith("renderD"))
    for path in candidates:
        try:
            info = path.stat()
        except OSError as error:
            nodes[str(path)] = {"error": error.strerror or str(error)}
            continue
        nodes[str(path)] = {
            "mode": stat.filemode(info.st_mode),
            "group": group_name(info.st_gid),
            "read_write": os.access(path, os.R_OK | os.W_OK),
        }
    return {"nodes": nodes, "process_groups": sorted(group_name(g) for g in os.getgroups()), "uid": os.getuid()}


def container_hints(root: Path, environ: Mapping[str, str]) -> list[str]:
    from jax_rocm7_plugin._machine.devices import CONTAINER_MARKERS

    hints = [f"{p} exists" for p in CONTAINER_MARKERS if host_path(root, p).exists()]
    hints += [f"{n} is set" for n in ("KUBERNETES_SERVICE_HOST", "container", "SINGULARITY_NAME", "APPTAINER_NAME")
              if _environment.is_set(n, environ)]  # fmt: skip
    return hints


def kernel_log(root: Path) -> str:
    """The kernel log's lines about the GPU driver, read without blocking (/dev/kmsg opened non-blocking;
    a regular file under a test sysroot). Where it cannot be read (no permission, no such device), says why."""
    path = host_path(root, "/dev/kmsg")
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as error:
        return f"kernel log not readable ({path}: {error.strerror or error}); run `sudo dmesg | grep -i amdgpu`\n"
    chunks: list[bytes] = []
    size = 0
    try:
        while size < MAX_KERNEL_LOG_BYTES:
            try:
                chunk = os.read(descriptor, 64 * 1024)  # one record per read from /dev/kmsg
            except BlockingIOError:
                break  # no more records now
            except OSError as error:  # EPIPE: records overwritten while reading; go on with the next
                if error.errno == 32:
                    continue
                chunks.append(f"\n(read stopped: {error.strerror})\n".encode())
                break
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    finally:
        os.close(descriptor)
    lines = b"".join(chunks).decode("utf-8", "replace").splitlines()
    wanted = [line for line in lines if any(word in line.lower() for word in KERNEL_LOG_WORDS)]
    return "\n".join(wanted) + "\n" if wanted else f"no amdgpu/kfd/drm lines among {len(lines)} kernel log lines\n"


def _read(path: Path) -> str:
    from jax_rocm7_plugin._safe_io import read_text

    try:
        return read_text(path, MAX_FILE_BYTES)
    except (OSError, ValueError) as error:
        return f"not readable: {error}\n"
