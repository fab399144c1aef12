"""The job check at backend start with the real engine: jax.distributed on localhost (jax 0.10.2, this
checkout), our loader registering the stand-in library as 'rocm' in every process, each process with its own
machine (sysroot). Every process must reach the same verdict and exit status, the odd one named, nobody hung.
(jax 0.12.0 on CPython 3.12: tests/e2e/test_cluster_releases.py; under srun and mpirun: tests/e2e/test_launchers.py.)
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.support.cluster import routable_address
from tests.support.job_check import refused_everywhere, run_job
from tests.support.node_health import HEALTHY_NODES, Node


def test_processes_that_agree_start_silently_and_run(tmp_path: Path, standin_library: Path) -> None:
    for count in (2, 4):
        job = run_job(tmp_path / str(count), standin_library, count)
        assert job.codes == [0] * count, [o.stderr[-1500:] for o in job.outcomes]
        assert all(r["rocm"] for r in job.results)
        assert [job.lines(p) for p in range(count)] == [[]] * count
        keys = job.results[0]["keys"]
        assert sorted(keys) == [f"jax_rocm7/job-check/0/record/{p}" for p in range(1, count)] + [
            "jax_rocm7/job-check/0/verdict"
        ]
        assert json.loads(keys["jax_rocm7/job-check/0/verdict"])["kind"] == "agree"


def test_a_process_loading_another_library_build_stops_the_whole_job(tmp_path: Path, standin_library: Path) -> None:
    other = tmp_path / "other-build" / standin_library.name
    other.parent.mkdir()
    shutil.copy(standin_library, other)
    with open(other, "ab") as stream:  # other bytes, same code: what a second build of one release looks like
        stream.write(b"another build" * 100)
    job = run_job(tmp_path, standin_library, 2, library={1: other})
    refused_everywhere(job, "cluster-library-mismatch", [1])


def test_a_process_on_another_gpu_architecture_stops_the_whole_job(tmp_path: Path, standin_library: Path) -> None:
    job = run_job(tmp_path, standin_library, 4, gfx={2: 90010})
    refused_everywhere(job, "cluster-gpu-arch-mismatch", [2])
    assert "gfx90a on node-0 (process 2)" in job.results[3]["error"]


def test_a_process_whose_backend_cannot_come_up_stops_the_others(tmp_path: Path, standin_library: Path) -> None:
    job = run_job(tmp_path, standin_library, 2, no_kfd=(1,))
    refused_everywhere(job, "cluster-backend-unavailable", [1], own_reason=(1,))
    assert "kfd-device-missing on node-0 (process 1)" in job.results[0]["error"]
    # Process 1's own reason came first, at import, as before.
    assert "/dev/kfd does not exist" in job.lines(1)[0]


def test_a_late_process_is_named_and_nobody_waits_longer_than_the_deadline(
    tmp_path: Path, standin_library: Path
) -> None:
    each = {"JAX_PLATFORMS": "rocm", "JAX_ROCM_JOB_CHECK_TIMEOUT": "2"}
    job = run_job(tmp_path, standin_library, 2, each=each, per_process={1: {"JOB_LATE": "8"}})
    assert job.codes == [0, 0], [o.stderr[-1500:] for o in job.outcomes]  # both started: it cannot conclude
    assert job.outcomes[0].seconds < 8 + 20  # process 0 went on after ~2 s, the late one after its 8 s
    for process in (0, 1):  # the late one says the same
        (line,) = job.lines(process)
        assert "heard nothing from process 1" in line and "within 2 s" in line and "starts unchecked" in line


def test_a_process_that_never_starts_a_backend_is_named_and_the_others_run(
    tmp_path: Path, standin_library: Path
) -> None:
    each = {"JAX_PLATFORMS": "rocm", "JAX_ROCM_JOB_CHECK_TIMEOUT": "2"}
    job = run_job(tmp_path, standin_library, 4, each=each, per_process={3: {"JOB_NEVER": "1", "JOB_LATE": "6"}})
    assert job.codes == [0] * 4 and [r["rocm"] for r in job.results] == [True, True, True, False]
    for process in (0, 1, 2):
        (line,) = job.lines(process)
        assert "heard nothing from process 3" in line


def test_a_degraded_gpu_is_named_at_backend_start_and_the_job_runs(tmp_path: Path, standin_library: Path) -> None:
    """At the job's start: three hosts of three MI300X each (their health files; process p uses GPU p), node-1's
    GPU 0 with uncorrectable errors. Every process starts the backend; process 0 says one warning naming host,
    GPU and address."""
    pair = Node(HEALTHY_NODES["8x MI300X (XGMI, SPX/NPS1)"].boards[:3])
    degraded = pair.with_board(0, ras={"umc": (1, 0)})
    job = run_job(
        tmp_path, standin_library, 3, hosts={p: f"node-{p}" for p in range(3)},
        nodes={0: pair, 1: degraded, 2: pair}, coordinator=routable_address(),
    )  # fmt: skip
    assert job.codes == [0, 0, 0], [o.stderr[-1500:] for o in job.outcomes]
    assert all(r["rocm"] for r in job.results)
    (line,) = job.lines(0)
    assert "[cluster-gpu-degraded]" in line and "the ROCm backend starts" in line
    assert f"node-1: GPU 0 (gfx942 at {pair.boards[0].pci}) has had 1 uncorrectable" in line


def test_warn_mode_starts_everywhere_with_the_same_line(tmp_path: Path, standin_library: Path) -> None:
    job = run_job(tmp_path, standin_library, 2, gfx={1: 90010}, each={"JAX_ROCM_JOB_CHECK": "warn"})
    assert job.codes == [0, 0] and all(r["rocm"] for r in job.results)
    lines = [job.lines(p) for p in (0, 1)]
    assert len(lines[1]) == 1 and "[cluster-gpu-arch-mismatch]" in lines[1][0]
    assert lines[1][0].split("ROCm backend: ", 1)[1] in lines[0][-1]


def test_off_mode_publishes_nothing(tmp_path: Path, standin_library: Path) -> None:
    job = run_job(tmp_path, standin_library, 2, gfx={1: 90010}, each={"JAX_ROCM_JOB_CHECK": "off"})
    assert job.codes == [0, 0] and job.results[0]["keys"] == {}
    assert [job.lines(0), job.lines(1)] == [[], []]


def test_with_rocm_required_the_refusal_is_jaxs_error(tmp_path: Path, standin_library: Path) -> None:
    job = run_job(tmp_path, standin_library, 2, gfx={1: 90010}, each={"JAX_PLATFORMS": "rocm"})
    assert job.codes == [3, 3]
    for result in job.results:
        assert result["error"].startswith("Unable to initialize backend 'rocm': the ROCm backend starts in none")
        assert "[cluster-gpu-arch-mismatch]" in result["error"]
    assert not any("falls back to CPU" in line for p in (0, 1) for line in job.lines(p))


def test_a_second_backend_start_reads_only_its_own_keys(tmp_path: Path, standin_library: Path) -> None:
    # Only rocm: jax's CPU client does not come up a second time in a multi-process job (its collectives'
    # keys from the first start are there), with or without us.
    job = run_job(tmp_path, standin_library, 2, each={"JOB_RESTART": "1", "JAX_PLATFORMS": "rocm"})
    assert job.codes == [0, 0]
    keys = job.results[0]["keys"]
    assert {k.split("/")[2] for k in keys} == {"0", "1"} and len(keys) == 4  # per start: a record, the verdict


def test_bad_settings_get_one_sentence_and_the_defaults(tmp_path: Path, standin_library: Path) -> None:
    each = {"JAX_ROCM_JOB_CHECK": "loud", "JAX_ROCM_JOB_CHECK_TIMEOUT": "soon"}
    job = run_job(tmp_path, standin_library, 2, gfx={1: 90010}, each=each)
    assert job.codes == [3, 3]  # the default mode, error
    for process in (0, 1):
        lines = job.lines(process)
        # The grammar and the default the declarations state (_environment.py)
        assert any("JAX_ROCM_JOB_CHECK='loud' is not one of error, warn, off: error is used" in line for line in lines)
        assert any("JAX_ROCM_JOB_CHECK_TIMEOUT='soon' is not a number of seconds above 0: 120" in ln for ln in lines)


SECRETS = {"HF_TOKEN": "hf_planted_secret_0001", "AWS_SECRET_ACCESS_KEY": "planted-aws-0002"}


@pytest.mark.parametrize("odd", [False, True], ids=["agree", "refuse"])
def test_no_secret_is_published(tmp_path: Path, standin_library: Path, odd: bool) -> None:
    each = {**SECRETS, "NCCL_IB_HCA": f"mlx5_0 {SECRETS['HF_TOKEN']}", "XLA_FLAGS": "--xla_dump_to=/tmp/dump"}
    each["NCCL_SOCKET_IFNAME"] = f"https://user:{SECRETS['AWS_SECRET_ACCESS_KEY']}@example.org/eth"
    job = run_job(tmp_path, standin_library, 2, gfx={1: 90010} if odd else None, each=each)
    values = list(job.results[0]["keys"].values())
    assert len(values) == 2 and any("NCCL_IB_HCA" in v for v in values)  # process 1's record, the verdict
    assert not [s for s in SECRETS.values() for v in values if s in v]
    assert not [s for s in SECRETS.values() for o in job.outcomes if s in o.stderr or s in o.stdout]


# --- a later job on the same machines: the warm path, the job check included --------------------------------

WARM_LINE = "(the plan of the last start)"
REMEMBERED = "(these records agreed before)"
WARM_JOB_NEVER_IMPORTS = (
    "jax_rocm7_plugin._pipeline",
    "jax_rocm7_plugin._policy",
    "jax_rocm7_plugin._job.compare",
    "jax_rocm7_plugin._job.hang_report",
    "jax_rocm7_plugin._loader.register",
)


def test_the_second_job_starts_from_the_plan_and_process_0_remembers_the_verdict(
    tmp_path: Path, standin_library: Path
) -> None:
    debug = {"JOB_DEBUG": "1"}
    first = run_job(tmp_path, standin_library, 2, each=debug)
    assert first.codes == [0, 0] and all(WARM_LINE not in o.stderr for o in first.outcomes)
    assert any("job check: agree" in line for line in first.outcomes[0].stderr.splitlines())
    second = run_job(tmp_path, standin_library, 2, each=debug)
    assert second.codes == [0, 0], [o.stderr[-1500:] for o in second.outcomes]
    assert all(WARM_LINE in o.stderr for o in second.outcomes)  # both took the plan
    checks = [line for line in second.outcomes[0].stderr.splitlines() if "job check: agree" in line]
    assert len(checks) == 1 and REMEMBERED in checks[0], checks
    # A warm start imports none of the checks, the comparison, the policy or the hang report.
    for result in second.results:
        heavy = [m for m in result["modules"] if m.startswith(WARM_JOB_NEVER_IMPORTS)]
        assert heavy == [], heavy
    keys = second.results[0]["keys"]
    assert json.loads(keys["jax_rocm7/job-check/0/verdict"])["kind"] == "agree"
    # The warm process stated the record the cold one did (only the coordinator's port differs; process 0 keeps
    # its own).
    for process in range(1, 2):
        before = first.results[0]["keys"][f"jax_rocm7/job-check/0/record/{process}"]
        after = keys[f"jax_rocm7/job-check/0/record/{process}"]
        assert after.split(':"127.0.0.1:', 1)[0] == before.split(':"127.0.0.1:', 1)[0]
        assert after.partition("\n")[2] == before.partition("\n")[2]


def test_a_process_unlike_the_plan_takes_the_full_path_and_is_named(tmp_path: Path, standin_library: Path) -> None:
    debug = {"JOB_DEBUG": "1"}
    assert run_job(tmp_path, standin_library, 2, each=debug).codes == [0, 0]
    other = tmp_path / "other-build" / standin_library.name
    other.parent.mkdir()
    shutil.copy(standin_library, other)
    with open(other, "ab") as stream:
        stream.write(b"another build" * 100)
    job = run_job(tmp_path, standin_library, 2, library={1: other}, each=debug)
    assert WARM_LINE in job.outcomes[0].stderr and WARM_LINE not in job.outcomes[1].stderr
    refused_everywhere(job, "cluster-library-mismatch", [1])


def test_a_counter_that_moved_since_the_plan_means_the_full_path(tmp_path: Path, standin_library: Path) -> None:
    """The plan states the GPUs' health as its cold start read it: a new uncorrectable error is read afresh, and
    named by the job check as at any start."""
    pair = Node(HEALTHY_NODES["8x MI300X (XGMI, SPX/NPS1)"].boards[:2])
    layout = {"hosts": {0: "node-0", 1: "node-1"}, "nodes": {0: pair, 1: pair}, "each": {"JOB_DEBUG": "1"}}
    address = routable_address()
    assert run_job(tmp_path, standin_library, 2, coordinator=address, **layout).codes == [0, 0]  # type: ignore[arg-type]
    (counter,) = (tmp_path / "p1").glob(f"sys/devices/**/{pair.boards[0].pci}/ras/aca_umc")
    counter.write_text("ue: 1\nce: 0\nde: 0\n")
    job = run_job(tmp_path, standin_library, 2, coordinator=address, **layout)  # type: ignore[arg-type]
    assert WARM_LINE in job.outcomes[0].stderr and WARM_LINE not in job.outcomes[1].stderr
    assert job.codes == [0, 0], [o.stderr[-1500:] for o in job.outcomes]  # a degraded GPU warns; the job runs
    (line,) = [line for line in job.lines(0) if "[cluster-gpu-degraded]" in line]
    assert f"node-1: GPU 0 (gfx942 at {pair.boards[0].pci})" in line


def test_eight_processes_of_one_machine_starting_at_once_leave_one_whole_plan(
    tmp_path: Path, standin_library: Path
) -> None:
    job = run_job(tmp_path, standin_library, 8, each={"JOB_DEBUG": "1"}, one_machine=True)
    assert job.codes == [0] * 8, [o.stderr[-800:] for o in job.outcomes]
    written = [p for p, o in enumerate(job.outcomes) if "the start-up plan written" in o.stderr]
    assert len(written) == 1, written
    plans = list((tmp_path / "cache").glob("jax-rocm7-plugin/plans/*.json"))
    assert len(plans) == 1 and "job" in json.loads(plans[0].read_text())
    again = run_job(tmp_path, standin_library, 8, each={"JOB_DEBUG": "1"}, one_machine=True)
    assert again.codes == [0] * 8 and all(WARM_LINE in o.stderr for o in again.outcomes)


RECORD_2 = "jax_rocm7/job-check/0/record/2"
VERDICT = "jax_rocm7/job-check/0/verdict"


def test_a_peer_that_writes_a_huge_record_under_another_process_s_key_is_named_and_nobody_hangs(
    tmp_path: Path, standin_library: Path
) -> None:
    """Process 1 writes 3 MB under process 2's record key before process 2 does: process 2's own write is refused
    (it says so), process 0 compares that record with no one's, and every process acts on one refusal."""
    plant = json.dumps({RECORD_2: {"repeat": "[", "times": 3_000_000}})
    each = {"JAX_ROCM_JOB_CHECK_TIMEOUT": "20"}
    per_process = {0: {"JOB_LATE": "6"}, 1: {"JOB_PLANT": plant}, 2: {"JOB_LATE": "2"}}
    job = run_job(tmp_path, standin_library, 3, each=each, per_process=per_process)
    refused_everywhere(job, "cluster-record-taken", [2])
    assert any("record key of process 2 was already set when this process wrote its own" in line
               for line in job.lines(2)), job.lines(2)  # fmt: skip
    assert '"join":{"process_id":2,' in job.results[0]["keys"]["jax_rocm7/job-check/0/taken/2"]  # its own


def test_a_forged_verdict_is_acted_on_alike_printed_clean_and_said_by_process_0(
    tmp_path: Path, standin_library: Path
) -> None:
    """Process 1 sets the verdict key before process 0 (the service's one rule: the first set stands), with a
    terminal escape and 10,000 characters, and writes brackets nested 100,000 deep under process 2's key."""
    forged = {"kind": "refuse", "line": "\x1b[2J\x1b[31mplanted " + "x" * 10_000, "processes": [1], "missing": []}
    plant = json.dumps({VERDICT: json.dumps(forged), RECORD_2: {"repeat": "[", "times": 100_000}})
    each = {"JAX_ROCM_JOB_CHECK_TIMEOUT": "20"}
    per_process = {0: {"JOB_LATE": "4"}, 1: {"JOB_PLANT": plant}, 2: {"JOB_LATE": "2"}}
    job = run_job(tmp_path, standin_library, 3, each=each, per_process=per_process)
    assert job.codes == [3, 3, 3], [o.stderr[-1500:] for o in job.outcomes]
    for process in range(3):
        assert "\x1b" not in job.outcomes[process].stderr
        said = [line for line in job.lines(process) if "planted" in line]
        assert said and all(len(line) < 2300 and "(8015 more characters)" in line for line in said), said
    assert any("the job's verdict was set before process 0 set its own" in line for line in job.lines(0))
    assert any("record key of process 2 was already set" in line for line in job.lines(2))
