"""What the GPU drivers say about themselves: the amdgpu module's version, each AMD GPU's MES firmware, and
whether this is another vendor's machine. Small sysfs reads under the sysroot, for the doctor.

- `/sys/module/amdgpu/version`: written by AMD's DKMS builds of the driver ("6.16.6"); the driver that
  ships inside a distribution's kernel has none.
- `/sys/class/drm/renderD<minor>/device/fw_version/mes_fw_version`: the amdgpu driver's firmware
  version files, readable by every user ("0x00000083"); GPUs without MES (before RDNA3) have none.
- `/sys/class/drm/renderD<minor>/device/ip_discovery/die/0/GC/0/{major,minor,revision}`: the graphics-compute
  IP version the driver discovered (amdgpu's IP discovery sysfs, kernel 5.19 and later). Firmware and IP bugs
  ride on it, not on a product name: sibling products share it. Where the driver gives none, the KFD
  gfx_target_version stands in from GFX10 on, where amdgpu derives one from the other digit for digit
  (GC 11.5.1 is gfx1151); for GFX9 the two differ (gfx90a is GC 9.4.2, gfx942 GC 9.4.3), so nothing is guessed.
- NVIDIA's kernel driver: `/sys/module/nvidia` (loaded) and `/proc/driver/nvidia/version` (its banner).
"""

from __future__ import annotations

from pathlib import Path

from jax_rocm7_plugin._machine import host_path

AMDGPU_VERSION = "/sys/module/amdgpu/version"
MES_FIRMWARE = "/sys/class/drm/renderD{minor}/device/fw_version/mes_fw_version"
GC_IP = "/sys/class/drm/renderD{minor}/device/ip_discovery/die/0/GC/0"
NVIDIA_MODULE = "/sys/module/nvidia"
NVIDIA_VERSION = "/proc/driver/nvidia/version"
_SMALL = 4096


def _first_line(path: Path) -> str | None:
    from jax_rocm7_plugin._safe_io import read_text

    try:
        text = read_text(path, _SMALL).strip()
    except (OSError, ValueError):
        return None
    return text.splitlines()[0].strip() if text else None


def amdgpu_driver_version(root: Path) -> str | None:
    """The amdgpu module's version where a DKMS build states it; None for a kernel's own driver."""
    return _first_line(host_path(root, AMDGPU_VERSION))


def mes_firmware(root: Path, render_minor: int | None) -> str | None:
    """The MES firmware version of the GPU with this render node ("0x83"); None where the driver gives none."""
    if render_minor is None:
        return None
    text = _first_line(host_path(root, MES_FIRMWARE.format(minor=render_minor)))
    if text is None:
        return None
    try:
        return hex(int(text, 0))
    except ValueError:
        return None


def gc_ip_version(root: Path, render_minor: int | None, gfx_target_version: int | None) -> str | None:
    """The GPU's graphics-compute IP version ("11.5.1"): the driver's IP discovery, else (GFX10 and later) its
    KFD target version; None where neither says."""
    if render_minor is not None:
        folder = host_path(root, GC_IP.format(minor=render_minor))
        parts = [_first_line(folder / name) for name in ("major", "minor", "revision")]
        if all(p is not None and p.isdigit() for p in parts):
            return ".".join(str(int(p)) for p in parts if p is not None)
    if gfx_target_version is not None and gfx_target_version >= 100000:
        major, rest = divmod(gfx_target_version, 10000)
        return f"{major}.{rest // 100}.{rest % 100}"
    return None


def nvidia_driver(root: Path) -> str | None:
    """Evidence that NVIDIA's kernel driver is loaded here (its banner, or the module's directory); else None."""
    banner = _first_line(host_path(root, NVIDIA_VERSION))
    if banner:
        return f"{NVIDIA_VERSION}: {banner}"
    module = host_path(root, NVIDIA_MODULE)
    return f"{NVIDIA_MODULE} exists" if module.is_dir() else None
