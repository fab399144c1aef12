"""Which jaxlib this process runs: the loader's and the doctor's one source for it.

A module of its own so that the loader, inside `import jax`, does not import the doctor's inventory
of installed distributions (packages.py) to learn what jaxlib.version already says.
"""

from __future__ import annotations

import sys


def jaxlib_version() -> str | None:
    """The jaxlib imported in this process (inside `import jax`, at no cost), else the installed
    distribution's (the doctor imports no jax)."""
    version = getattr(sys.modules.get("jaxlib.version"), "__version__", None)
    if version is not None:
        return str(version)
    from jax_rocm7_plugin._machine.packages import installed_version

    return installed_version("jaxlib")
