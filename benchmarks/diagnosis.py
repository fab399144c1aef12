"""The doctor as a measured diagnosis: recall on public failures, false alarms on healthy machines.

For every released pair (each row of releases.json, its doctor run in process with that release and jaxlib):

- recall: the public failure reports of tests/support/fleet.py (FAILURES) whose cause the doctor names in the summary
  or fix of an error or warning, apart for the threads its own data cites (trained: _policy/*.json names them) and
  the others (held out); and the known-issue threads of tests/integration/test_known_issues.py (CASES) whose entry
  it names on the thread's machine;
- remedies: of the FAILURES whose thread confirms a working fix, those where the finding naming the cause gives
  that fix (named), and where the doctor also checked it by diagnosing again with it made (checked);
- false alarms: errors, and warnings other than a known issue its sources confirm for that configuration, on the
  healthy fleet (HEALTHY: 14 machines).

Machines are synthetic sysroots in the documented formats with link-stub libraries (test fixtures). Run from
outside the project root:

    python /path/to/benchmarks/diagnosis.py [--source CHECKOUT] [--json]

`--source` measures another checkout's doctor (its jax_rocm7_plugin) over this checkout's corpus and fleet.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _fixtures(directory: Path) -> Path:
    """What the tests' `build` fixture makes: the fake HIP 7 runtime, the PJRT-shaped libraries, the ROCm stubs."""
    from tests.support.native import fake_hip_runtime, pjrt_library_with_code_for
    from tests.support.sysroots import LIBRARY_TARGETS, PUBLISHED_TARGETS, bundle_for, math_library_stubs

    hip = fake_hip_runtime(directory / "hip", devices=1)
    pjrt_library_with_code_for(directory / "lib", bundle_for(LIBRARY_TARGETS), hip_dir=hip.parent)
    math_library_stubs(directory / "rocm-libs")
    pjrt_library_with_code_for(directory / "fleet-lib", bundle_for(list(PUBLISHED_TARGETS)), hip_dir=hip.parent)
    return directory


def measure(work: Path) -> dict[str, object]:
    import pytest

    from tests.integration.test_known_issues import CASES, build_machine, known
    from tests.support.fleet import (
        FAILURES,
        HEALTHY,
        diagnose_host,
        false_alarms,
        names_cause,
        released_pairs,
        remedy_outcome,
    )
    from tests.support.inprocess import doctor
    from tests.support.sysroots import library_of

    build = _fixtures(work / "build")
    patch = pytest.MonkeyPatch()
    count = iter(range(100000))
    results: dict[str, object] = {}
    try:  # the doctor's variable tables (a checkout before them has none)
        from jax_rocm7_plugin._policy.stack_variables import coverage

        results["variables"] = coverage()
    except ImportError:
        results["variables"] = None
    # Each known-issue thread on its own machine and pair (the entry's release where the thread says, else the
    # checkout's), as tests/integration/test_known_issues.py rebuilds it.
    entries_missed = []
    for entry, (trigger, _) in CASES.items():
        with patch.context() as inner:
            root = build_machine(trigger, work / str(next(count)), build, inner)
            if entry not in known(doctor(trigger.environ, root, library_of(build))):
                entries_missed.append(entry)
    results["known-issue threads"] = {
        "named": len(CASES) - len(entries_missed),
        "of": len(CASES),
        "missed": entries_missed,
    }
    for release, rocm in released_pairs():
        started = time.perf_counter()
        named, missed = [], []
        groups = {"trained": [0, 0], "held out": [0, 0]}  # named, of
        batches: dict[str, list[int]] = {}  # named, fix given, fix checked, of
        remedies: dict[str, list[str]] = {"checked": [], "named": [], "missed": []}
        for case in FAILURES:
            report = diagnose_host(case.host, case.rocm, case.release or release, work / str(next(count)), build, patch)
            hit = names_cause(report, case.cause)
            (named if hit else missed).append(case.thread)
            group = groups["trained" if case.trained else "held out"]
            group[0] += hit
            group[1] += 1
            outcome = remedy_outcome(report, case)
            if outcome != "none":
                remedies[outcome].append(case.thread)
            if case.batch:
                batch = batches.setdefault(case.batch, [0, 0, 0, 0])
                batch[0] += hit
                batch[1] += outcome in ("named", "checked")
                batch[2] += outcome == "checked"
                batch[3] += 1
        alarms: dict[str, list[str]] = {}
        for host in HEALTHY:
            if host.layout == "therock" and rocm.startswith("7.2."):
                continue  # not a configuration the 0.10.2 pair serves (see test_healthy_fleet.py)
            report = diagnose_host(host, rocm, release, work / str(next(count)), build, patch)
            loud = false_alarms(report, rocm)
            if loud:
                alarms[host.name] = [f"{f.severity} {f.id}{f' {f.known_issue}' if f.known_issue else ''}" for f in loud]
        machines = sum(1 for h in HEALTHY if not (h.layout == "therock" and rocm.startswith("7.2.")))
        results[release] = {
            "rocm": rocm,
            "failures_named": len(named),
            "failures": len(FAILURES),
            "failures_missed": missed,
            "recall_trained": groups["trained"],
            "recall_held_out": groups["held out"],
            "batches": batches,
            "confirmed_fixes": sum(len(v) for v in remedies.values()),
            "fixes_named": len(remedies["named"]) + len(remedies["checked"]),
            "fixes_checked": len(remedies["checked"]),
            "fixes_missed": remedies["missed"],
            "healthy_machines": machines,
            "false_alarms": sum(len(v) for v in alarms.values()),
            "machines_with_false_alarms": len(alarms),
            "alarms": alarms,
            "seconds": round(time.perf_counter() - started, 1),
        }
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, help="measure the doctor of another checkout (its jax_rocm7_plugin)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    sys.path.insert(0, str(REPO))
    with tempfile.TemporaryDirectory(prefix="diagnosis-") as work:
        if args.source is not None:  # its package only: the corpus and fleet (tests/) stay this checkout's
            (Path(work) / "source").mkdir()
            (Path(work) / "source" / "jax_rocm7_plugin").symlink_to(args.source.resolve() / "jax_rocm7_plugin")
            sys.path.insert(0, str(Path(work) / "source"))

        results = measure(Path(work))
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(f"doctor of {args.source or REPO}")
    threads = results.pop("known-issue threads")
    variables = results.pop("variables")
    if isinstance(variables, dict):
        print(
            f"variables the doctor knows: {variables['names']} names ({variables['reads']} reads), "
            f"{variables['judged']} reads judged; {variables['generated_names']} generated, "
            f"{variables['curated']} curated"
        )
    else:
        print("variables the doctor knows: no generated table in this checkout")
    assert isinstance(threads, dict)
    print(f"known-issue threads named on their machines: {threads['named']}/{threads['of']}", end="")
    print(f" (missed: {', '.join(threads['missed'])})" if threads["missed"] else "")
    print(
        "| pair | ROCm | causes named: all | held out | trained (cited in the data) | confirmed fixes given "
        "| of those, checked by the doctor | false alarms on healthy machines |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for release, row in results.items():
        assert isinstance(row, dict)
        held, trained = row["recall_held_out"], row["recall_trained"]
        print(
            f"| jax {release} | {row['rocm']} | {row['failures_named']}/{row['failures']} "
            f"({100 * row['failures_named'] / row['failures']:.0f}%) | {held[0]}/{held[1]} | {trained[0]}/{trained[1]} "
            f"| {row['fixes_named']}/{row['confirmed_fixes']} | {row['fixes_checked']}/{row['confirmed_fixes']} | "
            f"{row['false_alarms']} on {row['machines_with_false_alarms']} of {row['healthy_machines']} machines |"
        )
    for release, row in results.items():
        assert isinstance(row, dict)
        for batch, (named, given, checked, of) in row["batches"].items():  # type: ignore[attr-defined]
            print(
                f"jax {release}: held-out set {batch}: causes named {named}/{of}, confirmed fixes given {given}, "
                f"checked {checked}"
            )
        for thread in row["failures_missed"]:  # type: ignore[attr-defined]
            print(f"jax {release}: not named: {thread}")
        for thread in row["fixes_missed"]:  # type: ignore[attr-defined]
            print(f"jax {release}: confirmed fix not given: {thread}")
        for name, alarms in row["alarms"].items():  # type: ignore[attr-defined]
            print(f"jax {release}: false alarm on {name}: {'; '.join(alarms)}")


if __name__ == "__main__":
    main()
