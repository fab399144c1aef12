"""A hung job names who holds it up: every process's place, compared through jax's coordination service.

In a process of a multi-process job (jax.distributed initialized with several processes) a daemon thread samples
where the main thread's Python stack is (sys._current_frames: file, line, function; never locals or arguments).
A Python thread runs while the main thread waits in a cross-process collective: the wait releases the GIL
(shown with jax 0.10.2 and 0.12.0 on the CPU backend over gloo). When the stack has not moved for
JAX_ROCM_HANG_TIMEOUT seconds, the process asks the others (a key under `jax_rocm7/hang/ask/`); every process
that can answer publishes its place under `jax_rocm7/hang/where/<ask>/<process>`; the lowest process that asked
collects the answers by a deadline and says one report: the processes grouped by place, the group that waits in
jax, and the odd ones with their place and host, or the ones that do not answer (frozen, dead, or a main thread
that holds the GIL). All in one place is said once at info level and blames no one. JAX_ROCM_HANG_ACTION=exit
makes every process leave with HANG_EXIT_CODE after the report.

Every call to the service runs under its own deadline: a frozen process 0 freezes the service it holds. The report's
wording and files are hang_report.py's, imported by the process that reports: a job's start imports only this.
"""

from __future__ import annotations

import collections
import contextlib
import json
import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from jax_rocm7_plugin import _environment
from jax_rocm7_plugin._job import peer
from jax_rocm7_plugin._job.store import process_of, read_published
from jax_rocm7_plugin._names import PLUGIN_PACKAGE
from jax_rocm7_plugin._record import NamedTuple

logger = logging.getLogger(PLUGIN_PACKAGE)

TIMEOUT_VARIABLE = _environment.HANG_TIMEOUT  # seconds, or "off"
ACTION_VARIABLE = _environment.HANG_ACTION  # report | exit
PLATFORMS_VARIABLE = _environment.HANG_PLATFORMS  # backends besides rocm that arm the watcher (tests: cpu)
DEFAULT_TIMEOUT = _environment.DEFAULT_HANG_TIMEOUT
HANG_EXIT_CODE = 124  # as timeout(1) says "ran out of time"
PREFIX = "jax_rocm7/hang"
# Asks a process answers in one sample at most: a peer that writes a million ask keys costs each process that many
# reads, never that many answers.
MAX_ANSWERS_PER_SAMPLE = 8


def _ask_id(ask: str, count: int) -> int | None:
    """The asking process of an ask's name (`<process>-<n>`, ASCII digits, a process of this job), else None."""
    process, dash, number = ask.partition("-")
    if not (dash and process.isascii() and process.isdigit() and number.isascii() and number.isdigit()):
        return None
    return int(process) if int(process) < count else None


BASELINE_WAIT_SECONDS = 30.0  # a backend that has not started by then: the counters are read all the same
TRAIL_PLACES = 24  # places kept per process for the timeline (at most ~24 x 120 bytes in its answer)
_JAX_PARTS = (f"{os.sep}jax{os.sep}", f"{os.sep}jaxlib{os.sep}", f"{os.sep}{PLUGIN_PACKAGE}{os.sep}")
_STDLIB = os.path.dirname(os.__file__)


class HangSettings(NamedTuple):
    timeout: float | None  # None: off
    action: str  # "report" or "exit"
    platforms: frozenset[str]
    problems: tuple[str, ...] = ()
    root: str = "/"  # the machine's files (JAX_ROCM_SYSROOT): its GPUs' counters and its host name


def read_settings(environ: Mapping[str, str]) -> HangSettings:
    """The watcher's variables, as declared; a bad value gets one sentence and the default."""
    timeout, action = _environment.setting(TIMEOUT_VARIABLE, environ), _environment.setting(ACTION_VARIABLE, environ)
    platforms = _environment.setting(PLATFORMS_VARIABLE, environ).value
    problems = tuple(p for p in (timeout.problem, action.problem) if p is not None)
    root = _environment.read(_environment.SYSROOT, environ) or "/"
    return HangSettings(timeout.value, action.value, platforms, problems, root)


# --- where a thread is ---------------------------------------------------------------------------------------


def frames_of(frame: Any) -> list[tuple[str, int, str]]:
    """(file, line, function) from the outermost frame to `frame`: names only, never locals or arguments."""
    found = []
    while frame is not None:
        found.append((frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name))
        frame = frame.f_back
    return found[::-1]


def _in_jax(path: str) -> bool:
    return any(part in path for part in _JAX_PARTS)


def place_of(frames: Sequence[tuple[str, int, str]]) -> tuple[str, bool]:
    """The innermost frame of the user's code ("train.py:88 step"), and whether the thread is inside jax below
    it (waiting in a collective, a compile, a transfer)."""
    user = [i for i, (path, _, _) in enumerate(frames) if not _in_jax(path) and not path.startswith(_STDLIB)]
    if not user:
        path, line, name = frames[-1] if frames else ("?", 0, "?")
        return f"{os.path.basename(path)}:{line} {name}", bool(frames) and _in_jax(path)
    index = user[-1]
    path, line, name = frames[index]
    return f"{os.path.basename(path)}:{line} {name}", any(_in_jax(p) for p, _, _ in frames[index + 1 :])


def _text(frames: Sequence[tuple[str, int, str]]) -> list[str]:
    return [f"{path}:{line} {name}" for path, line, name in frames]


# --- the watcher ---------------------------------------------------------------------------------------------


class _Caller:
    """Runs the watcher's calls to the coordination service on a helper thread, each under its own deadline
    (TimeoutError): the service may be frozen with the process that holds it. One helper thread serves every
    call, started at the first call (the watcher's first sample: none while the job starts); a new one only where
    the last is stuck. CPython 3.12+ starts no thread once the interpreter is finishing, which is when an exit
    asked of the job may still have to be said: where none can start, the main thread's call (the exit handler's)
    runs on it.

    Closed at exit (`close`): a daemon thread that comes back from a jaxlib call while the interpreter finishes is
    ended inside jaxlib's C++ frames, and the process aborts ("FATAL: exception not rethrown", SIGABRT; shown with
    jax 0.10.2: tests/integration/test_hang.py). So no call starts after exit handlers run, and the one in flight
    is waited for."""

    def __init__(self) -> None:
        self._slot: _Slot | None = None
        self._lock = threading.Lock()
        self._closed = False
        self._in_flight: threading.Event | None = None  # set when the last call handed over has returned

    def start(self) -> None:
        slot = _Slot()
        threading.Thread(target=slot.serve, name="rocm-hang-call", daemon=True).start()
        self._slot = slot

    def __call__(self, call: Callable[[], Any], seconds: float) -> Any:
        outcome: dict[str, Any] = {}
        done = threading.Event()
        with self._lock:
            if self._closed:
                raise RuntimeError("the interpreter is finishing: the hang watcher calls the service no more")
            if self._slot is None:
                try:
                    self.start()
                except RuntimeError:
                    if threading.current_thread() is not threading.main_thread():
                        raise  # a daemon thread's call could come back after the interpreter finished: see above
                    # The exit handler, with the helper stuck: call without a deadline. Failing every call would
                    # keep an asked exit from happening.
                    return call()
            assert self._slot is not None
            self._in_flight = done
            self._slot.hand(call, outcome, done)
        if not done.wait(seconds):
            with self._lock:
                self._slot = None  # stuck in the service: the next call gets a new helper thread
            raise TimeoutError(f"the coordination service did not answer within {seconds:g} s")
        if "error" in outcome:
            raise outcome["error"]
        return outcome.get("value")

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self, seconds: float) -> bool:
        """No call starts after this; the one in flight is waited for, `seconds` at most. True: none is left."""
        with self._lock:
            self._closed = True
            in_flight = self._in_flight
        return in_flight is None or in_flight.wait(seconds)


class _Slot:
    """One helper thread's calls, handed over one at a time (the watcher waits for each): a deque and a semaphore,
    which the process has loaded already (queue's C module would be one more library to load at start)."""

    def __init__(self) -> None:
        self._calls: collections.deque[tuple[Callable[[], Any], dict[str, Any], threading.Event]] = collections.deque()
        self._ready = threading.Semaphore(0)

    def hand(self, call: Callable[[], Any], outcome: dict[str, Any], done: threading.Event) -> None:
        self._calls.append((call, outcome, done))
        self._ready.release()

    def serve(self) -> None:
        while True:
            self._ready.acquire()
            call, outcome, done = self._calls.popleft()
            try:
                outcome["value"] = call()
            except BaseException as error:  # noqa: BLE001 - handed over
                outcome["error"] = error
            done.set()


class Watcher(threading.Thread):
    def __init__(
        self, client: Any, process: int, count: int, settings: HangSettings, alive: Callable[[], bool]
    ) -> None:
        super().__init__(name="rocm-hang-watcher", daemon=True)
        assert settings.timeout is not None
        self.client, self.process, self.count, self.settings, self.alive = client, process, count, settings, alive
        self.timeout = settings.timeout
        self.sample = self.period(self.timeout)
        self.call_seconds = max(5.0, 4 * self.sample)  # seen: 2 s ran out under load (the helper then left stuck)
        self.main = threading.main_thread()
        self.host: str | None = None  # read where an answer first states it (this thread, not the job's start)
        self.counters: tuple[Any, float] | None = None  # the host's GPU counters at the start, and when
        self.network: str | None = None  # the network RCCL would use between hosts from here (None: not read yet)
        self.answered: set[str] = set()
        self.noticed = False  # this process has noticed that the main thread stays where it is
        self.answered_here = False  # an ask of another process answered since the main thread stopped here
        # The main thread's last places (when it came there, place, in_jax): the page's timeline. Bounded: a key of
        # the service holds them.
        self.trail: collections.deque[tuple[float, str, bool]] = collections.deque(maxlen=TRAIL_PLACES)
        self.leaving = False  # JAX_ROCM_HANG_ACTION=exit was acted on
        self.asks = 0
        self.baseline_after: threading.Event | None = None  # the first counter read waits for it (see `start`)
        self.caller = _Caller()

    @staticmethod
    def period(timeout: float) -> float:
        """Seconds between samples: a twentieth of the timeout, within 0.2 and 5."""
        return min(5.0, max(0.2, timeout / 20))

    def _call(self, call: Callable[[], Any]) -> Any:
        return self.caller(call, self.call_seconds)

    def run(self) -> None:
        # Nothing is published while the job is healthy: the service holds this watcher's keys only once a
        # process has noticed (its ask, every answer).
        if self.baseline_after is not None:
            self.baseline_after.wait(BASELINE_WAIT_SECONDS)
        last, since = None, time.monotonic()
        while self.alive() and not self.caller.closed:
            time.sleep(self.sample)
            if self.counters is None:  # at the first sample, once: a short program never pays for it
                self.counters = (None, time.monotonic())  # no baseline, where the read fails
                self._try(self._read_counters)
            frame = sys._current_frames().get(self.main.ident or 0)
            if frame is None:
                # The main thread runs no Python now: it is finishing (printing the error a failed collective
                # raised, between exit handlers), which is when an exit the job was asked for must still happen.
                # Nothing to place; the watcher itself ends with the process or with jax's client.
                self._try(self._leave_if_asked)
                continue
            frames = frames_of(frame)
            now = time.monotonic()
            if frames != last:
                last, since, self.noticed, self.answered_here = frames, now, False, False
                place = place_of(frames)
                if not self.trail or self.trail[-1][1:] != place:
                    self.trail.append((now, *place))
            self._try(lambda f=frames, seconds=now - since: self._sample(f, seconds))

    def _sample(self, frames: list[tuple[str, int, str]], seconds: float) -> None:
        """Answer what was asked; ask the others once the main thread has stayed put for the timeout."""
        self._answer(frames, seconds)
        if not self.noticed and seconds >= self.timeout:
            self.noticed = True
            # Another process asked while this one was here: that hang is being reported already (the processes
            # notice a sample or more apart, more under load, and one report is enough).
            if not self.answered_here:
                self._ask(frames, seconds)

    def _read_counters(self) -> None:
        """The host's GPU counters at the watcher's first sample, a period after the backend started (this thread:
        nothing added to the job's start, and the job's first steps are in the baseline's window)."""
        self.counters = (_gpu_counters(self.settings.root), time.monotonic())

    def _record(self, frames: list[tuple[str, int, str]], seconds: float) -> str:
        place, in_jax = place_of(frames)
        moved: list[str] = []
        self._try(lambda: moved.extend(self._gpu_counters_moved()))
        return json.dumps(
            {
                "host": self._host(),
                "place": place,
                "in_jax": in_jax,
                "seconds": round(seconds, 1),
                "frames": _text(frames),
                "moved": moved,
                "network": self._network(),
                "trail": [[round(time.monotonic() - at, 1), place, in_jax] for at, place, in_jax in self.trail],
            }
        )

    def _host(self) -> str:
        if self.host is None:
            from jax_rocm7_plugin._safe_io import host_name

            self.host = host_name(self.settings.root)
        return self.host

    def _network(self) -> str:
        """The network RCCL would use between hosts from this host (_machine/transport.py), read once, at the
        first answer (this thread; a machine without a fabric gives "")."""
        if self.network is None:
            self.network = ""
            with contextlib.suppress(Exception):  # never a reason for the watcher to stop answering
                from jax_rocm7_plugin._machine.transport import read_transport
                from jax_rocm7_plugin._settings import read_settings as read_plugin_settings

                verdict = read_transport(read_plugin_settings(os.environ, sysroot=Path(self.settings.root)))
                self.network = verdict.said() if verdict is not None else ""
        return self.network

    def _gpu_counters_moved(self) -> list[str]:
        """The host's GPUs read again against the start: new uncorrectable errors, a reset, replays that rose."""
        if self.counters is None or self.counters[0] is None:
            return []
        from jax_rocm7_plugin._machine.health_findings import rising

        before, at = self.counters
        now = _gpu_counters(self.settings.root)
        return [] if now is None else [f.summary for f in rising(before, now, time.monotonic() - at)]

    def _answer(self, frames: list[tuple[str, int, str]], seconds: float) -> None:
        """Publish this process's place for every ask not answered yet; leave where an exit was asked."""
        fresh = 0
        for key, _ in self._call(lambda: self.client.key_value_dir_get(f"{PREFIX}/ask/")):
            ask = key.rstrip("/").rsplit("/", 1)[-1]
            if _ask_id(ask, self.count) is None or fresh >= MAX_ANSWERS_PER_SAMPLE:
                continue  # not an ask a process of this job makes, or a flood of them: a peer's bytes are data
            if ask not in self.answered:
                fresh += 1
                self.answered.add(ask)
                self.answered_here = True
                record = self._record(frames, seconds)
                self._call(lambda a=ask, r=record: self.client.key_value_set(f"{PREFIX}/where/{a}/{self.process}", r))
        self._leave_if_asked()

    def _leave_if_asked(self) -> None:
        if self.settings.action == "exit" and self._call(lambda: self.client.key_value_dir_get(f"{PREFIX}/exit/")):
            self._leave_the_job()

    def _try(self, step: Callable[[], None]) -> None:
        try:
            step()
        except Exception as error:  # noqa: BLE001 - a service gone or frozen: say it at debug level, never raise
            logger.debug("hang watcher: %s: %s", type(error).__name__, error)

    def at_exit(self) -> None:
        """Registered with atexit, so it runs before jax's own handler (registered at `import jax`, earlier).

        Where JAX_ROCM_HANG_ACTION=exit: when another process leaves, this main thread's collective fails and the
        interpreter exits; jax's handler would then wait in the shutdown barrier for processes that are gone until
        jaxlib aborts, and the watcher thread may not get to the exit key first (its calls may be failing). Where
        the job was asked to leave, leave now with the stated code. (A process leaves only once the exit key is
        set, so a process that finishes because a peer left finds it here.)

        Then, for every action, the watcher's calls end (_Caller.close): none may come back from jaxlib while the
        interpreter finishes."""
        if self.settings.action == "exit" and self.is_alive():
            try:
                asked = self.leaving or bool(self._call(lambda: self.client.key_value_dir_get(f"{PREFIX}/exit/")))
            except Exception as error:  # noqa: BLE001 - the service is gone or frozen: jax's handler says so
                logger.debug("hang watcher at exit: %s: %s", type(error).__name__, error)
                asked = False
            if asked:
                self._leave_the_job()
        if not self.caller.close(self.call_seconds):
            logger.debug("hang watcher at exit: a call to the service is still in flight after %g s", self.call_seconds)

    def _leave_the_job(self) -> None:
        """Leave with HANG_EXIT_CODE, the processes that hold no service first: process 0 holds jax's coordination
        service, and a client that loses it under itself is aborted by jaxlib (SIGABRT, not the stated code).
        So every other process says it leaves and goes; process 0 waits (by a deadline) for those that answered
        and then goes too. Whatever the service does meanwhile, this process leaves."""
        self.leaving = True
        try:
            if self.process == 0:
                self._see_the_others_leave()
            else:
                self._call(lambda: self.client.key_value_set(f"{PREFIX}/left/{self.process}", "1"))
        except Exception as error:  # noqa: BLE001 - gone or frozen: nothing more to say or wait for
            logger.debug("hang watcher: %s: %s", type(error).__name__, error)
        finally:
            _leave()

    def _ask(self, frames: list[tuple[str, int, str]], seconds: float) -> None:
        self.asks += 1
        ask = f"{self.process}-{self.asks}"
        self._call(lambda: self.client.key_value_set(f"{PREFIX}/ask/{ask}", str(self.process)))
        self.answered.add(ask)
        record = self._record(frames, seconds)
        self._call(lambda: self.client.key_value_set(f"{PREFIX}/where/{ask}/{self.process}", record))
        time.sleep(self.sample)  # others who noticed too have asked by now: the lowest of them reports
        listed = self._call(lambda: self.client.key_value_dir_get(f"{PREFIX}/ask/"))
        askers = {
            p for _, v in listed if (p := _ask_id(f"{v}-1", self.count)) is not None
        }  # a malformed one is no asker
        if min(askers, default=self.process) != self.process:
            return
        self._report(ask)

    def _report(self, ask: str) -> None:
        from jax_rocm7_plugin._job import hang_report  # only the process that reports a hang needs it

        deadline = time.monotonic() + self.call_seconds + 2 * self.sample
        found = read_published(self.client, f"{PREFIX}/where/{ask}", range(self.count), deadline)
        answers = {}
        for process, text in found.items():
            try:  # a peer's answer is data (_job/peer.py): one that is not an answer is a process that did not answer
                answers[process] = hang_report.answer_of(process, peer.loads(text, hang_report.MAX_ANSWER_BYTES))
            except (ValueError, KeyError, TypeError, IndexError):
                continue
        level, line = hang_report.report(answers, self.count, {})  # a process that does not answer said no host
        where = hang_report.write_stacks(answers, self.count)
        page = where.removesuffix(".txt") + ".html"
        if where.endswith(".txt") and hang_report.write_page(page, level, line, answers, self.count):
            where = f"{where}; the timeline: {page}"  # a timeline per process
        if level == "info":
            logger.info("ROCm job: %s", line)
            return
        logger.warning("ROCm job hangs: %s (every process's stack: %s)", line, where)
        if self.settings.action == "exit":
            self.leaving = True
            try:
                self._call(lambda: self.client.key_value_set(f"{PREFIX}/exit/{self.process}", "1"))
            except Exception as error:  # noqa: BLE001 - the service is gone or frozen: leave all the same
                logger.debug("hang watcher: %s: %s", type(error).__name__, error)
            self._leave_the_job()

    def _see_the_others_leave(self) -> None:
        """Wait (by a deadline) until every other process that answered an ask has said it leaves."""
        deadline = time.monotonic() + self.call_seconds + 4 * self.sample
        while time.monotonic() < deadline:
            answered = {process_of(k) for k, _ in self._call(lambda: self.client.key_value_dir_get(f"{PREFIX}/where/"))}
            left = {process_of(k) for k, _ in self._call(lambda: self.client.key_value_dir_get(f"{PREFIX}/left/"))}
            if left >= answered - {self.process}:
                return
            time.sleep(self.sample)


def _gpu_counters(root: str) -> Any:
    """The node's GPUs, cheaply (error counters, replays, modes: _machine/gpu_health.py), under a deadline; None
    where there are none or the driver does not answer."""
    from pathlib import Path

    from jax_rocm7_plugin._machine.gpu_health import read_in_time
    from jax_rocm7_plugin._safe_io import Deadline

    try:
        node = read_in_time(Path(root), full=False)
    except (Deadline, OSError):
        return None
    return node if node.gpus else None


def _leave() -> None:
    """End this process with HANG_EXIT_CODE now: no atexit handler (jax's would wait in the shutdown barrier for
    processes that are gone), no thread joined."""
    logging.shutdown()
    os._exit(HANG_EXIT_CODE)


def start(
    client: Any,
    process: int,
    count: int,
    settings: HangSettings,
    alive: Callable[[], bool],
    baseline_after: threading.Event | None = None,
) -> Watcher | None:
    """The watcher of this process, started (None where JAX_ROCM_HANG_TIMEOUT=off; default 600 s).
    `baseline_after`: the sampling (and so the GPU counters' first read, at the first sample) waits for it, at most
    BASELINE_WAIT_SECONDS: the backend's start, which the watcher's work would otherwise slow down (it competes for
    the interpreter)."""
    for problem in settings.problems:
        logger.warning("ROCm job: %s", problem)
    if settings.timeout is None:
        return None
    watcher = Watcher(client, process, count, settings, alive)
    watcher.baseline_after = baseline_after
    watcher.start()
    import atexit

    atexit.register(watcher.at_exit)
    return watcher
