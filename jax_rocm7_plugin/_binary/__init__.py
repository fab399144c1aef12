"""Readers of shared objects: ELF header and dynamic section, offload bundles, the PJRT C API, child-process loads.
May import _policy and the foundation (_findings, _names, _safe_io, version); never _machine, _settings or above."""
