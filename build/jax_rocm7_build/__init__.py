"""The build library behind build/build.py: one module per concern, one `main_<verb>.py` per verb.

Importing it makes `jax_rocm7_plugin` mean this checkout's plugin (the tree being packaged),
never an installed one; see _checkout.py.
"""

from jax_rocm7_build._checkout import use_checkout

use_checkout()
