"""`cluster --deep` in the courier: after the configuration's verdict, every process creates its jax backend
here (a child the parent can kill, never the reporting process) and runs the job's collectives for real.

Steps, in order, the same in every process: the backend (jax.distributed's, on the coordination client the
courier already holds; on 'cpu' the collectives go over gloo), a first jit on each local device, a fixed
piece of local work (a jitted matmul: its rate names a slow process), then all-reduce and all-gather over
every device of the job at each size, each result checked against the value it must have; then every
process's host (through the service), an all-reduce within each host and between neighbouring hosts of the
ring in disjoint pairs (`group_steps`), which locate a slow host or link.

Each process publishes each step's outcome at `jax_rocm7/cluster/deep/<step>/<process>` (outside the
collective path); process 0's courier gathers them and hands them to its parent, which writes the report.
Every step has a deadline: a watchdog thread publishes a timeout for the step this process is stuck in,
sets `jax_rocm7/cluster/deep/abort` so the others stop too, and ends the courier (process 0's first gathers
what the others said). A process stopped or killed mid-step is the one that never reports that step.

Process 0's courier also hands its parent every outcome as it is published (`deep-plan`, `deep-seen`: a listing
of the step keys twice a second), so that the parent keeps what the job said if jaxlib ends this courier
(its coordination client aborts the process when the service declares a task dead): the parent names that task
from the client's log and reports the steps seen until then.
"""

from __future__ import annotations

import contextlib
import json
import os
import statistics
import threading
import time
from collections.abc import Callable
from typing import Any

from jax_rocm7_plugin._job.phrases import clipped
from jax_rocm7_plugin._job.store import read_published, wait_ms

PREFIX = "jax_rocm7/cluster/deep"
GATHER_GRACE_SECONDS = 5.0
LOCAL_WORK_SIZE = 512  # the matmul's side: small enough for any device
LOCAL_WORK_SECONDS = 0.5  # long enough to time through noise, and to catch a process stopped part of the time
VERDICT_WAIT_SECONDS = 30  # process 0's parent writes the report in this time; its courier waits as long for acks
FINAL_ACK_SECONDS = 10  # process 0's courier waits this long for the others to take the final code
VERDICT_POLL_SECONDS = 5.0  # a waiting process asks whether process 0 still answers this often
PROBE_SECONDS = 3.0  # a live service answers a read of a present key in milliseconds, even under load
WATCH_SECONDS = 0.5  # process 0's courier lists the published outcomes this often for its parent
PROCESS_0_SILENT = (
    "process 0 (which holds jax's coordination service) does not answer: it is stopped, killed or its host is gone, "
    "and no report will come from it"
)
Emit = Callable[..., None]
Receive = Callable[[], dict[str, Any]]


GROUP_STEPS_MAX = 4  # within each host, then the ring of hosts in at most 3 rounds of disjoint pairs
GROUP_SIZE_MAX = 64 * 1024 * 1024  # the group steps' message: the largest size up to this


def plan_steps(sizes: list[int]) -> list[dict[str, Any]]:
    """The steps every process runs, in order; the `hosts` step adds the group steps (`group_steps`)."""
    steps: list[dict[str, Any]] = [{"name": "backend"}, {"name": "first-jit"}, {"name": "local-work"}]
    for size in sizes:
        for op in ("all-reduce", "all-gather"):
            steps.append({"name": f"{op}/{size}", "op": op, "bytes": size})
    steps.append({"name": "hosts"})
    return steps


def group_steps(host_of: dict[int, str], sizes: list[int]) -> list[dict[str, Any]]:
    """All-reduce within each host, then between neighbouring hosts of the ring (sorted by name): H pairs run
    in 2 rounds of disjoint pairs where H is even, 3 where it is odd (1 for 2 hosts), whatever H: a slow host
    shows in its host step, a slow link in the pairs that cross it. Groups of one device are left out."""
    fitting = [s for s in sizes if s <= GROUP_SIZE_MAX]
    size = max(fitting) if fitting else min(sizes)
    members: dict[str, list[int]] = {}
    for process, host in sorted(host_of.items()):
        members.setdefault(host, []).append(process)
    hosts = sorted(members)
    steps: list[dict[str, Any]] = []
    within = {f"host:{h}": members[h] for h in hosts if len(members[h]) > 1}
    if within:
        steps.append({"name": f"hosts/{size}", "op": "all-reduce", "bytes": size, "groups": within})
    if len(hosts) > 2:
        pairs = [(hosts[i], hosts[(i + 1) % len(hosts)]) for i in range(len(hosts))]
        rounds = [pairs[0::2], pairs[1::2]] if len(hosts) % 2 == 0 else [pairs[0:-1:2], pairs[1::2], pairs[-1:]]
        for number, chosen in enumerate(rounds, 1):
            groups = {f"pair:{a},{b}": members[a] + members[b] for a, b in chosen}
            steps.append({"name": f"pairs-{number}/{size}", "op": "all-reduce", "bytes": size, "groups": groups})
    return steps


def gathering_seconds(step_timeout: float) -> float:
    """The longest process 0 gathers: its grace, the group steps others may still be in, one step when stuck."""
    return GATHER_GRACE_SECONDS + (GROUP_STEPS_MAX + 1) * step_timeout


def report_seconds(step_timeout: float) -> float:
    """The longest a courier's report takes: process 0's gathering, its parent's report of the job's code (what
    the others wait for that code), the others' acks of it, then the final code's."""
    return gathering_seconds(step_timeout) + 2 * VERDICT_WAIT_SECONDS + FINAL_ACK_SECONDS


def longest_run(sizes: list[int], step_timeout: float) -> float:
    """The most seconds a courier's deep steps take, first step to last word: every step to its deadline, then
    the report."""
    steps = len(plan_steps(sizes)) + GROUP_STEPS_MAX
    return steps * step_timeout + report_seconds(step_timeout)


class _Deep:
    def __init__(
        self, client: Any, process_id: int, count: int, plan: dict[str, Any], emit: Emit, receive: Receive
    ) -> None:
        self.client, self.process_id, self.count, self.plan = client, process_id, count, plan
        self.emit, self.receive = emit, receive
        self.steps = plan_steps(list(plan["sizes"]))
        self.step_timeout = float(plan["step_timeout"])
        self.current = 0
        self.lock = threading.Lock()
        self.finished = False
        self.said: set[str] = set()  # what this process has added to its outcomes once ("rccl")
        self.watching = threading.Event()  # set: the watcher stops (process 0's final gathering has begun)

    def publish(self, index: int, outcome: dict[str, Any]) -> None:
        with contextlib.suppress(Exception):  # the service is gone: process 0 names this process as silent
            self.client.key_value_set(f"{PREFIX}/{index}/{self.process_id}", json.dumps(outcome))

    def abort(self) -> None:
        """Tell the others to run no further step."""
        with contextlib.suppress(Exception):
            self.client.key_value_set(f"{PREFIX}/abort", str(self.process_id), allow_overwrite=True)

    def aborted(self) -> bool:
        try:
            return bool(self.client.key_value_dir_get(f"{PREFIX}/abort"))
        except Exception:  # noqa: BLE001 - the service is gone: stop
            return True

    def on_timeout(self, index: int) -> None:
        """The watchdog: this process is stuck in step `index` (in a collective another process left)."""
        with self.lock:
            if self.finished or self.current != index:
                return
            self.finished = True
        if self.process_id != 0 and not self.service_answers():  # every write to a stopped service would hang
            self.emit("deep-report")
            self.emit("deep-done", code=1, why=PROCESS_0_SILENT)
            os._exit(0)
        self.publish(index, {"ok": False, "timeout": True, "error": f"not done within {self.step_timeout:g} s"})
        self.abort()
        self.report(index + 1, stuck=True)
        os._exit(0)

    def report(self, steps: int, *, stuck: bool = False) -> None:
        """Process 0: every process's outcome of the first `steps` steps, to the parent, then the job's exit
        code from the parent to the others, and a final code (1 where one of them never took it: process 0's
        report names it); the others: that final code (1 where this process is stuck or no code comes).
        `stuck`: called by the watchdog, with the main thread in a collective."""
        self.emit("deep-report")  # the parent's next deadline: this wait's, not a step's
        if self.process_id != 0:
            self.take_code(stuck, steps)
            return
        listening = self.gather(steps, stuck=stuck)
        if stuck:
            return  # the others are stuck or gone too: each says problems
        code = int(self.receive().get("deep-verdict", 1))
        acked: dict[int, str] = {}
        began = time.time()
        with contextlib.suppress(Exception):  # the service lives here: stay until they have read it
            self.client.key_value_set(f"{PREFIX}/verdict", str(code))
            until = time.time() + VERDICT_WAIT_SECONDS
            acked = read_published(self.client, f"{PREFIX}/ack", sorted(listening), until, time.time)
        unacked = sorted(p for p in listening if p not in acked)
        # The parent prints the report before anyone takes the final code (under mpirun the first process to exit
        # non-zero ends the job, process 0 with it). `waited`: how long the report may say it waited for them.
        self.emit("deep-acked", unacked=unacked, waited=round(time.time() - began, 1))
        self.receive()  # {"printed": true}
        with contextlib.suppress(Exception):
            self.client.key_value_set(f"{PREFIX}/final", str(code if code != 0 or not unacked else 1))
            until = time.time() + FINAL_ACK_SECONDS
            read_published(self.client, f"{PREFIX}/final-ack", sorted(acked), until, time.time)
        self.emit("deep-finished", unacked=unacked)

    def take_code(self, stuck: bool, steps: int) -> None:
        """A process other than 0: the job's final code from process 0, to the parent (with why, where none)."""
        code, why = 1, ""
        if not stuck:
            wait = gathering_seconds(self.step_timeout) + VERDICT_WAIT_SECONDS
            began = time.time()
            verdict = self.await_verdict(wait)
            if verdict is None:  # said as it happened: the wait ends early where the service stops answering
                waited = time.time() - began
                why = (
                    f"process 0 gave no exit code within {wait:g} s"
                    if waited >= wait - 1
                    else f"process 0 stopped answering {waited:.1f} s into the wait for its exit code"
                )
            else:
                with contextlib.suppress(Exception):
                    self.client.key_value_set(f"{PREFIX}/ack/{self.process_id}", "1")
                final = self.read_within(f"{PREFIX}/final", VERDICT_WAIT_SECONDS + FINAL_ACK_SECONDS)
                code = int(final) if final is not None else 1
                why = "" if final is not None else "process 0 gave the exit code but no final one"
        if code != 0 and not self.service_answers():
            why = PROCESS_0_SILENT
        elif stuck:
            why = f"this process was stuck in {self.steps[steps - 1]['name']}; process 0 reports the job"
        # The parent first, then the last ack: it lets process 0 end, and with it the service, whose end jaxlib's
        # client may answer with SIGABRT (seen under mpirun, under load) before a later emit.
        self.emit("deep-done", code=code, why=why)
        if not stuck:
            with contextlib.suppress(Exception):
                self.client.key_value_set(f"{PREFIX}/final-ack/{self.process_id}", "1")

    def await_verdict(self, seconds: float) -> str | None:
        """The job's exit code from process 0 within `seconds` (it may gather that long); None as soon as the
        service stops answering (process 0 stopped or gone), checked between short reads."""
        until = time.time() + seconds
        while (left := until - time.time()) > 0:
            verdict = self.read_within(f"{PREFIX}/verdict", min(left, VERDICT_POLL_SECONDS))
            if verdict is not None:
                return verdict
            if not self.service_answers():
                return None
        return None

    def read_within(self, key: str, seconds: float) -> str | None:
        """The value at `key` within `seconds`, else None. The read's own timeout is the service's to keep, and a
        stopped service keeps none: the read runs in a thread of its own, waited for a little longer."""
        answer: list[str] = []
        done = threading.Event()

        def read() -> None:
            with contextlib.suppress(Exception):  # DEADLINE_EXCEEDED, UNAVAILABLE: no answer
                answer.append(self.client.blocking_key_value_get(key, wait_ms(seconds)))
            done.set()

        threading.Thread(target=read, name="rocm-deep-read", daemon=True).start()
        done.wait(seconds + 1.0)
        return answer[0] if answer else None

    def service_answers(self) -> bool:
        """Whether the coordination service (in process 0's courier) answers at all: a key this process published
        long ago comes back at once from a live service; a stopped one does not."""
        return self.read_within(f"{PREFIX}/here/{self.process_id}", PROBE_SECONDS) is not None

    def gather(self, steps: int, *, stuck: bool = False) -> set[int]:
        """Every process's outcome of the first `steps` steps, to the parent; the processes that will wait for
        the job's code."""
        # The group steps do not wait for each other: where this process's group ended early, another group may
        # still be in any of them (a slow link is what they are for), each under its own step deadline. Stuck: the
        # others' watchdogs fire a step timeout after each started the step, and one may have started it later
        # than this process (compiling under load). Wait that long before calling anyone silent; a healthy job
        # has reported everything by now, and its reads return at once.
        self.watching.set()
        behind = sum(1 for step in self.steps[:steps] if "groups" in step) + (1 if stuck else 0)
        until = time.time() + GATHER_GRACE_SECONDS + behind * self.step_timeout  # at most gathering_seconds()
        gathered = []
        for index, step in enumerate(self.steps[:steps]):
            # A process missing here never reported the step: stopped, killed or hung before it.
            texts = read_published(self.client, f"{PREFIX}/{index}", range(self.count), until, time.time)
            gathered.append({**step, "outcomes": {str(p): json.loads(t) for p, t in sorted(texts.items())}})
        self.emit("deep", steps=gathered)
        last = gathered[-1]["outcomes"] if gathered else {}
        # Who waits for the job's code: the processes that finished the last step here (a stuck one's
        # watchdog has ended it; a stopped or killed one never reported it).
        return {int(p) for p, outcome in last.items() if not outcome.get("timeout")} - {0}

    def watch(self) -> None:
        """Process 0: every step outcome the job publishes, to the parent as it comes (`deep-seen`), until the
        final gathering; the plan again whenever the steps grow (the group steps come with the hosts)."""
        seen: set[str] = set()
        planned = 0
        while not self.watching.wait(WATCH_SECONDS):
            if len(self.steps) != planned:
                planned = len(self.steps)
                self.emit("deep-plan", steps=self.steps[:planned])
            try:
                listing = self.client.key_value_dir_get(PREFIX)
            except Exception:  # noqa: BLE001 - the service is gone: the parent reads the client's log
                return
            fresh: dict[str, dict[str, Any]] = {}
            for key, text in listing:
                index, _, process = key.removeprefix(f"{PREFIX}/").partition("/")
                if key in seen or not (index.isdigit() and process.isdigit()):
                    continue
                seen.add(key)
                with contextlib.suppress(ValueError):
                    fresh.setdefault(index, {})[process] = json.loads(text)
            if fresh and not self.watching.is_set():
                self.emit("deep-seen", outcomes=fresh)

    def run(self) -> None:
        if self.process_id == 0:
            threading.Thread(target=self.watch, name="rocm-deep-watch", daemon=True).start()
        for index, step in enumerate(self.steps):
            with self.lock:
                self.current = index
            # The watchdog covers the step and its reads and writes of the service around it: a stopped service
            # (process 0 stopped) never answers them.
            watchdog = threading.Timer(self.step_timeout, self.on_timeout, args=(index,))
            watchdog.daemon = True
            watchdog.start()
            try:
                if index == 0:
                    with contextlib.suppress(Exception):  # what service_answers() reads back
                        self.client.key_value_set(f"{PREFIX}/here/{self.process_id}", "1")
                if index > 0 and self.aborted():
                    # Said, so that process 0 does not take this process for one that never came to the step.
                    aborted = {"ok": False, "aborted": True, "error": "not run: another process stopped the job"}
                    self.publish(index, aborted)
                    break
                self.emit("deep-step", name=step["name"])  # progress, for --verbose
                began = time.time()
                try:
                    outcome = self.run_step(step)
                except Exception as error:  # noqa: BLE001 - a step that fails is a finding, not a crash
                    first_line = (str(error).strip().splitlines() or [""])[0]
                    outcome = {"ok": False, "error": clipped(f"{type(error).__name__}: {first_line}", 300)}
                # When, by this process's clock: --trace lays the steps out on each process's track.
                outcome = {**outcome, "began": round(began, 6), "ended": round(time.time(), 6)}
                with self.lock:
                    fired = self.finished
                if fired:  # the watchdog fired as the step ended: it reports, then ends this process
                    watchdog.join()
                    return
                if "op" in step and "rccl" not in self.said:  # after the first collective RCCL has chosen
                    self.said.add("rccl")
                    with contextlib.suppress(OSError):
                        from jax_rocm7_plugin._cluster.rccl_log import this_process

                        if (rccl := this_process()) is not None:
                            outcome = {**outcome, "rccl": {"said": rccl.said, "network": rccl.network}}
                self.publish(index, outcome)
                # Nothing later can run without a working backend; a collective of the whole job that raised
                # (gloo's own deadline where a peer stopped) leaves its communicator broken: later ones only fail.
                broken = "op" in step and "groups" not in step and not outcome.get("wrong")
                stop = not outcome["ok"] and (step["name"] in ("backend", "first-jit") or broken)
                if stop:
                    self.abort()
                with self.lock:
                    self.current = -1  # published: a watchdog firing now has nothing to say
            finally:
                watchdog.cancel()
            if stop:
                self.report(index + 1)
                return
        with self.lock:
            self.finished = True
        self.report(len(self.steps))

    def run_step(self, step: dict[str, Any]) -> dict[str, Any]:
        import jax

        name = step["name"]
        started = time.perf_counter()
        if name == "backend":
            return {"ok": True, "seconds": time.perf_counter() - started, "devices": len(jax.devices())}
        if name == "first-jit":
            return self.first_jit()
        if name == "local-work":
            return self.local_work()
        if name == "hosts":
            return self.hosts()
        if "groups" in step:
            mine = [(g, m) for g, m in step["groups"].items() if self.process_id in m]
            if not mine:
                return {"ok": True, "skipped": True}
            group, members = mine[0]
            return {**self.collective(step["op"], int(step["bytes"]), set(members)), "group": group}
        return self.collective(step["op"], int(step["bytes"]))

    def hosts(self) -> dict[str, Any]:
        """Every process's host, through the service; then the group steps, the same in every process."""
        started = time.perf_counter()
        self.client.key_value_set(f"{PREFIX}/host/{self.process_id}", str(self.plan.get("host") or ""))
        until = time.time() + self.step_timeout * 0.8  # within the step's deadline
        host_of = read_published(self.client, f"{PREFIX}/host", range(self.count), until, time.time)
        missing = [p for p in range(self.count) if p not in host_of]
        if missing:
            raise TimeoutError(f"no host came from process {', '.join(map(str, missing))} in time")
        self.steps.extend(group_steps(host_of, list(self.plan["sizes"])))
        return {"ok": True, "seconds": time.perf_counter() - started}

    def first_jit(self) -> dict[str, Any]:
        import jax
        import numpy as np

        started = time.perf_counter()
        for device in jax.local_devices():
            x = jax.device_put(np.arange(8, dtype=np.float32), device)
            y = np.asarray(jax.jit(lambda a: a * 2 + 1)(x))
            if not np.array_equal(y, np.arange(8, dtype=np.float32) * 2 + 1):
                return {"ok": False, "wrong": True, "error": f"{device}: {y.tolist()} is not 2x+1"}
        return {"ok": True, "seconds": time.perf_counter() - started}

    def local_work(self) -> dict[str, Any]:
        """Jitted matmuls on the first local device for at least LOCAL_WORK_SECONDS: the rate (GFLOP/s) over
        the whole time, so that a process that is stopped part of the time shows it."""
        import jax
        import numpy as np

        side, chain = LOCAL_WORK_SIZE, 16

        def work(a: Any) -> Any:
            return jax.lax.fori_loop(0, chain, lambda _, b: (b @ b) * (1.0 / side), a)

        x = jax.device_put(np.full((side, side), 1.0 / side, np.float32), jax.local_devices()[0])
        step = jax.jit(work)
        step(x).block_until_ready()
        runs, began = 0, time.perf_counter()
        while runs < 3 or time.perf_counter() - began < LOCAL_WORK_SECONDS:
            x = step(x)
            x.block_until_ready()
            runs += 1
        seconds = time.perf_counter() - began
        return {"ok": True, "seconds": seconds, "gflops": runs * chain * 2 * side**3 / seconds / 1e9}

    def collective(self, op: str, size: int, members: set[int] | None = None) -> dict[str, Any]:
        """`op` over every device of the job, or of the processes in `members`."""
        import jax
        import numpy as np
        from jax.sharding import Mesh, NamedSharding
        from jax.sharding import PartitionSpec as P

        try:
            from jax import shard_map  # type: ignore[attr-defined]
        except ImportError:  # jax before shard_map moved out of experimental
            from jax.experimental.shard_map import shard_map

        devices = [d for d in jax.devices() if members is None or d.process_index in members]
        n = len(devices)
        mesh = Mesh(np.array(devices), ("d",))
        per_device = max(1, size // 4 // (n if op == "all-gather" else 1))  # all-gather: size is the output
        rank_of = {d: i for i, d in enumerate(devices)}
        local = [jax.device_put(np.full((per_device,), rank_of[d] + 1, np.float32), d) for d in jax.local_devices()]
        x = jax.make_array_from_single_device_arrays((per_device * n,), NamedSharding(mesh, P("d")), local)
        if op == "all-reduce":
            body = shard_map(lambda a: jax.lax.psum(a, "d"), mesh=mesh, in_specs=P("d"), out_specs=P("d"))
        else:
            # Each device ends with the whole gathered buffer; out_specs P("d") keeps every copy (no claim of
            # replication for shard_map to verify).
            body = shard_map(
                lambda a: jax.lax.all_gather(a, "d", tiled=True), mesh=mesh, in_specs=P("d"), out_specs=P("d")
            )
        run = jax.jit(body)
        run(x).block_until_ready()  # compile and warm up
        iterations = 10 if size <= 1024 * 1024 else 3
        times = []
        for _ in range(iterations):
            began = time.perf_counter()
            y = run(x)
            y.block_until_ready()
            times.append(time.perf_counter() - began)
        shard = np.asarray(y.addressable_shards[0].data)
        if op == "all-reduce":
            right = bool(np.all(shard == n * (n + 1) / 2))
        else:
            expected = np.repeat(np.arange(1, n + 1, dtype=np.float32), per_device)
            right = bool(np.array_equal(shard, expected))
        outcome: dict[str, Any] = {"ok": right, "seconds": statistics.median(times), "ranks": n}
        if not right:
            outcome.update(wrong=True, error=f"{op} of {size} bytes gave {shard[:4].tolist()}...")
        return outcome


def run(client: Any, service: Any, found: dict[str, Any], plan: dict[str, Any], emit: Emit, receive: Receive) -> None:
    """The deep steps in this courier; jax's distributed state is pointed at the courier's own client."""
    import jax
    from jax._src import distributed

    state = distributed.global_state
    state.client, state.service = client, service
    state.process_id, state.num_processes = found["process_id"], found["num_processes"]
    state.coordinator_address = found["coordinator"]
    if plan["platform"] == "cpu":
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
    _Deep(client, found["process_id"], found["num_processes"], plan, emit, receive).run()
