"""The one place where the jax release served by this wheel pair is defined.

`JAX_RELEASE` (X.Y.Z) is the jax/jaxlib release both wheels are built for:
build/build.py stamps the release it builds (a row of releases.json) and
`__version__` (X.Y.Z or X.Y.Z.postN) into the copy that goes into a wheel. In
the source tree it names the release of the development environment
(requirements/test.txt's jaxlib), which a test checks is a row of releases.json.
Nothing here may import anything: setup scripts read this file.
"""

# Rewritten by build/build.py in the staged copy of a wheel (the release it builds).
JAX_RELEASE = "0.10.2"

# Rewritten by build/build.py in the staged copy of a wheel (e.g. "0.10.2.post1").
__version__ = JAX_RELEASE

# Rewritten by build/build.py in the staged copy of a wheel: a sha256 of the package's other files as built. The
# loader files its start-up plans under it; in the source tree (None) it looks at the files' times instead.
SOURCE_DIGEST = None
