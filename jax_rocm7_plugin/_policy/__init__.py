"""Rules and their data: the release table, ROCm's sonames and layout, version skew, gfx targets and GPU coverage.
May import the foundation (_findings, _names, _safe_io, version) and _settings' names; the JSON is the data."""

from pathlib import Path

# The one home of per-release data. `releases` builds its rows; `versions` asks it one question inside
# `import jax` (the PJRT C API major of a jaxlib) and reads it without building them.
RELEASES_TABLE = Path(__file__).resolve().parent / "releases.json"
