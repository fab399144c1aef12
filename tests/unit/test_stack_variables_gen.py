"""The generator of the stack's variable table (build/jax_rocm7_build/stack_variables_gen.py, main_variables.py): each
mechanism on source lines written here in the shape its reader uses (test inputs, not the readers' code), the git
plumbing on a repository made here, and the committed table against its sources."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from jax_rocm7_build import main_variables
from jax_rocm7_build.stack_variables_gen import MECHANISMS, Read

from jax_rocm7_plugin._policy import stack_variables

REPO = Path(__file__).resolve().parents[2]


def reads(mechanism: str, text: str) -> list[tuple[str, str]]:
    return [(r.name, r.rule) for r in MECHANISMS[mechanism](text)]


def test_the_cited_line_is_the_line_of_the_read_below_a_comment_block() -> None:
    """Comments are blanked before matching; the line a read cites is still the line it is on in the file (a blanked
    comment kept no characters, so every read below a licence header cited a line inside it)."""
    header = "/*\n * Licence text, line two,\n * and line three.\n */\n// a comment\n"
    cases = {
        "c-getenv": 'auto s = getenv("X_ONE");\n',
        "rocr-getenv": 'auto s = os::GetEnvVar("X_ONE");\n',
        "nccl-getenv": 'const char* s = ncclGetEnv("X_ONE");\n',
        "nccl-param": 'NCCL_PARAM(One, "ONE", 0);\n',
        "rocblas-read-env": 'auto s = read_env("X_ONE");\n',
        "miopen-env": "MIOPEN_DECLARE_ENV_VAR_STR(X_ONE)\n",
        "rocprofiler-sdk-env": 'auto s = get_env("X_ONE", 0);\n',
    }
    for mechanism, line in cases.items():
        text = header + "int unrelated;\n" + line
        [read] = list(MECHANISMS[mechanism](text))
        assert text.split("\n")[read.line - 1] == line.rstrip("\n"), mechanism


def test_rocr_flag_shapes_give_their_rules() -> None:
    text = """
    var = os::GetEnvVar("HSA_A");
    a_ = (var == "1") ? true : false;
    var = os::GetEnvVar("HSA_B");
    // a comment between the read and its parse
    b_ = (var == "0") ? false : true;
    var = os::GetEnvVar("HSA_C");
    c_ = (var == "0") ? OFF :
         ((var == "1") ? ON : DEFAULT);
    var = os::GetEnvVar("HSA_D");
    d_ = var.empty() ? 5 : atoi(var.c_str());
    var = os::GetEnvVar("HSA_E");
    e_ = var;
    bool f = os::IsEnvVarSet("HSA_F");
    """
    assert reads("rocr-flag", text) == [
        ("HSA_A", "only-1"),
        ("HSA_B", "only-0"),
        ("HSA_C", "tri-01"),
        ("HSA_D", "rocr-atoi"),
        ("HSA_E", "read"),
        ("HSA_F", "read"),
    ]


def test_clr_flags_by_kind_and_type() -> None:
    text = """
release(bool, HIP_X, true, "help")
release(uint, GPU_Y, 4 * Ki, "help")
release(cstring, HIP_Z, "", "help")
debug(bool, CPU_W, false, "help")
"""
    found = list(MECHANISMS["clr-flag"](text))
    assert [(r.name, r.rule, r.default) for r in found] == [
        ("HIP_X", "clr-bool", "true"),
        ("GPU_Y", "clr-int", "4 * Ki"),
        ("HIP_Z", "read", '""'),
        ("CPU_W", "clr-debug", "false"),
    ]


def test_rccl_params_are_prefixed_and_keep_parenthesised_defaults() -> None:
    text = 'NCCL_PARAM(Chunk, "CHUNK_SIZE", (1 << 17));\nRCCL_PARAM(Sig, "SIGNALS", 0)\n// NCCL_PARAM(Old, "OLD", 1);\n'
    assert [(r.name, r.default) for r in MECHANISMS["nccl-param"](text)] == [
        ("NCCL_CHUNK_SIZE", "(1 << 17)"),
        ("RCCL_SIGNALS", "0"),
    ]


def test_the_ofi_plugins_params_by_type_with_their_defaults_and_lists() -> None:
    fork = (
        'OFI_NCCL_PARAM_INT(use_ipv6_tcp, "USE_IPV6_TCP", 0);\n'
        'OFI_NCCL_PARAM_STR(exclude_tcp_if, "EXCLUDE_TCP_IF", "lo");\n'
    )
    assert [(r.name, r.rule, r.default) for r in MECHANISMS["ofi-rccl-param"](fork)] == [
        ("OFI_NCCL_USE_IPV6_TCP", "ofi-rccl-int", "0"),
        ("OFI_NCCL_EXCLUDE_TCP_IF", "read", '"lo"'),
    ]
    upstream = (
        "OFI_NCCL_PARAM_VALUE_SET(PROTOCOL, (SENDRECV)(RDMA))\n"
        'OFI_NCCL_PARAM(PROTOCOL, protocol, "PROTOCOL", PROTOCOL::SENDRECV)\n'
        'OFI_NCCL_PARAM(bool, cache_off, "MR_CACHE_DISABLE",\n#if HAVE_NEURON\n  true\n#else\n  false\n#endif\n  );\n'
        'OFI_NCCL_PARAM(unsigned long int, key, "MR_KEY_SIZE", 2);\n'
        'OFI_NCCL_PARAM_DEPRECATED(bool, per_comm, "ENDPOINT_PER_COMM", false, "removed, see (docs)");\n'
        'OFI_NCCL_PARAM(std::string, platform, "PLATFORM", "");\n'
    )
    assert [(r.name, r.rule, r.default, r.values) for r in MECHANISMS["ofi-nccl-param"](upstream)] == [
        ("OFI_NCCL_PROTOCOL", "ofi-enum", "PROTOCOL::SENDRECV", ("SENDRECV", "RDMA")),
        ("OFI_NCCL_MR_CACHE_DISABLE", "ofi-bool", "false", ()),  # the #else branch: the build without Neuron
        ("OFI_NCCL_MR_KEY_SIZE", "ofi-int", "2", ()),
        ("OFI_NCCL_ENDPOINT_PER_COMM", "ofi-bool", "false", ()),
        ("OFI_NCCL_PLATFORM", "read", '""', ()),
    ]


def test_rocprofiler_types_from_the_template_or_the_default() -> None:
    text = (
        'auto a = common::get_env("ROCPROF_A", false);\n'
        'auto b = get_env<uint64_t>("ROCPROF_B", 0x10);\n'
        'auto c = common::get_env("ROCPROF_C", std::string{});\n'
        'auto d = tool::get_env("ROCPROF_D", member_);\n'
    )
    assert reads("rocprofiler-sdk-env", text) == [
        ("ROCPROF_A", "rocprof-bool"),
        ("ROCPROF_B", "rocprof-int"),
        ("ROCPROF_C", "read"),
        ("ROCPROF_D", "read"),
    ]


def test_miopen_declarations_and_c_reads() -> None:
    assert reads("miopen-env", "MIOPEN_DECLARE_ENV_VAR_BOOL(MIOPEN_A)\nMIOPEN_DECLARE_ENV_VAR_UINT64(MIOPEN_B, 1)\n"
                 "MIOPEN_DECLARE_ENV_VAR_STR(MIOPEN_C)\n#define MIOPEN_DECLARE_ENV_VAR_BOOL(x) y\n") == [
        ("MIOPEN_A", "miopen-bool"),
        ("MIOPEN_B", "miopen-uint"),
        ("MIOPEN_C", "read"),
    ]  # fmt: skip
    text = 'auto s = std::getenv("X_ONE");\nif (getenv("X_TWO")) {}\nobj.getenv("NOT_A_READ");\n'
    assert reads("c-getenv", text) == [("X_ONE", "read"), ("X_TWO", "read")]
    named = 'static constexpr char varname[] = "LIB_VERBOSE";\nstatic const char* v = getenv(varname);\n'
    assert reads("named-constant", named) == [("LIB_VERBOSE", "read")]


def test_jax_states_take_the_name_in_capitals_and_the_enum_values() -> None:
    text = """
flag_a = bool_state(
    name='jax_flag_a',
    default=False,
)
flag_b = enum_state('jax_flag_b', enum_values=['one', 'two'], default='one')
flag_c = optional_bool_state(name='jax_flag_c', default=None)
flag_d = int_state(name='jax_flag_d', default=3)
level = config.int_env("JAX_LEVEL", 10)
def bool_state(name, default): ...
"""
    found = list(MECHANISMS["jax-state"](text)) + list(MECHANISMS["jax-env-helper"](text))
    assert [(r.name, r.rule, r.values) for r in found] == [
        ("JAX_FLAG_A", "jax-bool", ()),
        ("JAX_FLAG_B", "jax-enum", ("one", "two")),
        ("JAX_FLAG_D", "jax-int", ()),
        ("JAX_LEVEL", "jax-int", ()),
    ]  # optional_bool_state with default None reads no variable; a `def` is no read
    launcher = "import os\n_PROCESS_ID = 'SLURM_PROCID'\n_OTHER = 'NOT_READ'\nx = int(os.environ[_PROCESS_ID])\n"
    assert reads("python-constant", launcher) == [("SLURM_PROCID", "read")]


def _git(folder: Path, *arguments: str) -> str:
    return subprocess.run(["git", "-C", str(folder), *arguments], check=True, capture_output=True, text=True).stdout


def test_the_generator_reads_a_repository_at_its_pinned_commit(tmp_path: Path) -> None:
    work = tmp_path / "work"
    (work / "src" / "tests").mkdir(parents=True)
    (work / "src" / "a.cc").write_text(
        'NCCL_PARAM(A, "ALPHA", 0);\nconst char* s = getenv("NCCL_BETA");\nvoid* h = dlopen(s, RTLD_NOW);\n'
    )
    (work / "src" / "tests" / "t.cc").write_text('NCCL_PARAM(T, "IN_A_TEST", 0);\n')
    _git(work, "init", "-q")
    _git(work, "-c", "user.email=t@t", "-c", "user.name=t", "add", ".")
    _git(work, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "one")
    pinned = _git(work, "rev-parse", "HEAD").strip()
    (work / "src" / "a.cc").write_text('NCCL_PARAM(A, "LATER", 0);\n')
    _git(work, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qam", "two")
    snapshots = tmp_path / "snapshots"
    subprocess.run(["git", "clone", "-q", "--bare", str(work), str(snapshots / "me+rccl" / "repo")], check=True)
    sources = {
        "exclude": "(^|/)tests?(/|$)",
        "readers": [{"reader": "RCCL", "repo": "me/rccl", "commit": pinned, "paths": ["src/*.cc"],
                     "mechanisms": ["nccl-param", "c-getenv"]}],
        "rules": {"nccl-int": {"kind": "c-integer", "malformed": "m", "malformed_severity": "warning",
                               "where": ["me/rccl", pinned, "src/a.cc"]},
                  "read": {"kind": "read", "malformed": "", "malformed_severity": "info", "where": None}},
        "keeps": [],
        "sinks": {"dlopen": {"machine": "library", "effect": "{reader} loads it"}},
    }  # fmt: skip
    table = main_variables.generate(sources, snapshots)
    assert [(v["name"], v["rule"], v["source"]) for v in table["variables"]] == [
        ("NCCL_ALPHA", "nccl-int", f"https://github.com/me/rccl/blob/{pinned}/src/a.cc#L1"),
        ("NCCL_BETA", "read", f"https://github.com/me/rccl/blob/{pinned}/src/a.cc#L2"),
    ]  # the pinned commit, not the later one; nothing from tests/
    assert table["variables"][1]["flow"] == {
        "call": "dlopen",
        "machine": "library",
        "shape": "whole",
        "used_at": f"https://github.com/me/rccl/blob/{pinned}/src/a.cc#L3",
    }  # the read is typed by the call its value reaches
    assert table["rules"]["nccl-int"]["source"] == f"https://github.com/me/rccl/blob/{pinned}/src/a.cc"
    from jax_rocm7_build.progress import BuildError

    with pytest.raises(BuildError, match=r"commit 0{40} is not in"):
        main_variables.generate({**sources, "readers": [{**sources["readers"][0], "commit": "0" * 40}]}, snapshots)
    with pytest.raises(BuildError, match="no snapshot of me/other"):
        main_variables.generate({**sources, "readers": [{**sources["readers"][0], "repo": "me/other"}]}, snapshots)


def test_the_committed_table_is_whole_and_cites_the_pinned_commits() -> None:
    sources = json.loads(main_variables.SOURCES.read_text())
    table = json.loads(main_variables.OUTPUT.read_text())
    pins = {(r["repo"], r["commit"]) for r in sources["readers"]}
    assert {(r["repo"], r["commit"]) for r in table["readers"]} == pins
    names = {v["name"] for v in table["variables"]}
    judged = [v for v in table["variables"] if v["rule"] != "read"]
    assert len(names) >= 800 and len(judged) >= 500, (len(names), len(judged))
    for variable in table["variables"]:
        assert variable["rule"] in table["rules"], variable
        repo_commit = variable["source"].removeprefix("https://github.com/").split("/blob/")
        assert (repo_commit[0], repo_commit[1].split("/")[0]) in pins, variable
    readers = {v["reader"] for v in table["variables"]}
    assert {"ROCr", "HIP", "comgr", "rocprofiler-sdk", "rocprofiler-register", "RCCL", "rocBLAS", "hipBLASLt",
            "MIOpen", "jax", "jax (launchers)", "aws-ofi-rccl", "aws-ofi-nccl"} <= readers  # fmt: skip
    assert stack_variables.coverage()["judged"] >= 500  # the doctor loads every rule it names
    flows = [v for v in table["variables"] if "flow" in v and "machine" in v["flow"]]
    assert len(flows) >= 8 and all(v["rule"] == "read" and v["flow"]["call"] in table["sinks"] for v in flows)
    parsed = [v for v in table["variables"] if "flow" in v and "machine" not in v["flow"]]
    assert len(parsed) >= 40 and all(v["rule"].startswith("flow-") for v in parsed)  # typed by a parsing call
    assert stack_variables.coverage()["judged_by_call"] >= 6  # whole values (and suffixed files) are judged
    # Where the tracker reaches a variable the curated table types by hand, it derives the same kind.
    curated = {v.name: v.machine for v in stack_variables.curated() if v.machine}
    derived = {v["name"]: v["flow"]["machine"] for v in flows if v["name"] in curated}
    assert derived == {"NCCL_SOCKET_IFNAME": "interfaces"} and all(curated[n] == m for n, m in derived.items())


def test_the_committed_table_is_what_the_sources_give(request: pytest.FixtureRequest) -> None:
    """With `--snapshots DIR` (build/README.md): the pinned sources give the committed table, byte for byte. Where a
    store is given it must hold every pinned commit: a store that lacks one fails, it does not skip."""
    snapshots: Path | None = request.config.getoption("--snapshots")
    if snapshots is None:
        pytest.skip("no --snapshots DIR given (the table's shape and pins are checked above)")
    if not snapshots.is_dir():
        pytest.fail(f"--snapshots {snapshots}: no such folder")
    sources = json.loads(main_variables.SOURCES.read_text())
    table = main_variables.generate(sources, snapshots)
    assert json.dumps(table, indent=1) + "\n" == main_variables.OUTPUT.read_text()


def test_xla_flag_names_from_their_registrations() -> None:
    from jax_rocm7_build.stack_variables_gen import xla_flag_names

    text = (
        'flag_list->push_back(tsl::Flag(\n    "xla_one", setter, 1, "help"));\n'
        '// tsl::Flag("xla_gone", x)\ntsl::Flag("xla_two", y);\n'
    )
    assert xla_flag_names(text) == ["xla_one", "xla_two"]
    table = json.loads(main_variables.OUTPUT.read_text())
    assert {"0.10.2", "0.11.0", "0.11.1"} <= set(table["xla_flags"])
    assert all(len(v["names"]) >= 300 for v in table["xla_flags"].values())


def test_read_records_are_plain() -> None:
    assert Read("A", "read", 1)._asdict() == {"name": "A", "rule": "read", "line": 1, "default": None, "values": ()}


def test_the_package_map_takes_a_library_to_its_projects_runtime_package() -> None:
    from jax_rocm7_build import main_packages

    def package(name: str, per_gpu: str, project: str) -> dict[str, object]:
        return {"Package": name, "Gfxarch": per_gpu, "Artifactory": [{"Artifact_Subdir": [{"Name": project}]}]}

    listing = [
        package("amdrocm-blas-devel", "True", "rocBLAS"),
        package("amdrocm-blas", "True", "rocBLAS"),
        package("amdrocm-runtime", "False", "clr"),
    ]
    sources = {
        "therock": {"repo": "ROCm/TheRock", "commit": "c" * 40, "path": "p.json", "naming": "n.py"},
        "aliases": {"amdhip64": ["clr", "https://example.invalid/clr"]},
    }
    table = main_packages.generate(listing, ["rocblas", "MIOpen", "rocprofiler*"], sources)
    assert {k: (v["package"], v["per_gpu"]) for k, v in table["libraries"].items()} == {
        "rocblas": ("amdrocm-blas", True),  # the runtime package, not -devel
        "amdhip64": ("amdrocm-runtime", False),  # by its project's name
    }  # MIOpen: no package holds it here; a glob stem is no library name


def test_the_committed_package_map_names_the_runtime_and_the_math_libraries() -> None:
    from jax_rocm7_plugin._policy.rocm_packages import native_package

    assert native_package("libamdhip64.so.7", "7.15", ["gfx942"]) == ["amdrocm-runtime7.15"]
    assert native_package("librocblas.so.5", "7.15", ["gfx942", "gfx942", "gfx950"]) == [
        "amdrocm-blas7.15-gfx942",
        "amdrocm-blas7.15-gfx950",
    ]
    assert native_package("libMIOpen.so.1", "", []) == ["amdrocm-dnn"]
    assert native_package("libnothing.so.1", "", []) is None


def test_a_default_is_the_one_of_the_rocm_release_where_the_table_read_it() -> None:
    """RCCL's defaults at its ROCm 6.x tags (build/stack_sources.json "releases"), kept where they differ from the
    pinned commit's: NCCL_IB_GID_INDEX was GID 0 before RCCL searched one itself (-1)."""
    assert stack_variables.default_of("NCCL_IB_GID_INDEX", "RCCL", "6.2.4") == "0"
    assert stack_variables.default_of("NCCL_IB_GID_INDEX", "RCCL", "7.0.2") == "-1"  # no stored 7.x: the pinned one
    assert stack_variables.default_of("NCCL_IB_GID_INDEX", "RCCL") == "-1"
    assert stack_variables.default_of("NCCL_DMABUF_ENABLE", "RCCL", "6.0.0") == "0"  # the same in every release
    assert stack_variables.default_of("NO_SUCH_VARIABLE", "RCCL") is None
