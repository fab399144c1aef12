"""The one place where the jax release served by this wheel pair is defined.

`JAX_RELEASE` (X.Y.Z) is the jax/jaxlib release both wheels are built for; the
build stamps `__version__` (X.Y.Z or X.Y.Z.postN) into the copy that goes into
a wheel. Nothing here may import anything: setup scripts read this file.
"""

JAX_RELEASE = "0.10.2"

# Rewritten by build/build.py in the staged copy of a wheel (e.g. "0.10.2.post1").
__version__ = JAX_RELEASE
