"""The bug-report bundle: what a maintainer asks for (doctor, versions, machine, allowlisted variables, HLO), redacted.
May import _doctor, _binary (the child runner), _machine, _settings and the foundation; never _cluster."""
