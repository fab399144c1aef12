"""One process of a multi-process job that starts the ROCm backend (test fixture, never shipped).

    python job_program.py ADDRESS COUNT PROCESS     # ADDRESS "auto": jax's launcher detection (srun, mpirun)

Joins jax.distributed (local device id = the process's local rank), asks for the 'rocm' devices (our
loader's job check runs there, before the client), runs a jitted program on them, and prints one line
`JOB {json}` (or writes it, see `say`): process, whether it ran on rocm, jax's error where rocm did not start,
the modules of our package loaded once the backend started, and (process 0) every key and value under
jax_rocm7/ in the coordination service. Exit 0: ran on rocm;
3: rocm did not start.

Parts a test may ask of a process (variables): JOB_LATE=<s> reach backend start that much later;
JOB_NEVER=1 never start a backend (sleep JOB_LATE, then leave); JOB_RESTART=1 start the backends a second
time after jax.extend.backend.clear_backends(); JOB_DEBUG=1 our logger's debug lines on stderr (which start
path a process took, what the job check did); JOB_PLANT=<json> a hostile peer: once joined, set each key of the
object to its value in the coordination service (a value {"repeat": TEXT, "times": N} is TEXT N times).
"""

from __future__ import annotations

import json
import os
import sys
import time


def main() -> int:
    if os.environ.get("JOB_DEBUG") == "1":
        import logging

        logger = logging.getLogger("jax_rocm7_plugin")
        logger.setLevel(logging.DEBUG)
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s"))
        logger.addHandler(handler)
        logger.propagate = False
    import jax

    address, count, process = sys.argv[1], sys.argv[2], sys.argv[3]
    if address == "auto":
        jax.distributed.initialize(initialization_timeout=60)
    else:
        jax.distributed.initialize(
            address, int(count), int(process), local_device_ids=[int(process)], initialization_timeout=60
        )
    from jax._src import distributed

    me = distributed.global_state.process_id
    for key, value in json.loads(os.environ.get("JOB_PLANT", "{}")).items():
        text = value["repeat"] * value["times"] if isinstance(value, dict) else value
        distributed.global_state.client.key_value_set(key, text)
    time.sleep(float(os.environ.get("JOB_LATE", "0")))
    if os.environ.get("JOB_NEVER") == "1":
        say({"process": me, "rocm": False, "never": True})
        return 0
    result = start_and_run()
    if os.environ.get("JOB_RESTART") == "1":
        from jax.extend.backend import clear_backends

        clear_backends()
        result = start_and_run()
    if me == 0:
        client = distributed.global_state.client
        result["keys"] = dict(client.key_value_dir_get("jax_rocm7/"))
    say({"process": me, **result})
    return 0 if result["rocm"] else 3


def say(result: dict[str, object]) -> None:
    """One `JOB` line; or, with JOB_RESULTS=<folder>, the file <folder>/<process>.json (a launcher that
    forwards the tasks' output may split and interleave lines longer than a pipe write)."""
    folder = os.environ.get("JOB_RESULTS")
    if folder:
        with open(os.path.join(folder, f"{result['process']}.json"), "w") as stream:
            json.dump(result, stream)
    else:
        print("JOB " + json.dumps(result), flush=True)


def start_and_run() -> dict[str, object]:
    import jax
    import jax.numpy as jnp
    import numpy as np

    try:
        devices = jax.local_devices(backend="rocm")
    except RuntimeError as error:
        return {"rocm": False, "error": str(error)}
    ours = sorted(m for m in sys.modules if m.startswith("jax_rocm7_plugin"))  # what the start imported
    x = np.arange(6.0, dtype=np.float32)
    y = jax.jit(lambda a: jnp.tanh(a) * 2)(jax.device_put(x, devices[0]))
    np.testing.assert_allclose(np.asarray(y), np.tanh(x) * 2, rtol=1e-5)
    return {"rocm": True, "devices": len(devices), "modules": ours}


if __name__ == "__main__":
    sys.exit(main())
