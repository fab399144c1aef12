"""The pages without a browser: what they hold and what they never do (fetch, run foreign markup, overwrite)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from jax_rocm7_plugin._cluster.report import ClusterReport
from jax_rocm7_plugin._job.compare import compare
from jax_rocm7_plugin._job.record import Fault
from jax_rocm7_plugin._pages import cluster, doctor, html, output
from tests.support.records import PER_HOST, lab, record

HOSTILE = '<script>alert(1)</script>"><img src=x onerror=alert(2)>'


def _page(records: dict, findings: tuple = ()) -> str:  # type: ignore[type-arg]
    hosts = tuple(sorted({r.host for r in records.values()}))
    report = ClusterReport(len(records), tuple(sorted(records)), (), hosts, findings or tuple(compare(records)))
    return cluster.render(report.to_json(), records)


def test_a_page_fetches_nothing_and_runs_only_its_own_script() -> None:
    page = _page(lab(4, {(1, 2): {"power_cap": 500}}))
    # No URL of any kind (the SVG namespace is a name, not a fetch), no external script, style, font or image.
    assert re.findall(r"(?:src|href)\s*=", page) == []
    assert [u for u in re.findall(r"https?://[^\s\"'<>]+", page) if u != "http://www.w3.org/2000/svg"] == []
    assert page.count("<script>") == 1 and "default-src 'none'" in page


def test_names_from_the_machines_are_text_never_markup() -> None:
    records = {p: r._replace(host=f"{HOSTILE}-{p // 8}") for p, r in lab(2, {(1, 0): {"modes": "CPX/NPS4"}}).items()}
    page = _page(records)
    assert "<script>alert" not in page and "<img" not in page and "&lt;script&gt;alert(1)" in page


def test_the_odd_gpu_is_the_one_marked_and_the_healthy_job_marks_none() -> None:
    assert 'data-marked="true"' not in _page(lab(8))
    page = _page(lab(8, {(5, 6): {"power_cap": 500}}))
    assert re.findall(r'class="cell" data-host="([^"]+)" data-gpu="(\d+)" data-severity="\w+" data-marked="true"',
                      page) == [("gpu-5", "6")]  # fmt: skip


def test_a_degraded_gpu_marks_itself_not_its_whole_host() -> None:
    """cluster-gpu-degraded says which GPUs its faults concern (by host and address): those, and only those, are
    marked; a host setting (a fault naming no GPU) marks its whole host."""
    records = lab(2)
    fault = Fault("pcie-link-degraded", "GPU 3 (gfx942 at 0000:03:00.0): its PCIe link trained at 16 GT/s x8", (3,))
    for p in range(PER_HOST, 2 * PER_HOST):
        health = records[p].health
        assert health is not None
        records[p] = records[p]._replace(health=health._replace(faults=(fault,)))
    (finding,) = [f for f in compare(records) if f.id == "cluster-gpu-degraded"]
    assert finding.concerns is not None and [(g.host, g.pci) for g in finding.concerns.gpus] == [
        ("gpu-1", "0000:03:00.0")
    ]
    marked = re.findall(r'class="cell" data-host="([^"]+)" data-gpu="(\d+)" data-severity="\w+" data-marked="true"',
                        _page(records))  # fmt: skip
    assert marked == [("gpu-1", "3")]
    host_setting = Fault("host-memlock-limited", "the locked-memory limit is 65536 bytes", ())
    for p in range(PER_HOST, 2 * PER_HOST):
        records[p] = records[p]._replace(health=records[p].health._replace(faults=(host_setting,)))  # type: ignore[union-attr]
    marked = re.findall(r'data-host="([^"]+)" data-gpu="(\d+)" data-severity="\w+" data-marked="true"', _page(records))
    assert marked == [("gpu-1", str(g)) for g in range(PER_HOST)]


def test_a_node_unlike_its_peers_says_the_attribute_each_value_and_who_holds_it() -> None:
    (finding,) = compare(lab(4, {(2, 6): {"power_cap": 500}}))
    assert finding.id == "cluster-node-unlike-peers" and finding.concerns is not None
    assert finding.concerns.attribute == "power_cap"
    assert finding.concerns.values == (("750 W", ("gpu-0", "gpu-1", "gpu-3")), ("500 W, 750 W", ("gpu-2",)))
    assert [(g.host, g.ordinal) for g in finding.concerns.gpus] == [("gpu-2", 6)]
    assert finding.to_json()["concerns"]["values"][1] == {"value": "500 W, 750 W", "held_by": ["gpu-2"]}  # type: ignore[index]


def test_a_process_that_is_not_ok_marks_its_own_gpu() -> None:
    records = lab(2)
    records[9] = records[9]._replace(ok=False, first_error=("rocm-not-found", "no ROCm", "install it"))
    page = _page(records)
    marked = re.findall(r'data-host="([^"]+)" data-gpu="(\d+)" data-severity="error" data-marked="true"', page)
    assert marked == [("gpu-1", "1")]
    assert "rocm-not-found" in page  # the job check's result, in the cell's title and the table


def test_without_health_the_gpus_come_from_what_the_processes_saw() -> None:
    page = _page({p: record(p, 16) for p in range(16)})
    assert page.count('class="cell"') == 16 and "<td>no process</td>" not in page


@pytest.mark.parametrize("hosts", [129, 1024])
def test_many_hosts_fold_alike_ones_into_one_tile(hosts: int) -> None:
    page = _page(lab(hosts, {(100, 1): {"link": "16 GT/s x8"}}))
    tiles = re.findall(r'data-hosts="(\d+)"', page)
    assert sorted(map(int, tiles)) == [1, hosts - 1]
    assert len(page) < 100_000


def test_a_page_is_written_whole_and_never_over_a_file_without_force(tmp_path: Path) -> None:
    target = tmp_path / "page.html"
    assert output.write(target, "one", force=False) is None and target.read_text() == "one"
    assert output.refusal(target, force=False, flag="--html") == f"--html {target}: exists; add --force to replace it"
    assert "add --force" in (output.write(target, "two", force=False) or "") and target.read_text() == "one"
    assert output.write(target, "two", force=True) is None and target.read_text() == "two"
    assert output.refusal(tmp_path, force=True, flag="--html") == f"--html {tmp_path}: is a directory; give a file name"
    missing = tmp_path / "nowhere" / "page.html"
    assert "does not exist" in (output.refusal(missing, force=False, flag="--trace") or "")
    assert list(tmp_path.glob(".*partial")) == []


def test_severities_order_worst_first_and_names_sort_naturally() -> None:
    assert html.worst(["info", "warning", "ok"]) == "warning" and html.worst([]) == "ok"
    assert sorted(["node-10", "node-2", "node-1"], key=html.natural) == ["node-1", "node-2", "node-10"]


def test_gpus_without_a_pci_address_are_told_apart_by_their_place() -> None:
    """KFD gives no location (a VM, a synthetic node): each node is its own GPU, and each process its own cell."""
    records = {}
    for p in range(16):
        base = record(p, 16)
        records[p] = base._replace(gpus=tuple(g._replace(pci_bus=None) for g in base.gpus))
    cells = cluster.cells_of({"findings": []}, records)
    assert [(c.host, c.ordinal, c.processes) for c in cells[:3]] == [("gpu-0", 0, (0,)), ("gpu-0", 1, (1,)),
                                                                      ("gpu-0", 2, (2,))]  # fmt: skip
    assert len(cells) == 16 and all(c.pci is None and len(c.processes) == 1 for c in cells)


def test_the_doctor_s_topology_marks_only_what_the_findings_name() -> None:
    """The page decides nothing: a narrow link that no finding names is drawn as read, not marked (and the one a
    finding names is drawn red)."""
    from jax_rocm7_plugin._machine.gpu_health import GpuHealth, Link

    narrow = Link("/sys/x", 16.0, 8, 32.0, 16, 32.0, 16, False)
    gpus = tuple(GpuHealth(n, f"0000:0{n}:00.0", (n,), "gfx942", None, None, link=narrow) for n in range(2))
    health = type("Health", (), {"gpus": gpus})()
    finding = {
        "id": "pcie-link-degraded",
        "severity": "warning",
        "summary": "GPU 1 (gfx942 at 0000:01:00.0): x8",
        "concerns": {"gpus": [{"ordinal": 1, "pci": "0000:01:00.0"}]},
    }
    page = doctor.render({"ok": True, "findings": [finding]}, "ROCm backend: available", health, {})
    assert re.findall(r'data-gpu="(\d)" data-pci="[^"]*" data-marked="true"', page) == ["1"]
    assert [m.link_degraded for m in doctor.marks({"findings": [finding]}, health)] == [False, True]
    # What it concerns is data: words that name GPU 0's address mark nothing.
    worded = {"id": "known-issue", "severity": "warning", "summary": "seen on 0000:00:00.0", "evidence": ["0000:00"]}
    assert [m.why for m in doctor.marks({"findings": [worded]}, health)] == [(), ()]


def test_each_step_of_the_trace_carries_its_own_groups_bandwidth_and_failed_steps_stay() -> None:
    """Four processes, a job-wide all-reduce, one all-reduce per pair of hosts (each pair its own figure), and an
    all-gather that failed in process 3: every slice carries the figure of its own (op, size, group), algbw and busbw
    apart (4 ranks: busbw = algbw x 3/2), and the failed step is a slice with its error."""
    from jax_rocm7_plugin._pages import trace

    def outcome(began: float, group: str | None = None, ok: bool = True) -> dict[str, object]:
        done: dict[str, object] = {"ok": ok, "seconds": 0.5, "began": began, "ended": began + 0.5}
        if group is not None:
            done["group"] = group
        if not ok:
            done["error"] = "DEADLINE_EXCEEDED: the step's deadline passed"
        return done

    pairs = {0: "pair:a,b", 1: "pair:a,b", 2: "pair:c,d", 3: "pair:c,d"}
    steps = [
        {"name": "all-reduce 1 MiB", "op": "all-reduce", "bytes": 1 << 20,
         "outcomes": {str(p): outcome(10.0) for p in range(4)}},
        {"name": "all-reduce 1 MiB by pair", "op": "all-reduce", "bytes": 1 << 20,
         "outcomes": {str(p): outcome(11.0, pairs[p]) for p in range(4)}},
        {"name": "all-gather 8 B", "op": "all-gather", "bytes": 8,
         "outcomes": {str(p): outcome(12.0, ok=p != 3) for p in range(4)}},
    ]  # fmt: skip
    figures = [
        {"op": "all-reduce", "bytes": 1 << 20, "group": "job", "algbw_gbps": 4.0, "busbw_gbps": 6.0},
        {"op": "all-reduce", "bytes": 1 << 20, "group": "pair:a,b", "algbw_gbps": 2.0, "busbw_gbps": 2.0},
        {"op": "all-reduce", "bytes": 1 << 20, "group": "pair:c,d", "algbw_gbps": 7.0, "busbw_gbps": 7.0},
        {"op": "all-gather", "bytes": 8, "group": "job", "algbw_gbps": 0.2, "busbw_gbps": 0.15},
    ]
    events = trace.trace_events(steps, figures, {p: "ab"[p // 2] for p in range(4)})["traceEvents"]
    slices = {(e["pid"], e["name"]): e["args"] for e in events if e["ph"] == "X" and e["cat"] != "run"}
    assert len(slices) == 12  # every step of every process, the failed one too
    for p in range(4):
        assert (slices[(p, "all-reduce 1 MiB")]["algbw_gbps"], slices[(p, "all-reduce 1 MiB")]["busbw_gbps"]) == (4, 6)
        own = slices[(p, "all-reduce 1 MiB by pair")]
        assert own["group"] == pairs[p] and own["busbw_gbps"] == (2.0 if p < 2 else 7.0), (p, own)
    failed = slices[(3, "all-gather 8 B")]
    assert failed["ok"] is False and failed["error"].startswith("DEADLINE_EXCEEDED"), failed
    assert slices[(0, "all-gather 8 B")]["busbw_gbps"] == 0.15


def test_a_consequence_is_folded_under_its_cause_alike_in_the_text_the_json_and_the_page() -> None:
    """No ROCm 7: the libraries and extension modules missing for that one reason follow from it (data: `follows`),
    and the text and the page both show the cause once, with one line for what follows."""
    from jax_rocm7_plugin import _findings as catalog
    from jax_rocm7_plugin._doctor.render import render_html, render_text
    from jax_rocm7_plugin._doctor.report import LibraryEntry, Report

    found = [
        catalog.Finding("rocm-not-found", "error", "no ROCm 7", "install ROCm 7"),
        catalog.Finding("library-dependency-missing", "error", "libamdhip64.so.7 missing", "install ROCm 7"),
        *(
            catalog.Finding("extension-module-unavailable", "warning", f"_m{n} cannot load", f"fix {n}")
            for n in range(8)
        ),
    ]
    library = LibraryEntry("/x.so", "wheel", "0.10.2", (), (), (), None, tuple(f"lib{n}.so" for n in range(11)))
    report = Report(tuple(catalog.with_causes(found)), "/", (), library=library)
    assert [f.follows for f in report.findings] == [None, *["rocm-not-found"] * 9]
    data = report.to_json()
    assert [f.get("follows") for f in data["findings"]] == [None, *["rocm-not-found"] * 9]  # type: ignore[union-attr]
    text = render_text(report)
    line = "also missing for this reason: 11 libraries the PJRT library needs and 8 extension module(s) jax imports"
    assert line in text and "[error] rocm-not-found" in text and "extension-module-unavailable" not in text
    page = render_html(report)
    assert re.findall(r'<li class="finding \w+" data-id="([^"]+)"', page) == ["rocm-not-found"]
    assert "11 libraries the PJRT library needs and 8 extension module(s) jax imports" in page
