"""This machine, read under a sysroot: KFD topology, /dev nodes, /dev/shm, ROCm installs, pip ROCm, ld.so, packages.
May import _binary, _policy, _settings (typed fields) and the foundation; never _pipeline or above."""
