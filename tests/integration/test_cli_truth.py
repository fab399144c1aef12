"""What the CLI says is true and names what the user gave (issue 45): a --library that names nothing usable is a
usage error like a --sysroot (exit 2, the flag in the sentence), a library given with --library is blamed on
--library, a misspelt JAX_ROCM_* variable is named with the one it meant, a ROCm whose version file is missing is
named by the major its HIP runtime says, and distinct findings that share an id are not merged."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from jax_rocm7_plugin._doctor.rules import _merge_same_ids
from jax_rocm7_plugin._findings import Finding
from jax_rocm7_plugin._machine.rocm_install import RocmInstall, rocm_findings
from tests.support.docs import example_block
from tests.support.environment import REPO
from tests.support.snippets import clean_env
from tests.support.sysroots import make_sysroot


def run(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "jax_rocm7_plugin", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=clean_env(**env),
        timeout=120,
    )


@pytest.mark.parametrize("command", ["doctor", "report", "cluster"])
def test_a_library_path_that_names_nothing_is_a_usage_error_naming_the_flag(command: str, tmp_path: Path) -> None:
    missing = tmp_path / "nope.so"
    extra = ["--output", str(tmp_path / "r.tar.gz")] if command == "report" else []
    done = run(command, *extra, "--library", str(missing))
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert f"--library {missing}: does not exist" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "r.tar.gz").exists()


def test_a_library_given_with_the_flag_is_blamed_on_the_flag(tmp_path: Path) -> None:
    not_a_library = tmp_path / "notes.so"
    not_a_library.write_text("not an ELF file\n")
    done = run(
        "doctor", "--json", "--sysroot", str(make_sysroot(tmp_path / "machine")), "--library", str(not_a_library)
    )
    found = {f["id"]: f for f in json.loads(done.stdout)["findings"]}
    invalid = found["pjrt-library-invalid"]
    assert "--library" in invalid["fix"] and "JAX_ROCM_PJRT_LIBRARY" not in invalid["fix"] + invalid["summary"]
    assert "library chosen from --library" in invalid["evidence"]


def test_a_misspelt_plugin_variable_is_named_with_the_one_it_meant(tmp_path: Path) -> None:
    done = run("doctor", "--json", "--sysroot", str(tmp_path), JAX_ROCM_WARMM="0", JAX_ROCM_HANG_ACTION="kill")
    invalid = [f for f in json.loads(done.stdout)["findings"] if f["id"] == "environment-variable-invalid"]
    said = {f["summary"].split("=", 1)[0]: f for f in invalid}
    assert "did you mean JAX_ROCM_WARM?" in said["JAX_ROCM_WARMM"]["summary"]
    assert said["JAX_ROCM_WARMM"]["fix"] == "spell it JAX_ROCM_WARM"
    assert "report, exit" in said["JAX_ROCM_HANG_ACTION"]["fix"]


def test_a_rocm_without_a_version_file_is_named_by_its_runtime_major(tmp_path: Path) -> None:
    debian = RocmInstall("/usr/lib/x86_64-linux-gnu", "loader path", None, (Path("/x/libamdhip64.so.5"),))
    (finding,) = rocm_findings([debian], None)
    assert "ROCm 5 at /usr/lib/x86_64-linux-gnu" in finding.summary and "?" not in finding.summary
    unknown = RocmInstall("/opt/odd", "ROCM_PATH", None, ())
    (finding,) = rocm_findings([unknown], None)
    assert "ROCm of unknown version at /opt/odd" in finding.summary


def test_findings_that_share_an_id_but_say_different_things_stay_apart() -> None:
    eight = Finding("extension-module-unavailable", "warning", "8 in this wheel, 0 would load", "fix", ("a",))
    one = Finding("extension-module-unavailable", "warning", "1 extension module(s) cannot load", "fix", ("b",))
    again = eight._replace(evidence=("a", "c"))
    merged = _merge_same_ids([eight, one, again])
    assert [f.summary for f in merged] == [eight.summary, one.summary]
    assert merged[0].evidence == ("a", "c")  # the same finding found twice: said once, its evidence joined


def test_a_report_command_without_the_separator_is_told_to_put_it_after_it(tmp_path: Path) -> None:
    done = run("report", "--output", str(tmp_path / "r.tar.gz"), "python3", "job.py")
    assert done.returncode == 2 and "put it after --: report [options] -- python3 job.py" in done.stderr
    assert list(tmp_path.iterdir()) == []


def test_a_bundle_named_as_another_format_is_refused_before_anything_runs(tmp_path: Path) -> None:
    done = run("report", "--output", str(tmp_path / "r.zip"), "--", sys.executable, "-c", "open('ran', 'w')")
    assert done.returncode == 2 and "r.zip: the bundle is a gzip-compressed tar; name it FILE.tar.gz" in done.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command", ["doctor", "report", "cluster"])
def test_help_names_the_placeholders_the_readme_does(command: str) -> None:
    shown = run(command, "--help").stdout
    readme = (REPO / "README.md").read_text()
    assert "--sysroot DIR" in shown and "--library PATH" in shown and "--sysroot SYSROOT" not in shown
    assert "`doctor --sysroot DIR`" in readme and "`doctor --library PATH`" in readme
    if command == "doctor":  # the README's words for --deep, in its table
        assert "also start the HIP runtime and run a first jit, each in a child" in " ".join(shown.split())
        assert "| `doctor --deep` | also start the HIP runtime and run a first jit, each in a child |" in readme


def test_a_reader_that_went_away_is_no_traceback(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "jax_rocm7_plugin", "doctor", "--verbose", "--sysroot", str(tmp_path)]
    child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO, env=clean_env())
    assert child.stdout is not None and child.stderr is not None
    child.stdout.close()  # `doctor | head -0`: nobody reads what it prints
    stderr = child.stderr.read().decode()
    assert child.wait(timeout=120) == 141 and "Traceback" not in stderr, stderr  # as if killed by SIGPIPE


def test_a_full_disk_is_one_sentence(tmp_path: Path) -> None:
    with open("/dev/full", "w") as full:
        done = subprocess.run(
            [sys.executable, "-m", "jax_rocm7_plugin", "doctor", "--json", "--sysroot", str(tmp_path)],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            cwd=REPO,
            env=clean_env(),
            timeout=120,
        )
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.strip() == "python -m jax_rocm7_plugin: cannot write the output: No space left on device"


def test_the_pip_route_names_amds_index_of_the_gpus_family(tmp_path: Path, build: Path) -> None:
    """PyPI has no ROCm 7: wherever a fix offers ROCm from pip, it gives AMD's index, for the family of the GPUs in
    use (gfx942 here: gfx94X-dcgpu), as _policy/rocm_families.json states it."""
    from jax_rocm7_plugin._findings import PIP_FAMILY, PIP_ROCM_INDEX
    from jax_rocm7_plugin._policy import rocm_families
    from tests.support.sysroots import library_of

    data = rocm_families._data()["per_family_index"]["command"]
    assert PIP_ROCM_INDEX.replace(PIP_FAMILY, "{family}") in data
    machine = make_sysroot(tmp_path / "machine")  # gfx942 GPUs, no ROCm: the library's HIP runtime is missing
    done = run("doctor", "--json", "--sysroot", str(machine), "--library", str(library_of(build)))
    fixes = [f["fix"] for f in json.loads(done.stdout)["findings"] if "with-rocm" in f["fix"]]
    assert fixes, done.stdout
    assert all("--extra-index-url https://repo.amd.com/rocm/whl/gfx94X-dcgpu/" in fix for fix in fixes), fixes
    assert rocm_families.pip_family(["gfx942", "gfx90a"]) is None  # two families: the placeholder stays


def test_the_readmes_families_are_the_datas() -> None:
    from jax_rocm7_plugin._policy import rocm_families

    readme = (REPO / "README.md").read_text()
    rows = [line for line in readme.splitlines() if line.startswith("| `gfx") and "GPUs" not in line]
    named = {name for row in rows for name in re.findall(r"`(gfx[^`]+)`", row)}
    known = {f["name"] for f in rocm_families._data()["families"]}
    assert len(named) >= 10 and named <= known, named - known


@pytest.mark.parametrize(
    ("arguments", "summary", "fix"),
    [
        (["--num-processes", "2", "--process-id", "5"], "--process-id 5 is not within 0..1", "number the processes"),
        (["--process-id", "x"], "argument --process-id: 'x' is not a non-negative integer", "cluster --help"),
        (["--library", "/nonexistent/lib.so"], "--library /nonexistent/lib.so: does not exist", "give --library"),
        (["--coordinator-address", "node-0"], "'node-0' is not HOST:PORT", "--coordinator-address node-0:1234"),
        (["--trace", "steps.json"], "--trace needs --deep", "add --deep, or leave --trace out"),
        (["--html", "/"], "--html /: is a directory; give a file name", "give --html a new file"),
    ],
    ids=["process id out of range", "not a number", "no such library", "no port", "trace without deep", "html dir"],
)
def test_cluster_usage_errors_are_decided_by_the_arguments_and_answered_in_json(
    tmp_path: Path, arguments: list[str], summary: str, fix: str
) -> None:
    # A jax that cannot be imported: the arguments alone decide these, before any courier starts jax.
    (tmp_path / "jax").mkdir()
    (tmp_path / "jax" / "__init__.py").write_text("raise RuntimeError('jax was imported')\n")
    done = run("cluster", "--json", *arguments, PYTHONPATH=f"{tmp_path}:{REPO}")
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    report = json.loads(done.stdout)
    (finding,) = report["findings"]
    assert report["verdict"] == "usage-error" and finding["id"] == "cluster-usage-invalid"
    assert summary in finding["summary"] and fix in finding["fix"], finding
    text = run("cluster", *arguments, PYTHONPATH=f"{tmp_path}:{REPO}")  # without --json: one sentence, its fix
    assert (
        text.returncode == 2
        and text.stdout == ""
        and summary in text.stderr
        and f"fix: {finding['fix']}" in text.stderr
    )


def test_build_help_never_breaks_a_gpu_target_across_lines() -> None:
    from jax_rocm7_build.bazel import DEFAULT_AMDGPU_TARGETS

    shown = subprocess.run(
        [sys.executable, str(REPO / "build" / "build.py"), "wheels", "--help"], capture_output=True, text=True
    ).stdout
    words = {word.strip(",()") for word in shown.split()}
    assert set(DEFAULT_AMDGPU_TARGETS) <= words, set(DEFAULT_AMDGPU_TARGETS) - words


def readme_command_rows() -> list[tuple[str, list[str]]]:
    """The README's command table: (command, the flags its first column names), for our CLI's rows."""
    rows = []
    for line in (REPO / "README.md").read_text().splitlines():
        match = re.match(r"\| `(?:python -m jax_rocm7_plugin )?(doctor|report|cluster)\b([^|]*)` (?:\(.*?\) )?\|", line)
        if match:
            rows.append((match.group(1), re.findall(r"--[a-z][a-z-]*", line.split("|")[1])))
    return rows


def test_every_flag_of_the_readmes_table_exists_in_its_command() -> None:
    rows = readme_command_rows()
    assert len(rows) >= 12 and {c for c, _ in rows} == {"doctor", "report", "cluster"}
    helps = {command: run(command, "--help").stdout for command in ("doctor", "report", "cluster")}
    missing = [(command, flag) for command, flags in rows for flag in flags if flag not in helps[command]]
    assert missing == []


@pytest.mark.parametrize("command", ["doctor", "report", "cluster"])
def test_bad_input_to_any_command_is_one_sentence_with_its_fix_and_exit_2(command: str, tmp_path: Path) -> None:
    for bad in (["--no-such-flag"], ["--sysroot"], ["--library", str(tmp_path / "none.so")]):
        done = run(command, *bad)
        errors = [line for line in done.stderr.splitlines() if "error:" in line]
        assert done.returncode == 2 and "Traceback" not in done.stderr, (bad, done.stderr)
        assert len(errors) == 1 and "  fix: " in done.stderr, (bad, done.stderr)
        assert list(tmp_path.iterdir()) == []  # nothing written, nothing lost


def readme_example(first_line_starts: str) -> list[str]:
    """The README's example block whose first line starts with `first_line_starts` (indented code), unindented."""
    return example_block(REPO / "README.md", first_line_starts)


def test_the_readmes_example_of_a_machine_without_the_driver_is_what_jax_prints(tmp_path: Path) -> None:
    _, *said, devices = readme_example('$ python -c "import jax; print(jax.devices())"')
    done = subprocess.run(
        [sys.executable, "-c", "import jax; print(jax.devices())"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=clean_env(JAX_ROCM_SYSROOT=str(tmp_path), PYTHONPATH=str(REPO)),
        timeout=120,
    )
    warning = [line for line in done.stderr.splitlines() if "ROCm backend" in line]
    assert warning == [" ".join(said)]  # the README wraps the one line
    assert done.stdout.strip() == devices


def test_the_readmes_report_example_is_what_report_prints(tmp_path: Path) -> None:
    """The same lines, figures aside (file count, seconds, size, the bundle's name)."""
    _, *shown = readme_example("$ python -m jax_rocm7_plugin report -- ")
    argv = ["report", "--", sys.executable, "-c", "print(1)"]
    done = subprocess.run(
        [sys.executable, "-m", "jax_rocm7_plugin", *argv],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=clean_env(JAX_ROCM_SYSROOT=str(tmp_path), PYTHONPATH=str(REPO)),
        timeout=240,
    )
    assert done.returncode == 0, done.stderr

    def shape(line: str) -> str:
        line = line.replace(sys.executable, "python3").replace(str(tmp_path), "/tmp/rep")
        line = re.sub(r"jax-rocm-report-\S+-\d{8}T\d{6}Z", "jax-rocm-report-HOST-TIME", line)
        return re.sub(r"\d+(\.\d+)?", "N", line)

    printed = [line for line in (done.stderr + done.stdout).splitlines() if line]
    # stderr's lines, the command's own output in between, then the bundle's path on stdout
    assert [shape(line) for line in shown if line != "1"] == [shape(line) for line in printed if line != "1"]
    assert "1" in done.stdout.splitlines()
