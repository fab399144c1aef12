"""What the hang watcher costs a running job, two ways.

    python benchmarks/hang_watch.py sample [--samples 200] [--python PYTHON]
    python benchmarks/hang_watch.py loop [--processes 1|2] [--rounds 12] [--block-seconds 10] [--timeout 600]

Real processes join jax.distributed on localhost (CPU backend, collectives over gloo).

`sample`: in process 0, while a thread runs a jitted loop with a cross-process all-gather, SAMPLES samples of
the watcher (_job/hang.py, `Watcher` with the default settings: sys._current_frames, the frames' names,
key_value_dir_get of the asks on its helper thread) are timed, the CPU time of both threads counted. It prints
the median wall and CPU time of a sample, and that CPU time as a share of one core at the default period
(JAX_ROCM_HANG_TIMEOUT=600: a sample every 5 s) and at the shortest (0.2 s, timeouts of 4 s and less).

`loop`: the processes (1, or 2 that all-gather the loss every step) run a jitted training loop in their main
threads (a two-layer MLP's gradient step), each pinned to a core of its own with XLA on one thread, in blocks of a
fixed number of steps (calibrated to about BLOCK_SECONDS), with the watcher on and off in turns (ABBA order, so
drift cancels), ROUNDS rounds. The watcher runs at --timeout (default 600: a sample every 5 s, so blocks must be
several periods long; 4 gives the shortest period, 0.2 s). It prints the slowdown of the on blocks (the median of
the rounds' paired differences, their middle half, and the total), and the CPU time of the watcher's own threads
as a share of the watched loop's time: the cost itself, which the wall-clock difference cannot resolve below
the noise of a shared 2-core machine.

Run from outside the project root, with nothing else running.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.support.cluster import free_port  # noqa: E402

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
    clock = time.pthread_getcpuclockid(watcher.caller.thread.ident)
    def helper_cpu():  # the service's calls run on the watcher's helper thread
        return time.clock_gettime(clock)
    worker = threading.Thread(target=loop)
    worker.start()
    time.sleep(1.0)
    walls, cpus = [], []
    main = worker  # the thread the watcher would watch: here the loop's
    for _ in range(samples):
        wall, cpu = time.perf_counter(), time.thread_time() + helper_cpu()
        frame = sys._current_frames().get(main.ident)
        frames = hang.frames_of(frame)
        watcher._answer(frames, 0.0)
        walls.append((time.perf_counter() - wall) * 1e6)
        cpus.append((time.thread_time() + helper_cpu() - cpu) * 1e6)
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
import os, statistics, sys, threading, time
process, count, port, rounds, block_seconds, timeout = (
    int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5]), float(sys.argv[6]))
# Each process on a core of its own, XLA on one thread: the watcher competes with its own process's loop, and the
# processes do not disturb each other's timing.
cores = sorted(os.sched_getaffinity(0))
os.sched_setaffinity(0, {cores[process % len(cores)]})
import jax
jax.config.update("jax_cpu_collectives_implementation", "gloo")
jax.distributed.initialize(f"127.0.0.1:{port}", count, process, initialization_timeout=60)
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

def meet(value):
    return multihost_utils.process_allgather(value) if count > 1 else value

def run(steps):
    global params
    for _ in range(steps):
        params, loss = train_step(params, x, y)
        meet(loss).block_until_ready() if count == 1 else meet(loss)  # several processes meet every step

run(20)
started = time.perf_counter()
run(50)
# Every process takes process 0's step count, so that their blocks line up.
per_step = float(jnp.ravel(meet(jnp.float32((time.perf_counter() - started) / 50)))[0])
steps = max(10, int(block_seconds / per_step))
settings = hang.read_settings({"JAX_ROCM_HANG_TIMEOUT": str(timeout)})

def cpu_of(threads):
    return sum(time.clock_gettime(time.pthread_getcpuclockid(t.ident)) for t in threads if t.is_alive())

def block(on):
    watcher, flag = None, [True]
    if on:
        watcher = hang.Watcher(distributed.global_state.client, process, count, settings, alive=lambda: flag[0])
        watcher.start()
        threads = [watcher, watcher.caller.thread]
        cpu = cpu_of(threads)
    started = time.perf_counter()
    run(steps)
    seconds = time.perf_counter() - started
    used = 0.0
    if watcher is not None:
        used = cpu_of(threads) - cpu
        flag[0] = False
        watcher.join()
    meet(jnp.float32(0))  # every process out of the block before the next
    return seconds, used

differences, on_total, off_total, watcher_cpu = [], 0.0, 0.0, 0.0
for n in range(rounds):
    order = (True, False) if n % 2 == 0 else (False, True)
    times = {on: block(on) for on in order}
    on_total, off_total = on_total + times[True][0], off_total + times[False][0]
    watcher_cpu += times[True][1]
    differences.append((times[True][0] - times[False][0]) / times[False][0] * 100)
if process == 0:
    differences.sort()
    quarter = len(differences) // 4
    print(f"{count} process(es), {rounds} rounds of {steps} steps a block ({per_step * 1e3:.2f} ms a step), watcher "
          f"on at timeout {timeout:g} s (a sample every {hang.Watcher.period(timeout):g} s)")
    print(f"slowdown with the watcher on: median {statistics.median(differences):+.3f} % "
          f"(middle half {differences[quarter]:+.3f} to {differences[-quarter - 1]:+.3f} %), "
          f"total {(on_total / off_total - 1) * 100:+.3f} %")
    print(f"the watcher's own CPU (its thread and its helper): {watcher_cpu * 1e3:.1f} ms in {on_total:.1f} s of "
          f"watched loop = {watcher_cpu / on_total * 100:.4f} % of the process's core")
jax.distributed.shutdown()
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=["sample", "loop"])
    parser.add_argument("--samples", type=int, default=200, help="sample: samples timed")
    parser.add_argument("--rounds", type=int, default=12, help="loop: rounds of one block on, one off")
    parser.add_argument("--block-seconds", type=float, default=10.0, help="loop: about how long a block runs")
    parser.add_argument("--timeout", type=float, default=600.0, help="loop: the watcher's JAX_ROCM_HANG_TIMEOUT")
    parser.add_argument("--processes", type=int, default=1, choices=[1, 2], help="loop: processes in the job")
    parser.add_argument("--python", default=sys.executable)
    args = parser.parse_args()
    port = str(free_port())
    environ = {**os.environ, "PYTHONPATH": str(REPO), "JAX_PLATFORMS": "cpu", "JAX_ROCM_HANG_TIMEOUT": "off"}
    if args.mode == "loop":
        single = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
        environ["XLA_FLAGS"] = f"{environ.get('XLA_FLAGS', '')} {single}".strip()
    if args.mode == "sample":
        command, tail = [args.python, "-c", SAMPLE_JOB], [port, str(args.samples)]
    else:
        command = [args.python, "-c", LOOP_JOB]
        tail = [str(args.processes), port, str(args.rounds), str(args.block_seconds), str(args.timeout)]
    others = []
    if args.mode == "sample" or args.processes == 2:
        others.append(subprocess.Popen([*command, "1", *tail], env=environ, stdout=subprocess.DEVNULL))
    try:
        subprocess.run([*command, "0", *tail], env=environ, check=True, timeout=1800)
    finally:
        for other in others:
            other.wait(timeout=60)


if __name__ == "__main__":
    main()
