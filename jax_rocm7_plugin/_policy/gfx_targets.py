"""GPU targets: which code object runs on which GPU, and what the GPU is called.

A HIP binary holds code objects per target. A GPU runs one built for its exact
processor (gfx942) or for a *generic* target whose family includes it
(gfx9-4-generic). Families below are LLVM's "AMDGPU Generic Processors" table
(llvm/docs/AMDGPUUsage.rst, checked 2026-11); membership is listed explicitly
because it does not follow from the digits (gfx950 is in gfx9-4-generic, gfx1036
in gfx10-3-generic, gfx1170 in none of these).
"""

from __future__ import annotations

import re

GENERIC_FAMILIES: dict[str, frozenset[str]] = {
    "gfx9-generic": frozenset({"gfx900", "gfx902", "gfx904", "gfx906", "gfx909", "gfx90c"}),
    "gfx9-4-generic": frozenset({"gfx940", "gfx941", "gfx942", "gfx950"}),
    "gfx10-1-generic": frozenset({"gfx1010", "gfx1011", "gfx1012", "gfx1013"}),
    "gfx10-3-generic": frozenset({"gfx1030", "gfx1031", "gfx1032", "gfx1033", "gfx1034", "gfx1035", "gfx1036"}),
    "gfx11-generic": frozenset(
        {"gfx1100", "gfx1101", "gfx1102", "gfx1103", "gfx1150", "gfx1151", "gfx1152", "gfx1153"}
    ),
    "gfx12-generic": frozenset({"gfx1200", "gfx1201"}),
}

# Example products per processor (LLVM's processor table and AMD's spec pages); for reports only.
PRODUCTS: dict[str, str] = {
    "gfx900": "Radeon RX Vega 56/64, Instinct MI25",
    "gfx902": "Ryzen 2000/3000 APU graphics (Raven Ridge)",
    "gfx904": "Radeon Pro Vega 20",
    "gfx906": "Instinct MI50/MI60, Radeon VII",
    "gfx908": "Instinct MI100",
    "gfx909": "Ryzen APU graphics (Raven 2)",
    "gfx90a": "Instinct MI210/MI250/MI250X",
    "gfx90c": "Ryzen 4000/5000 APU graphics (Renoir, Cezanne)",
    "gfx940": "Instinct MI300 (early)",
    "gfx941": "Instinct MI300 (early)",
    "gfx942": "Instinct MI300X/MI300A/MI325X",
    "gfx950": "Instinct MI350X/MI355X",
    "gfx1010": "Radeon RX 5700/5700 XT",
    "gfx1011": "Radeon Pro V520",
    "gfx1012": "Radeon RX 5500/5500 XT",
    "gfx1013": "Cyan Skillfish APU graphics",
    "gfx1030": "Radeon RX 6800/6800 XT/6900 XT, Radeon Pro W6800",
    "gfx1031": "Radeon RX 6700/6700 XT",
    "gfx1032": "Radeon RX 6600/6600 XT",
    "gfx1033": "Steam Deck APU graphics (Van Gogh)",
    "gfx1034": "Radeon RX 6500 XT/6400",
    "gfx1035": "Radeon 680M (Rembrandt APU)",
    "gfx1036": "Ryzen 7000 desktop integrated graphics (Raphael)",
    "gfx1100": "Radeon RX 7900 XTX/XT/GRE, Radeon Pro W7900/W7800",
    "gfx1101": "Radeon RX 7800 XT/7700 XT, Radeon Pro W7700",
    "gfx1102": "Radeon RX 7600/7600 XT",
    "gfx1103": "Radeon 780M/760M (Phoenix APU)",
    "gfx1150": "Radeon 890M/880M (Strix Point APU)",
    "gfx1151": "Radeon 8060S (Strix Halo APU)",
    "gfx1152": "Radeon 860M (Krackan Point APU)",
    "gfx1153": "Radeon 840M/820M",
    "gfx1200": "Radeon RX 9060/9060 XT",
    "gfx1201": "Radeon RX 9070/9070 XT/9070 GRE, Radeon AI Pro R9700",
}

# Processors made only as APUs (the GPU shares the CPU's memory; its VRAM is a carve-out the firmware sets
# aside): LLVM's processor table marks these "APU". On current APUs KFD lists the GPU as a node of its own
# with no CPU cores (a Strix Halo's rocminfo in ROCm/TheRock#4578: agent 2, gfx1151, is the GPU alone), so
# the node's cpu_cores_count does not tell.
APU_PROCESSORS = frozenset(
    {"gfx902", "gfx909", "gfx90c", "gfx1013", "gfx1033", "gfx1035", "gfx1036", "gfx1103", "gfx1150", "gfx1151",
     "gfx1152", "gfx1153"}
)  # fmt: skip
# APUs among processors that are also discrete GPUs, by PCI device id (KFD's `device_id`; names as libdrm's
# amdgpu.ids gives them), and whether the firmware carves VRAM out: MI300A's HBM is the system memory itself.
APU_DEVICE_IDS: dict[int, tuple[str, bool]] = {0x74A0: ("Instinct MI300A", False)}

# EF_AMDGPU_MACH (the low byte of an AMDGPU code object's e_flags) -> processor: LLVM's
# llvm/include/llvm/BinaryFormat/ELF.h and AMDGPUUsage's "AMDGPU ELF Header" table, checked 2026-11.
# 0x04b was gfx941 and 0x040 gfx940 (both retired in LLVM; old code objects still carry them).
ELF_MACHS: dict[int, str] = {
    0x020: "gfx600", 0x021: "gfx601", 0x022: "gfx700", 0x023: "gfx701", 0x024: "gfx702", 0x025: "gfx703",
    0x026: "gfx704", 0x028: "gfx801", 0x029: "gfx802", 0x02A: "gfx803", 0x02B: "gfx810", 0x02C: "gfx900",
    0x02D: "gfx902", 0x02E: "gfx904", 0x02F: "gfx906", 0x030: "gfx908", 0x031: "gfx909", 0x032: "gfx90c",
    0x033: "gfx1010", 0x034: "gfx1011", 0x035: "gfx1012", 0x036: "gfx1030", 0x037: "gfx1031", 0x038: "gfx1032",
    0x039: "gfx1033", 0x03A: "gfx602", 0x03B: "gfx705", 0x03C: "gfx805", 0x03D: "gfx1035", 0x03E: "gfx1034",
    0x03F: "gfx90a", 0x040: "gfx940", 0x041: "gfx1100", 0x042: "gfx1013", 0x043: "gfx1150", 0x044: "gfx1103",
    0x045: "gfx1036", 0x046: "gfx1101", 0x047: "gfx1102", 0x048: "gfx1200", 0x049: "gfx1250", 0x04A: "gfx1151",
    0x04B: "gfx941", 0x04C: "gfx942", 0x04E: "gfx1201", 0x04F: "gfx950", 0x050: "gfx1310", 0x051: "gfx9-generic",
    0x052: "gfx10-1-generic", 0x053: "gfx10-3-generic", 0x054: "gfx11-generic", 0x055: "gfx1152", 0x058: "gfx1153",
    0x059: "gfx12-generic", 0x05A: "gfx1251", 0x05B: "gfx12-5-generic", 0x05C: "gfx1172", 0x05D: "gfx1170",
    0x05E: "gfx1171", 0x05F: "gfx9-4-generic",
}  # fmt: skip

# HSA_OVERRIDE_GFX_VERSION: X.Y.Z (a pattern, compiled by `re` on the first use: rarely set).
_OVERRIDE = r"(\d{1,2})\.(\d{1,2})\.(\d{1,2})"


def apu_kind(target: str | None, device_id: int | None, cpu_cores: int) -> tuple[bool, bool]:
    """(is an APU, has a VRAM carve-out) for a KFD GPU node: its processor, PCI device id and CPU cores (older APUs
    list the CPU cores on the GPU's node)."""
    if device_id is not None and device_id in APU_DEVICE_IDS:
        return True, APU_DEVICE_IDS[device_id][1]
    apu = cpu_cores > 0 or (target is not None and target in APU_PROCESSORS)
    return apu, apu


def family_of(target: str) -> str | None:
    """The generic family a processor belongs to, if any."""
    return next((name for name, members in GENERIC_FAMILIES.items() if target in members), None)


def covering_target(target: str, library_targets: set[str] | frozenset[str]) -> str | None:
    """Which of the library's targets runs on `target`: itself, or its generic family."""
    if target in library_targets:
        return target
    family = family_of(target)
    return family if family is not None and family in library_targets else None


def product_name(target: str | None) -> str | None:
    return PRODUCTS.get(target) if target else None


def describe(target: str | None) -> str:
    """`gfx942 (Instinct MI300X/MI300A/MI325X)`, or the bare name when unknown."""
    if target is None:
        return "unknown target"
    product = product_name(target)
    return f"{target} ({product})" if product else target


def override_target(value: str) -> str | None:
    """The processor HSA_OVERRIDE_GFX_VERSION=X.Y.Z makes the runtime assume (10.3.0 -> gfx1030).

    Each field is decimal; minor and stepping become one hex digit, as in
    gfx90a = 9.0.10. None when the value is not of that form.
    """
    match = re.fullmatch(_OVERRIDE, value.strip())
    if match is None:
        return None
    major, minor, stepping = (int(g) for g in match.groups())
    if major == 0 or minor > 0xF or stepping > 0xF:
        return None
    return f"gfx{major}{minor:x}{stepping:x}"


def override_value(target: str) -> str | None:
    """The HSA_OVERRIDE_GFX_VERSION value that names `target` (gfx1030 -> 10.3.0)."""
    match = re.fullmatch(r"gfx(\d{1,2})([0-9a-f])([0-9a-f])", target)
    if match is None:
        return None
    return f"{int(match.group(1))}.{int(match.group(2), 16)}.{int(match.group(3), 16)}"


def override_suggestion(target: str, library_targets: set[str] | frozenset[str]) -> str | None:
    """A sibling in the same family the library does carry, as an override value (last resort).

    gfx1031 with only gfx1030 in the library -> "10.3.0". Siblings share an ISA
    closely enough that this is the community's known workaround, not a guarantee.
    """
    family = family_of(target)
    if family is None:
        return None
    siblings = sorted(GENERIC_FAMILIES[family] & library_targets)
    return override_value(siblings[0]) if siblings else None
