"""The hang report's wording and grouping (_job/hang_report.py), and the watcher's variables (_job/hang.py)."""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path

import pytest

from jax_rocm7_plugin._job import hang
from jax_rocm7_plugin._job.hang_report import Answer, report

JAX = os.path.join(os.sep, "venv", "lib", "python3.11", "site-packages", "jax", "_src", "array.py")


def answer(process: int, place: str, in_jax: bool, host: str = "node-1", seconds: float = 612) -> Answer:
    return Answer(process, host, place, in_jax, seconds, ())


def test_the_odd_process_is_named_with_its_place_and_host() -> None:
    answers = {p: answer(p, "train.py:88 step", True) for p in range(16) if p != 7}
    answers[7] = answer(7, "data.py:55 load_batch", False, host="node-3")
    level, line = report(answers, 16, {})
    assert level == "warning"
    assert line == (
        "15 of 16 processes wait in jax (train.py:88 step) for 612 s; "
        "process 7 (node-3) is in data.py:55 load_batch: it holds the job up"
    )


def test_a_silent_process_is_named_with_the_host_it_published() -> None:
    answers = {p: answer(p, "train.py:88 step", True) for p in (0, 1)}
    level, line = report(answers, 3, {2: "node-9"})
    assert level == "warning"
    assert line.endswith("process 2 (node-9) does not answer: frozen, dead, or its main thread holds the GIL")


def test_all_in_one_place_is_info_and_blames_no_one() -> None:
    answers = {p: answer(p, "ckpt.py:12 save", False, seconds=700 + p) for p in range(4)}
    level, line = report(answers, 4, {})
    assert level == "info" and "all 4 processes have been in ckpt.py:12 save for 700 s" in line
    assert "holds" not in line.replace("holding", "")


def test_all_in_one_place_with_a_gpu_whose_counters_moved_names_that_gpu() -> None:
    """A hang every process shares in one place is attributed to the GPU whose counters moved, said once for its
    host although every process there read it."""
    ue = "GPU 3 (gfx942 at 0000:65:00.0) had 1 new uncorrectable error(s) in 640 s (umc +1)"
    answers = {p: answer(p, "train.py:88 step", True, host=f"node-{p // 2}") for p in range(4)}
    for p in (2, 3):
        answers[p] = answers[p]._replace(moved=(ue,))
    level, line = report(answers, 4, {})
    assert level == "warning"
    assert line == (
        f"all 4 processes have been in jax (train.py:88 step) for 612 s, and meanwhile on node-1, {ue}: the job "
        "likely waits on that GPU"
    )


def test_the_place_is_the_innermost_frame_of_the_users_code() -> None:
    frames = [("/home/me/train.py", 10, "<module>"), ("/home/me/train.py", 88, "step"), (JAX, 400, "__array__")]
    assert hang.place_of(frames) == ("train.py:88 step", True)
    assert hang.place_of(frames[:2]) == ("train.py:88 step", False)


@pytest.mark.parametrize(
    ("environ", "timeout", "action", "problems"),
    [
        ({}, 600.0, "report", 0),  # on by default
        ({"JAX_ROCM_HANG_TIMEOUT": " OFF "}, None, "report", 0),
        ({"JAX_ROCM_HANG_TIMEOUT": "600"}, 600.0, "report", 0),
        ({"JAX_ROCM_HANG_TIMEOUT": "off"}, None, "report", 0),
        ({"JAX_ROCM_HANG_TIMEOUT": "30", "JAX_ROCM_HANG_ACTION": "exit"}, 30.0, "exit", 0),
        ({"JAX_ROCM_HANG_TIMEOUT": "soon"}, 600.0, "report", 1),
        ({"JAX_ROCM_HANG_TIMEOUT": "-5", "JAX_ROCM_HANG_ACTION": "kill"}, 600.0, "report", 2),
    ],
)
def test_a_bad_value_gets_one_sentence_and_the_default(
    environ: dict[str, str], timeout: float | None, action: str, problems: int
) -> None:
    settings = hang.read_settings(environ)
    assert (settings.timeout, settings.action, len(settings.problems)) == (timeout, action, problems)


def test_a_hang_noticed_a_sample_apart_is_reported_once(caplog: pytest.LogCaptureFixture) -> None:
    """Process 1 notices first and reports; process 0 notices a few samples later (load, a later sample), having
    answered process 1's ask meanwhile: it asks no second time, so one report is said. Both watchers watch this
    test's main thread, which waits in one place; the store is tests/support/kv_store.py's stand-in."""
    from tests.support.kv_store import Store

    store, alive = Store(), [True]
    settings = hang.read_settings({"JAX_ROCM_HANG_TIMEOUT": "1"})  # a sample every 0.2 s
    late, early = (hang.Watcher(store, p, 2, settings, alive=lambda: alive[0]) for p in (0, 1))
    caplog.set_level(logging.INFO, logger="jax_rocm7_plugin")
    # The main thread waits in one place the whole time (one Event.wait): had it moved between the two starts
    # (two sleeps), both watchers would have seen it arrive at once and noticed together, and the case would pass
    # without the fix about a quarter of the time. Process 0 starts watching 4 samples after process 1.
    done = threading.Event()
    starter, stopper = threading.Timer(0.8, late.start), threading.Timer(3.8, done.set)
    early.start()
    starter.start()
    stopper.start()
    try:
        done.wait()  # one place, long past both timeouts
    finally:
        starter.join(timeout=5)
        stopper.join(timeout=5)
        alive[0] = False
        early.join(timeout=5)
        late.join(timeout=5)
    said = [r.getMessage() for r in caplog.records if r.getMessage().startswith("ROCm job")]
    assert len(said) == 1, said
    assert said[0].startswith("ROCm job: all 2 processes have been in test_hang_report.py:")


def test_a_stuck_service_call_runs_out_and_the_next_gets_a_new_helper_thread() -> None:
    before = {t.name for t in threading.enumerate()}
    caller = hang._Caller()
    assert {t.name for t in threading.enumerate()} == before  # none while the job starts: at the first call
    helper = caller(threading.get_ident, 1.0)
    assert helper != threading.get_ident()
    release = threading.Event()
    with pytest.raises(TimeoutError):
        caller(release.wait, 0.2)  # the service frozen: the helper stays stuck in it (alive, its id its own)
    assert caller(threading.get_ident, 1.0) not in (helper, threading.get_ident())
    release.set()


def test_where_no_thread_can_start_the_call_runs_on_the_calling_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    """CPython 3.12+ at interpreter exit: an asked exit must still reach the service."""
    caller = hang._Caller()

    def refuse(self: threading.Thread) -> None:
        raise RuntimeError("can't create new thread at interpreter shutdown")

    monkeypatch.setattr(threading.Thread, "start", refuse)
    assert caller(threading.get_ident, 1.0) == threading.get_ident()


def test_an_asked_exit_happens_while_the_main_thread_runs_no_python(monkeypatch: pytest.MonkeyPatch) -> None:
    """Seen under srun: a peer left, this main thread's collective failed and the interpreter was finishing (no
    Python frame while it prints the error); the watcher must still leave with the stated code, not end."""
    from tests.support.kv_store import Store

    store, left = Store(), threading.Event()
    store.key_value_set(f"{hang.PREFIX}/exit/1", "1")
    settings = hang.read_settings({"JAX_ROCM_HANG_TIMEOUT": "1", "JAX_ROCM_HANG_ACTION": "exit"})
    monkeypatch.setattr(hang, "_leave", left.set)  # instead of os._exit
    watcher = hang.Watcher(store, 2, 3, settings, alive=lambda: not left.is_set())
    watcher.main = threading.Thread(target=lambda: None)  # never started: no frame, like a finishing main thread
    watcher.start()
    assert left.wait(5), "the watcher did not leave"
    assert store.values.get(f"{hang.PREFIX}/left/2") == "1"  # said before leaving
    watcher.join(timeout=5)


def test_a_hang_in_a_collective_says_the_network_between_hosts_where_a_fabric_says_it() -> None:
    answers = {
        0: Answer(0, "node-0", "pxla.py:1290 (__call__)", True, 620.0, (), (), "IB over mlx5_0:1"),
        1: Answer(1, "node-1", "pxla.py:1290 (__call__)", True, 621.0, (), (), "Socket over eth0"),
        2: Answer(2, "node-1", "train.py:40 (step)", False, 600.0, (), (), "Socket over eth0"),
    }
    level, line = report(answers, 3, {})
    assert level == "warning"
    assert line.endswith("between hosts RCCL would use node-0: IB over mlx5_0:1; node-1: Socket over eth0")
    quiet = {p: a._replace(network="") for p, a in answers.items()}
    assert "RCCL" not in report(quiet, 3, {})[1]  # no fabric anywhere: nothing to say


def test_the_stacks_and_the_page_go_to_the_shared_temporary_folder_as_this_users_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stacks file's name is predictable (pid, second): a link another user planted there is never followed,
    and what is written is readable by this user alone (0600), the page beside it too."""
    import stat
    import tempfile

    from jax_rocm7_plugin._job import hang_report

    monkeypatch.setattr(tempfile, "gettempdir", lambda: str(tmp_path))
    monkeypatch.setattr(hang_report.time, "time", lambda: 1700000000.0)
    answers = {0: Answer(0, "node-0", "train.py:40 step", True, 30.0, ("train.py:40 step",))}
    victim = tmp_path / "victim"
    victim.write_text("keep me\n")
    planted = tmp_path / f"jax-rocm7-hang-{os.getpid()}-1700000000.txt"
    planted.symlink_to(victim)
    said = hang_report.write_stacks(answers, 1)
    assert said.startswith("not written") and victim.read_text() == "keep me\n", said
    planted.unlink()
    path = Path(hang_report.write_stacks(answers, 1))
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and "train.py:40 step" in path.read_text()
    page = tmp_path / "hang.html"
    assert hang_report.write_page(str(page), "warning", "a line", answers, 1)
    assert stat.S_IMODE(page.stat().st_mode) == 0o600


def test_an_answer_is_bounded_and_printable_and_a_broken_one_is_refused() -> None:
    from jax_rocm7_plugin._job import hang_report

    data = {
        "host": "node-1\x1b[2J",
        "place": "train.py:40 step",
        "in_jax": True,
        "seconds": 30.0,
        "frames": [f"f.py:{n} g" for n in range(100000)],
        "trail": [[float(n), "train.py:40 step", True] for n in range(5000)],
    }
    answer = hang_report.answer_of(1, data)
    assert answer.host == "node-1[2J" and len(answer.frames) == hang_report.MAX_FRAMES
    assert len(answer.trail) == hang_report.MAX_TRAIL and answer.trail[-1][0] == 4999.0
    for broken in ({**data, "seconds": float("inf")}, {**data, "host": ["a"]}, {**data, "frames": 5}):
        with pytest.raises((ValueError, TypeError)):
            hang_report.answer_of(1, broken)


def test_asks_are_read_as_data_and_a_flood_of_them_costs_a_few_answers() -> None:
    """A malformed ask (a value that is no process) no longer ends the asker's report; a million ask keys make no
    process publish a million answers."""
    from tests.support.kv_store import Store

    names = ("1-2", "3-1", "4-1", "x-1", "\u00b2-1", "1-", "1")
    assert [hang._ask_id(a, 4) for a in names] == [1, 3, None, None, None, None, None]
    store = Store()
    for n in range(2000):
        store.key_value_set(f"{hang.PREFIX}/ask/{n % 4}-{n}", str(n % 4))
    store.key_value_set(f"{hang.PREFIX}/ask/evil", "not a process")
    watcher = hang.Watcher(store, 0, 4, hang.read_settings({"JAX_ROCM_HANG_TIMEOUT": "1"}), alive=lambda: False)
    watcher._answer([("train.py", 40, "step")], 5.0)
    answered = [k for k, _ in store.key_value_dir_get(f"{hang.PREFIX}/where/")]
    assert len(answered) == hang.MAX_ANSWERS_PER_SAMPLE, len(answered)
