"""Which shared objects this process has mapped (/proc/self/maps): ld.so reuses them, and the
child-process load test preloads the ROCm ones, as ROCm from pip does here."""

from __future__ import annotations


def mapped_objects() -> frozenset[str]:
    """Paths of the shared objects mapped into this process (each judged once, though mapped several times)."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            paths = {line.rstrip("\n").split(None, 5)[-1] for line in maps if ".so" in line}
    except OSError:
        return frozenset()
    return frozenset(p for p in paths if p.startswith("/") and ".so" in p)
