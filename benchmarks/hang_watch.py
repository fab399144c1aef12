"""What the hang watcher costs a running job, two ways.

    python benchmarks/hang_watch.py sample [--samples 200] [--python PYTHON]
    python benchmarks/hang_watch.py loop [--rounds 16] [--block-seconds 2] [--timeout 4] [--python PYTHON]

Two real processes join jax.distributed on localhost (CPU backend, collectives over gloo).

`sample`: in process 0, while a thread runs a jitted loop with a cross-process all-gather, SAMPLES samples of
the watcher (_job/hang.py, `Watcher` with the default settings: sys._current_frames, the frames' names,
key_value_dir_get of the asks) are timed. It prints the median wall and CPU time of a sample, and that CPU time
as a share of one core at the default period (JAX_ROCM_HANG_TIMEOUT=600: a sample every 5 s) and at the shortest
(0.2 s, timeouts of 4 s and less).

`loop`: both processes run a jitted training loop in their main threads (a two-layer MLP's gradient step, and
the loss all-gathered across the processes every step) in blocks of a fixed number of steps (calibrated to about
BLOCK_SECONDS), with the watcher on and off in turns (ABBA order, so drift cancels), ROUNDS rounds. The watcher
is on at --timeout (default 4: its shortest period, 0.2 s, 25 times the samples of the default). It prints the
slowdown of the on blocks: the median of the rounds' paired differences, their spread, and the total.

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
SAMPLE_JOB = """
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

LOOP_JOB = """
import statistics, sys, time
process, port, rounds, block_seconds, timeout = (
    int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5]))
import jax
jax.config.update("jax_cpu_collectives_implementation", "gloo")
jax.distributed.initialize(f"127.0.0.1:{port}", 2, process, initialization_timeout=60)
import jax.numpy as jnp
from jax.experimental import multihost_utils
from jax._src import distributed
from jax_rocm7_plugin._job import hang

def loss_of(params, x, y):
    hidden = jnp.tanh(x @ params[0])
    return jnp.mean((hidden @ params[1] - y) ** 2)

@jax.jit
def train_step(params, x, y):
    loss, grads = jax.value_and_grad(loss_of)(params, x, y)
    return [p - 0.01 * g for p, g in zip(params, grads)], loss

key = jax.random.PRNGKey(process)
params = [jax.random.normal(key, (256, 512)) * 0.05, jax.random.normal(key, (512, 16)) * 0.05]
x, y = jax.random.normal(key, (128, 256)), jax.random.normal(key, (128, 16))

def run(steps):
    global params
    for _ in range(steps):
        params, loss = train_step(params, x, y)
        multihost_utils.process_allgather(loss)  # the processes meet every step

run(20)
started = time.perf_counter()
run(50)
# Both processes take process 0's step count, so that their blocks line up.
per_step = float(multihost_utils.process_allgather(jnp.float32((time.perf_counter() - started) / 50))[0])
steps = max(10, int(block_seconds / per_step))
settings = hang.read_settings({"JAX_ROCM_HANG_TIMEOUT": str(timeout)})

def block(on):
    watcher, flag = None, [True]
    if on:
        watcher = hang.Watcher(distributed.global_state.client, process, 2, settings, alive=lambda: flag[0])
        watcher.start()
    started = time.perf_counter()
    run(steps)
    seconds = time.perf_counter() - started
    if watcher is not None:
        flag[0] = False
        watcher.join()
    multihost_utils.process_allgather(jnp.float32(0))  # both out of the block before the next
    return seconds

differences, on_total, off_total = [], 0.0, 0.0
for n in range(rounds):
    order = (True, False) if n % 2 == 0 else (False, True)
    times = {on: block(on) for on in order}
    on_total, off_total = on_total + times[True], off_total + times[False]
    differences.append((times[True] - times[False]) / times[False] * 100)
if process == 0:
    differences.sort()
    quarter = len(differences) // 4
    print(f"{rounds} rounds of {steps} steps a block ({per_step * 1e3:.2f} ms a step), watcher on at timeout "
          f"{timeout:g} s (a sample every {hang.Watcher.period(timeout):g} s)")
    print(f"slowdown with the watcher on: median {statistics.median(differences):+.3f} % "
          f"(middle half {differences[quarter]:+.3f} to {differences[-quarter - 1]:+.3f} %), "
          f"total {(on_total / off_total - 1) * 100:+.3f} %")
jax.distributed.shutdown()
"""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=["sample", "loop"])
    parser.add_argument("--samples", type=int, default=200, help="sample: samples timed")
    parser.add_argument("--rounds", type=int, default=16, help="loop: rounds of one block on, one off")
    parser.add_argument("--block-seconds", type=float, default=2.0, help="loop: about how long a block runs")
    parser.add_argument("--timeout", type=float, default=4.0, help="loop: the watcher's JAX_ROCM_HANG_TIMEOUT")
    parser.add_argument("--python", default=sys.executable)
    args = parser.parse_args()
    port = str(free_port())
    environ = {**os.environ, "PYTHONPATH": str(REPO), "JAX_PLATFORMS": "cpu", "JAX_ROCM_HANG_TIMEOUT": "off"}
    if args.mode == "sample":
        command, tail = [args.python, "-c", SAMPLE_JOB], [port, str(args.samples)]
    else:
        command = [args.python, "-c", LOOP_JOB]
        tail = [port, str(args.rounds), str(args.block_seconds), str(args.timeout)]
    other = subprocess.Popen([*command, "1", *tail], env=environ, stdout=subprocess.DEVNULL)
    try:
        subprocess.run([*command, "0", *tail], env=environ, check=True, timeout=1800)
    finally:
        other.wait(timeout=60)


if __name__ == "__main__":
    main()
