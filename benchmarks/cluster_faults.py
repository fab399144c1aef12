"""When `cluster` and `cluster --deep` name a process that stops or dies, and when every process ends.

    python benchmarks/cluster_faults.py --library PATH [--python PY] [--phases joining,backend,...]
        [--processes 2 0] [--actions stop kill] [--step-timeout 5] [--timeout 20] [--json FILE]

Starts 3 real processes of `python -m jax_rocm7_plugin cluster [--deep --platform cpu]` (tests/support/deep_job.py:
own sysroots, processes 0 and 1 on host node-0, process 2 on node-1) and, for each phase, freezes (SIGSTOP) or
kills (SIGKILL) one whole process (the command and its courier: a node frozen or lost) as soon as its --verbose
output reaches that phase. Prints one row per case: who process 0's report names (or, where process 0 is the one
faulted, what the others said), the finding, and when each process ended after the fault (a stopped process is
killed at the harness's limit: "-"). Sizes 8 B and 4 KiB. Run it from outside the repository, with nothing else
heavy running; --python runs another interpreter on this checkout (PYTHONPATH), or with --wheels on the pair
installed there (jax 0.12 in a 3.12 venv with our 0.12.0 wheels: build.py wheels --release 0.12.0).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.support.deep_job import DeepJob, Fault  # noqa: E402

# (name, the --verbose text that starts it, --deep). Deep steps as plan_steps names them.
PHASES: dict[str, tuple[str, bool]] = {
    "joining": ("joining", False),
    "exchange": ("joined", False),
    "backend": ("deep step backend", True),
    "first-jit": ("deep step first-jit", True),
    "local-work": ("deep step local-work", True),
    "all-reduce/8": ("deep step all-reduce/8", True),
    "all-gather/4096": ("deep step all-gather/4096", True),
    "hosts": ("deep step hosts", True),
    "host-step": ("deep step hosts/", True),
    "report": ("deep report", True),
}
COUNT = 3


def run_case(options: argparse.Namespace, phase: str, process: int, action: str) -> dict[str, Any]:
    at, deep = PHASES[phase]
    with tempfile.TemporaryDirectory() as folder:
        job = DeepJob(
            Path(folder),
            options.library,
            COUNT,
            options.python,
            "" if options.wheels else str(REPO),
            step_timeout=options.step_timeout,
            deep=deep,
            timeout=options.timeout,
        )
        results = job.run(Fault(process, at, action, whole=True), sizes="8,4K", limit=600)
    faulted = job.faulted_at - job.started if job.faulted_at is not None else None
    case: dict[str, Any] = {"phase": phase, "process": process, "action": action, "faulted_s": faulted}
    case["ended_s"] = [
        None if code is None or faulted is None else round(seconds - faulted, 1) for code, _, seconds in results
    ]
    case["exit"] = [code for code, _, _ in results]
    report_text = results[0][1]
    if process != 0 and report_text.strip():
        report = json.loads(report_text)
        named = [(f["id"], f["processes"], f["hosts"]) for f in report["findings"] if f["severity"] != "info"]
        case["named"] = named
        case["summary"] = next((f["summary"] for f in report["findings"]), "")
    else:
        # What the first other process said in its own line ("cluster preflight, process 1: ...").
        said = [line.strip() for pid in range(COUNT) if pid != process for line in job.stderr[pid]]
        own = [s.split(": ", 1)[1] for s in said if s.startswith("cluster preflight, process")]
        case["named"] = []
        case["summary"] = own[0] if own else (said[-1] if said else "")
    return case


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--library", type=Path, required=True)
    parser.add_argument("--python", type=Path, default=Path(sys.executable))
    parser.add_argument("--phases", default=",".join(PHASES))
    parser.add_argument("--processes", type=int, nargs="+", default=[2])
    parser.add_argument("--actions", nargs="+", default=["stop", "kill"])
    parser.add_argument("--step-timeout", type=float, default=5.0)
    parser.add_argument("--timeout", type=float, default=20.0)
    parser.add_argument("--wheels", action="store_true", help="--python has our wheel pair installed")
    parser.add_argument("--json", type=Path, help="also write every case here")
    options = parser.parse_args()
    cases = []
    print("| phase | process | fault | at (s) | named by process 0 | exit codes | ended after the fault (s) |")
    print("|---|---|---|---|---|---|---|")
    for phase in options.phases.split(","):
        for process in options.processes:
            for action in options.actions:
                case = run_case(options, phase, process, action)
                cases.append(case)
                named = "; ".join(f"{i} {p} {','.join(h)}" for i, p, h in case["named"]) or case["summary"][:90]
                ended = ", ".join("-" if e is None else f"{e:g}" for e in case["ended_s"])
                at = "never" if case["faulted_s"] is None else f"{case['faulted_s']:.1f}"
                print(f"| {phase} | {process} | {action} | {at} | {named} | {case['exit']} | {ended} |", flush=True)
    if options.json is not None:
        options.json.write_text(json.dumps(cases, indent=2) + "\n")


if __name__ == "__main__":
    main()
