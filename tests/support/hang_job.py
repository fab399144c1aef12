"""Test fixture, never shipped: one process of a job that runs a jitted loop with a cross-process collective on
jax's CPU backend (gloo), where process FAULT_PROCESS leaves the loop at step FAULT_STEP and then sleeps
(FAULT=sleep), spins in Python (FAULT=spin) or sits in a C call that keeps the GIL (FAULT=gil);
FAULT_PROCESS=-2: every process does; FAULT=none runs the loop to its end. PLANTED_SECRET is held by the
leaving function's argument and a local, for the test that no secret leaves with the hang report.

    python hang_job.py PROCESS COUNT PORT STEPS
    python hang_job.py auto STEPS        (under a launcher: jax's own cluster detection)
"""

from __future__ import annotations

import os
import sys
import time


def leave_the_loop(kind: str, secret: str = os.environ.get("PLANTED_SECRET", "")) -> None:
    password = f"{secret}-local"  # noqa: F841 - a local and an argument hold a secret: neither may leave
    if kind == "sleep":
        time.sleep(600)
    while kind == "spin":
        pass
    if kind == "gil":
        import ctypes

        ctypes.PyDLL(None).sleep(600)  # PyDLL calls keep the GIL: libc's sleep(3) with no thread let run


def main() -> None:
    import logging

    logging.basicConfig(level=logging.INFO, format="%(name)s %(levelname)s %(message)s")  # the info lines too
    import jax

    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    if sys.argv[1] == "auto":
        steps = int(sys.argv[2])
        jax.distributed.initialize(initialization_timeout=60)
    else:
        process, count, port, steps = (int(a) for a in sys.argv[1:5])
        jax.distributed.initialize(f"127.0.0.1:{port}", count, process, initialization_timeout=60)
    process = jax.process_index()
    import jax.numpy as jnp
    from jax.experimental import multihost_utils

    step = jax.jit(lambda x: x * 2.0 + 1.0)
    fault, at, who = (
        os.environ.get("FAULT", "none"),
        int(os.environ.get("FAULT_STEP", "3")),
        int(os.environ.get("FAULT_PROCESS", "-1")),
    )
    print(f"process {process}: devices {jax.devices()}", flush=True)
    for n in range(steps):
        if n == at and (process == who or who == -2):  # -2: every process (all in one place)
            print(f"process {process}: leaving the loop ({fault})", flush=True)
            leave_the_loop(fault)
        multihost_utils.process_allgather(step(jnp.ones(2) * n))
    print(f"process {process}: done", flush=True)
    jax.distributed.shutdown()


if __name__ == "__main__":
    main()
