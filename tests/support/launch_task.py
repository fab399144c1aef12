"""One task of a job started by a real launcher (test fixture, never shipped).

    python launch_task.py MACHINES COMMAND...

Takes its rank from the launcher (SLURM_PROCID under srun, OMPI_COMM_WORLD_RANK under mpirun), points
JAX_ROCM_SYSROOT at MACHINES/p<rank> (each task its own machine), and runs COMMAND -- unless the test asked
this rank to play another part:
- TASK_EXIT_EARLY=<rank>: exit 0 at once, before joining (a task that never starts its work);
- TASK_JOIN_THEN_DIE=<rank>: join jax's coordination service as the preflight would (the address from jax's
  own cluster detection), say "joined", then die by SIGKILL (a crash right after joining);
- TASK_STOP_AT=<rank>:<text>:<seconds>: run COMMAND as a child, pass its stderr on, and as soon as a line of it
  holds <text> (a phase its --verbose output names) stop the whole task with SIGSTOP (this process, COMMAND and
  its courier: a node frozen) and note when in TASK_RESULTS/stopped; a watcher kills them (the node fenced) once
  every other task has ended (TASK_RESULTS), or <seconds> later at the latest, so that the launcher's step ends.
- TASK_RESULTS=<folder>: every other task runs COMMAND as a child and writes <folder>/<rank>.json with its exit
  code and the time it ended (the launcher's own status is one number for the whole step).
"""

from __future__ import annotations

import os
import signal
import sys
import time


def rank() -> int:
    for name in ("SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMIX_RANK"):
        if os.environ.get(name, "").isdigit():
            return int(os.environ[name])
    raise SystemExit("launch_task.py: no rank from a launcher (SLURM_PROCID, OMPI_COMM_WORLD_RANK)")


def join_then_die() -> None:
    from jax._src import clusters
    from jax._src.lib import _jax

    address, _, process_id, _ = clusters.ClusterEnv.auto_detect_unset_distributed_params(
        None, None, None, None, None, None
    )
    client = _jax.get_distributed_runtime_client(
        address, process_id, init_timeout=30, missed_heartbeat_callback=lambda *a: None, shutdown_on_destruction=False
    )
    client.connect()
    print("joined", flush=True)
    # Die once the job is under way (another task's record is published), not while the others still join:
    # that would be a task that never joined, another test.
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not client.key_value_dir_get("jax_rocm7/cluster/record/"):
        time.sleep(0.1)
    os.kill(os.getpid(), signal.SIGKILL)


# The fence, a process outside the stopped ones: waits until the other tasks' results are all there (or the
# deadline), then kills the frozen task's process group and the task itself.
_FENCE = """
import os, signal, sys, time
folder, others, deadline = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
group, task = int(sys.argv[4]), int(sys.argv[5])
while time.time() < deadline:
    if folder and sum(n.endswith(".json") for n in os.listdir(folder)) >= others:
        break
    time.sleep(0.1)
os.killpg(group, signal.SIGKILL)
os.kill(task, signal.SIGKILL)
"""


def tasks() -> int:
    for name in ("SLURM_NTASKS", "OMPI_COMM_WORLD_SIZE"):
        if os.environ.get(name, "").isdigit():
            return int(os.environ[name])
    raise SystemExit("launch_task.py: no task count from a launcher (SLURM_NTASKS, OMPI_COMM_WORLD_SIZE)")


def stop_at(command: list[str], text: str, seconds: float) -> int:
    import subprocess

    child = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, start_new_session=True)
    assert child.stderr is not None
    results = os.environ.get("TASK_RESULTS", "")
    for line in child.stderr:
        sys.stderr.write(line)
        sys.stderr.flush()
        if text in line:
            if results:
                with open(os.path.join(results, "stopped"), "w") as handle:
                    handle.write(repr(time.time()))
            fence = [results, str(tasks() - 1), repr(time.time() + seconds), str(child.pid), str(os.getpid())]
            subprocess.Popen([sys.executable, "-c", _FENCE, *fence], start_new_session=True)
            os.killpg(child.pid, signal.SIGSTOP)
            os.kill(os.getpid(), signal.SIGSTOP)
    return child.wait()


def run_and_record(command: list[str], folder: str, me: int) -> int:
    """COMMAND as a child; its exit code (-N: killed by signal N) and end time in <folder>/<me>.json."""
    import json
    import subprocess

    code = subprocess.run(command, check=False).returncode
    path = os.path.join(folder, f"{me}.json")
    with open(f"{path}.part", "w") as handle:
        json.dump({"code": code, "ended": time.time()}, handle)
    os.replace(f"{path}.part", path)  # the fence counts whole files only
    return code if code >= 0 else 128 - code


def main() -> None:
    machines, command = sys.argv[1], sys.argv[2:]
    me = rank()
    if os.environ.get("TASK_EXIT_EARLY") == str(me):
        return
    os.environ["JAX_ROCM_SYSROOT"] = os.path.join(machines, f"p{me}")
    if os.environ.get("TASK_JOIN_THEN_DIE") == str(me):
        join_then_die()
        return
    stop = os.environ.get("TASK_STOP_AT", "").split(":", 2)
    if stop[0] == str(me):
        sys.exit(stop_at(command, stop[1], float(stop[2])))
    if os.environ.get("TASK_RESULTS"):
        sys.exit(run_and_record(command, os.environ["TASK_RESULTS"], me))
    os.execv(command[0], command)


if __name__ == "__main__":
    main()
