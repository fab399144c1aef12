"""The build library behind build/build.py: one module per concern, one `main_<verb>.py` per verb.

Importing it does nothing. build.py first calls `_checkout.use_checkout()`, which makes
`jax_rocm7_plugin` mean this checkout's plugin (the tree being packaged), never an installed one.
In a development venv it is installed in place (`pip install -e ./build`, ci/run_tests.sh), so
tools, tests and import-linter import it like any package.
"""
