"""Test fixture, never shipped: one process of a job that runs a jitted loop with a cross-process collective on
jax's CPU backend (gloo), where process FAULT_PROCESS leaves the loop at step FAULT_STEP and then sleeps
(FAULT=sleep), spins in Python (FAULT=spin) or sits in a C call that keeps the GIL (FAULT=gil);
FAULT_PROCESS=-2: every process does; FAULT=none runs the loop to its end. PLANTED_SECRET is held by the
leaving function's argument and a local, for the test that no secret leaves with the hang report.
SLOW_SERVICE=<seconds>: every call of the watcher to the service first waits that long in a real jaxlib call (a
blocking read of a key nobody sets), so that a call is in flight when the process exits.

    python hang_job.py PROCESS COUNT PORT STEPS
    python hang_job.py auto STEPS        (under a launcher: jax's own cluster detection)
"""

from __future__ import annotations

import contextlib
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


def slow_down_the_watchers_calls(seconds: float) -> None:
    from jax_rocm7_plugin._loader import job_gate

    watcher = job_gate._hang_watcher
    assert watcher is not None, "the hang watcher is not armed"
    client = watcher.client

    class Slow:
        def key_value_dir_get(self, key: str) -> list[tuple[str, str]]:
            with contextlib.suppress(Exception):  # the wait running out is the point
                client.blocking_key_value_get("test/never-set", int(seconds * 1000))
            return client.key_value_dir_get(key)

        def __getattr__(self, name: str) -> object:
            return getattr(client, name)

    watcher.client = Slow()


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
    if os.environ.get("SLOW_SERVICE"):
        slow_down_the_watchers_calls(float(os.environ["SLOW_SERVICE"]))
    for n in range(steps):
        if n == at and (process == who or who == -2):  # -2: every process (all in one place)
            print(f"process {process}: leaving the loop ({fault})", flush=True)
            leave_the_loop(fault)
        multihost_utils.process_allgather(step(jnp.ones(2) * n))
    print(f"process {process}: done", flush=True)
    jax.distributed.shutdown()


if __name__ == "__main__":
    main()
