"""Rules and their data: the release table, ROCm's sonames and layout, version skew, gfx targets and GPU coverage.
May import the foundation (_findings, _names, _safe_io, version) and _settings' names; the JSON is the data."""
