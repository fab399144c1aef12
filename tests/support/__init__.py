"""Test support, never shipped: sysroot trees (synthetic machines), stand-in native libraries
(compiled here), link stubs for ROCm sonames, offload bundles, wheel builds, venvs and e2e snippets.
Everything here stands in for hardware or libraries this machine lacks, and says so."""
