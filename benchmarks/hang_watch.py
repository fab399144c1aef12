"""What the hang watcher costs a running job: one sample (the main thread's stack, and a listing of the asks in
the coordination service), timed, and its share of the job at the sampling period.

    python benchmarks/hang_watch.py [--samples 200] [--python PYTHON]

Two real processes join jax.distributed on localhost (CPU backend). In process 0, while its main thread runs a
jitted loop with a cross-process all-gather, a thread times SAMPLES samples of the watcher (_job/hang.py,
`Watcher` with the default settings: sys._current_frames, the frames' names, key_value_dir_get of the asks). It
prints the median wall time and CPU time of a sample, and that CPU time as a share of one core at the default
period (JAX_ROCM_HANG_TIMEOUT=600: a sample every 5 s) and at the shortest (0.2 s, timeouts of 4 s and less).
Run from outside the project root, with nothing else running.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
JOB = """
import statistics, sys, threading, time
process, port, samples = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
import jax
jax.config.update("jax_cpu_collectives_implementation", "gloo")
jax.distributed.initialize(f"127.0.0.1:{port}", 2, process, initialization_timeout=60)
import jax.numpy as jnp
from jax.experimental import multihost_utils
from jax._src import distributed
from jax_rocm7_plugin._job import hang

step = jax.jit(lambda x: x * 2.0 + 1.0)
done = threading.Event()
def loop():
    n = 0
    while not done.is_set():
        multihost_utils.process_allgather(step(jnp.ones(2) * n))
        n += 1
if process == 0:
    watcher = hang.Watcher(distributed.global_state.client, 0, 2, hang.read_settings({}), alive=lambda: True)
    worker = threading.Thread(target=loop)
    worker.start()
    time.sleep(1.0)
    walls, cpus = [], []
    main = worker  # the thread the watcher would watch: here the loop's
    for _ in range(samples):
        wall, cpu = time.perf_counter(), time.thread_time()
        frame = sys._current_frames().get(main.ident)
        frames = hang.frames_of(frame)
        watcher._answer(frames, 0.0)
        walls.append((time.perf_counter() - wall) * 1e6)
        cpus.append((time.thread_time() - cpu) * 1e6)
        time.sleep(0.01)
    done.set()
    multihost_utils.process_allgather(jnp.ones(2) * -1.0)
    cpu = statistics.median(cpus)
    print(f"one sample: median {statistics.median(walls):.0f} us wall, {cpu:.0f} us CPU ({samples} samples)")
    print(f"share of one core: {cpu / 5e6 * 100:.4f} % at a sample every 5 s (default), "
          f"{cpu / 0.2e6 * 100:.3f} % every 0.2 s (the shortest)")
else:
    n = 0
    while True:
        out = multihost_utils.process_allgather(step(jnp.ones(2) * n))
        if float(out[0][0]) == -1.0:
            break
        n += 1
jax.distributed.shutdown()
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--python", default=sys.executable)
    args = parser.parse_args()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    environ = {**os.environ, "PYTHONPATH": str(REPO), "JAX_PLATFORMS": "cpu", "JAX_ROCM_HANG_TIMEOUT": "off"}
    command = [args.python, "-c", JOB]
    other = subprocess.Popen([*command, "1", str(port), str(args.samples)], env=environ, stdout=subprocess.DEVNULL)
    try:
        subprocess.run([*command, "0", str(port), str(args.samples)], env=environ, check=True, timeout=300)
    finally:
        other.wait(timeout=60)


if __name__ == "__main__":
    main()
