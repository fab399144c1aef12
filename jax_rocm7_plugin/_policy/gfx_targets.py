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

# HSA_OVERRIDE_GFX_VERSION: X.Y.Z (a pattern, compiled by `re` on the first use: rarely set).
_OVERRIDE = r"(\d{1,2})\.(\d{1,2})\.(\d{1,2})"


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
