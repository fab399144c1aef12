"""Where a read value goes (build/jax_rocm7_build/value_flows.py): source lines written here in the shapes the
readers use (test inputs, not the readers' code), followed to the call that needs the value to name something."""

from __future__ import annotations

import json
from pathlib import Path

from jax_rocm7_build.value_flows import flows

SOURCES = json.loads((Path(__file__).resolve().parents[2] / "build" / "stack_sources.json").read_text())
SINKS, KEEPS = SOURCES["sinks"], frozenset(SOURCES["keeps"])


def reached(name: str, texts: dict[str, str], *, path: str = "a.c", flag: bool = False) -> list[tuple[str, str, str]]:
    line = next(i for i, text in enumerate(texts[path].split("\n"), 1) if name in text)
    return [(f.call, f.machine, f.shape) for f in flows(name, path, line, texts, SINKS, KEEPS, flag=flag)]


def test_a_local_handed_to_dlopen_names_a_library() -> None:
    text = 'void f() {\n  const char* lib = getenv("X_LIB");\n  if (!lib) return;\n  h = dlopen(lib, RTLD_NOW);\n}\n'
    assert reached("X_LIB", {"a.c": text}) == [("dlopen", "library", "whole")]


def test_the_read_itself_inside_the_call() -> None:
    assert reached("X_LIB", {"a.c": 'h = dlopen(getenv("X_LIB"), RTLD_NOW);\n'}) == [("dlopen", "library", "whole")]


def test_a_write_mode_makes_it_a_file_to_create_and_a_suffix_keeps_its_folder() -> None:
    text = (
        'void f() {\n  std::string name = getenv("X_LOG");\n  name = name + "_" + pid;\n'
        '  fopen(name.c_str(), "a");\n}\n'
    )
    assert reached("X_LOG", {"a.c": text}) == [("fopen", "file-created", "suffixed")]
    reading = 'void f() {\n  const char* p = getenv("X_IN");\n  FILE* f = fopen(p, "r");\n}\n'
    assert reached("X_IN", {"a.c": reading}) == [("fopen", "file", "whole")]


def test_a_local_given_another_value_stops_carrying_it() -> None:
    """flag.h's pattern: one `var` takes each variable in turn; only the last read reaches what follows."""
    text = (
        'void f() {\n  var = GetEnvVar("X_ONE");\n  one_ = (var == "1");\n  var = GetEnvVar("X_TWO");\n'
        "  dlopen(var.c_str(), 0);\n}\n"
    )
    assert reached("X_ONE", {"a.c": text}) == []
    assert reached("X_TWO", {"a.c": text}) == [("dlopen", "library", "whole")]


def test_an_assignment_in_a_sibling_block_does_not_end_it() -> None:
    text = (
        "void f() {\n  fs::path p;\n  const auto& custom = env::value(X_DIR);\n  if (!custom.empty()) {\n"
        "    p = ExpandUser(custom);\n  } else {\n    p = other;\n  }\n  fs::create_directories(p);\n}\n"
    )
    assert reached("X_DIR", {"a.c": text}, flag=True) == [("create_directories", "directory-created", "whole")]


def test_a_member_is_followed_through_its_getter_into_another_file() -> None:
    flag_h = (
        'void Refresh() {\n  var = GetEnvVar("X_PROFILE");\n  profile_ = var;\n}\n'
        "std::string profile() const { return profile_; }\n"
    )
    user = 'void Poll() {\n  FILE* f = fopen(flag().profile().c_str(), "a");\n}\n'
    assert reached("X_PROFILE", {"a.c": flag_h, "b.c": user}) == [("fopen", "file-created", "whole")]


def test_a_global_flag_and_a_split_list() -> None:
    flags = 'release(cstring, X_FILE, "", "where")\n'
    use = "void g() {\n  std::string fileName = X_FILE;\n  std::ofstream out(fileName);\n}\n"
    assert reached("X_FILE", {"a.c": flags, "b.c": use}, flag=True) == [("ofstream", "file-created", "whole")]
    listed = (
        'void h() {\n  std::string names = getenv("X_TOOLS");\n  auto each = split(names);\n'
        "  for (auto& n : each) { LoadLib(n); }\n}\n"
    )
    assert reached("X_TOOLS", {"a.c": listed}) == [("LoadLib", "library", "element")]


def test_python_reads_and_a_value_used_for_nothing() -> None:
    text = "def f():\n  hostname = os.getenv('X_HOST')\n  ip = socket.gethostbyname(hostname)\n"
    assert reached("X_HOST", {"a.py": text}, path="a.py") == [("gethostbyname", "host", "whole")]
    assert reached("X_NOTE", {"a.c": 'int f() {\n  const char* v = getenv("X_NOTE");\n  log("%s", v);\n}\n'}) == []


def rules(name: str, text: str) -> list[tuple[str, str | None]]:
    line = next(i for i, row in enumerate(text.split("\n"), 1) if name in row)
    return [(f.call, f.rule) for f in flows(name, "a.c", line, {"a.c": text}, SINKS, KEEPS, flag=False)]


def test_a_parsing_call_gives_the_rule_it_reads_the_value_by() -> None:
    zero = 'void f() {\n  flag = getenv("X_FLAG");\n  on = (flag && strcmp(flag, "0"));\n}\n'
    assert rules("X_FLAG", zero) == [("strcmp", "flow-only-0")]
    one = 'void f() {\n  char* env = getenv("X_ONE");\n  if (env == NULL || strcmp(env, "1") != 0) warn();\n}\n'
    assert rules("X_ONE", one) == [("strcmp", "flow-only-1")]
    decimal = 'void f() {\n  var = GetEnvVar("X_SIZE");\n  size = strtoul(var.c_str(), &end, 10);\n}\n'
    assert rules("X_SIZE", decimal) == [("strtoul", "flow-strtol-10")]
    any_base = 'void f() {\n  const char* d = std::getenv("X_DB");\n  if(d) m = strtol(d, nullptr, 0);\n}\n'
    assert rules("X_DB", any_base) == [("strtol", "flow-strtol")]
    counted = 'void f() {\n  s = getenv("X_PAGES");\n  if (!s || sscanf(s, "%u", &n) != 1) n = 1;\n}\n'
    assert rules("X_PAGES", counted) == [("sscanf", "flow-sscanf")]
    assert rules("X_LEVEL", 'int f() {\n  const char* v = getenv("X_LEVEL");\n  return v ? atoi(v) : 1;\n}\n') == [
        ("atoi", "flow-atoi")
    ]


def test_a_value_also_compared_with_words_is_not_typed_by_its_parse() -> None:
    """ROCr's thread priority: MAX and HIGH are words it takes before strtol reads a number."""
    text = (
        'void f() {\n  var = GetEnvVar("X_PRIORITY");\n  if (var == "MAX") p = 99;\n'
        '  else if (var != "") p = strtol(var.c_str(), &end, 10);\n}\n'
    )
    assert rules("X_PRIORITY", text) == []


def test_a_helper_handed_the_name_and_a_braceless_fallback() -> None:
    """rocBLAS's open_log_stream("NAME"): the helper reads its parameter's variable, falls back to another where it
    is unset (an `if` without braces, which ends nothing), and opens the file the value names."""
    helper = (
        "static auto open_log_stream(const char* variable)\n{\n    const char* logfile;\n"
        '    logfile = read_env(variable);\n    if(!logfile)\n        logfile = read_env("X_LOG_ALL");\n'
        "    return logfile ? std::make_unique<log_ostream>(logfile) : nullptr;\n}\n"
    )
    caller = 'void init() {\n    trace_os = open_log_stream("X_LOG_TRACE");\n}\n'
    sinks = {**SINKS, "log_ostream": {"machine": "file-created", "effect": "{reader} opens it"}}
    line = 2
    found = flows("X_LOG_TRACE", "b.c", line, {"a.c": helper, "b.c": caller}, sinks, KEEPS, flag=False)
    assert [(f.call, f.machine, f.shape, f.path) for f in found] == [("log_ostream", "file-created", "whole", "a.c")]


def test_a_streams_open_method_is_not_posix_open() -> None:
    """`log_ofs->open(value)` creates its file (an output stream), where POSIX open(value) without O_CREAT needs it."""
    text = 'void f() {\n  const char* v = getenv("X_OUT");\n  log_ofs->open(v);\n  out.open(v);\n}\n'
    assert reached("X_OUT", {"a.c": text}) == []
