"""Rules and their data: the release table, ROCm's sonames and layout, version skew, gfx targets and GPU coverage.
May import only the foundation (_findings, _names, _safe_io, version); the JSON beside it is the data."""
