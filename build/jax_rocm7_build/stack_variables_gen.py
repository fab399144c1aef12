"""Every environment variable the stack under jax reads, found in its readers' sources at pinned commits.

The readers, their commits, where their reads are and what each parser does with an empty or malformed value are
data (build/stack_sources.json). Here are the mechanisms: one function per way a reader reads its environment,
each a pure function from a source file's text to the reads it finds (name, rule, default, line). `build.py
variables` (main_variables.py) runs them over git snapshots and writes the doctor's table,
jax_rocm7_plugin/_policy/stack_variables_generated.json.

A read whose parser's effect is known from the source (a rule other than "read") is judged by the doctor; the rest
are recorded as read but not judged. Build-only: nothing here ships in a wheel.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import NamedTuple


class Read(NamedTuple):
    name: str
    rule: str  # a key of stack_sources.json's "rules"
    line: int  # 1-based, in the file it was found in
    default: str | None = None
    values: tuple[str, ...] = ()  # an enumeration's values, where the source lists them


NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_C_GETENV = re.compile(r"(?<![\w:.])(?:std::|::)?(?:secure_)?getenv\(\s*\"(" + NAME + r")\"\s*\)")


def _line(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def _code_lines(text: str) -> str:
    """The text with // comments and #define lines blanked: a macro's own definition or a commented-out read is no read.
    A blanked line keeps its length, so an offset in this text is the same offset in `text` (the cited line)."""
    kept = []
    for line in text.split("\n"):
        stripped = line.lstrip()
        if stripped.startswith(("//", "#define", "*", "/*")):
            kept.append(" " * len(line))
        else:
            kept.append(line)
    return "\n".join(kept)


# --- ROCr ----------------------------------------------------------------------------------------------------------

_ROCR_ASSIGNED = re.compile(r"os::GetEnvVar\(\s*\"(" + NAME + r")\"\s*\);\s*(?://[^\n]*\n\s*)*\w+\s*=\s*([^;]*);", re.S)
_ROCR_ANY = re.compile(r"os::(?:GetEnvVar|IsEnvVarSet)\(\s*\"(" + NAME + r")\"\s*\)")


def _rocr_rule(expression: str) -> str:
    """The rule of one flag.h parse expression: what values the member takes from the variable's text."""
    compact = re.sub(r"\s+", "", expression)
    if re.fullmatch(r'\(var=="1"\)\?true:false', compact):
        return "only-1"
    if re.fullmatch(r'\(var=="0"\)\?false:true', compact):
        return "only-0"
    if re.fullmatch(r'\(var=="0"\)\?\w+:\(\(var=="1"\)\?\w+:\w+\)', compact):
        return "tri-01"
    if "atoi(var.c_str())" in compact:
        return "rocr-atoi"
    return "read"


def rocr_flag(text: str) -> Iterator[Read]:
    """flag.h's Refresh(): each variable read into `var`, then parsed into a member by one expression."""
    judged = set()
    for match in _ROCR_ASSIGNED.finditer(text):
        name = match.group(1)
        judged.add(name)
        yield Read(name, _rocr_rule(match.group(2)), _line(text, match.start()))
    for match in _ROCR_ANY.finditer(text):
        if match.group(1) not in judged:
            judged.add(match.group(1))
            yield Read(match.group(1), "read", _line(text, match.start()))


def rocr_getenv(text: str) -> Iterator[Read]:
    for match in _ROCR_ANY.finditer(_code_lines(text)):
        yield Read(match.group(1), "read", _line(text, match.start()))


def c_getenv(text: str) -> Iterator[Read]:
    for match in _C_GETENV.finditer(_code_lines(text)):
        yield Read(match.group(1), "read", _line(text, match.start()))


# --- HIP (clr) -----------------------------------------------------------------------------------------------------

_CLR_FLAG = re.compile(
    r"^\s*(release|debug|release_on_stg)\(\s*(bool|int|uint|size_t|cstring)\s*,\s*(" + NAME + r")\s*,\s*"
    r"(\"(?:[^\"\\]|\\.)*\"|[^,]+?)\s*,",
    re.M,
)


def clr_flag(text: str) -> Iterator[Read]:
    """flags.hpp's table: release(type, NAME, default, help); debug(...) entries are constants in a release build."""
    for match in _CLR_FLAG.finditer(text):
        kind, type_, name, default = match.groups()
        if kind != "release":
            rule = "clr-debug"
        elif type_ == "bool":
            rule = "clr-bool"
        elif type_ in ("int", "uint", "size_t"):
            rule = "clr-int"
        else:
            rule = "read"
        yield Read(name, rule, _line(text, match.start()), default.strip())


# --- rocprofiler ---------------------------------------------------------------------------------------------------

_ROCPROF_GET_ENV = re.compile(
    r"\b(?:(?:rocprofiler::)?(?:common|tool)::)?get_env\s*(?:<\s*([\w:]+)\s*>)?\s*\(\s*\"(" + NAME + r")\"\s*,\s*"
    r"([^;\n]*)"
)


def _rocprof_reads(text: str, bool_rule: str) -> Iterator[Read]:
    for match in _ROCPROF_GET_ENV.finditer(_code_lines(text)):
        explicit, name, rest = match.groups()
        default = rest.rstrip(") ").strip()
        if explicit == "bool" or (explicit is None and re.fullmatch(r"(true|false)", default)):
            rule = bool_rule
        elif (explicit or "").lstrip(":").removeprefix("std::") in (
            "int",
            "int32_t",
            "int64_t",
            "uint32_t",
            "uint64_t",
            "size_t",
            "long",
        ) or (explicit is None and re.fullmatch(r"-?\d+", default)):
            rule = "rocprof-int"
        else:
            rule = "read"  # a string, or a default whose type is a member's declaration: not judged
        yield Read(name, rule, _line(text, match.start()), default or None)


def rocprofiler_sdk_env(text: str) -> Iterator[Read]:
    yield from _rocprof_reads(text, "rocprof-bool")


def rocprofiler_register_env(text: str) -> Iterator[Read]:
    yield from _rocprof_reads(text, "rocprof-register-bool")


# --- RCCL ----------------------------------------------------------------------------------------------------------

_NCCL_PARAM = re.compile(
    r"\b(NCCL|RCCL)_PARAM\(\s*\w+\s*,\s*\"([A-Za-z0-9_]+)\"\s*,\s*((?:[^;()\n]|\([^()\n]*\))+?)\s*\)"
)
_NCCL_GETENV = re.compile(r"\bncclGetEnv\(\s*\"(" + NAME + r")\"\s*\)")


def nccl_param(text: str) -> Iterator[Read]:
    """NCCL_PARAM(Function, "SUFFIX", default) reads NCCL_SUFFIX (RCCL_PARAM: RCCL_SUFFIX) as an int64."""
    for match in _NCCL_PARAM.finditer(_code_lines(text)):
        prefix, suffix, default = match.groups()
        yield Read(f"{prefix}_{suffix}", "nccl-int", _line(text, match.start()), default.strip())


def nccl_getenv(text: str) -> Iterator[Read]:
    for match in _NCCL_GETENV.finditer(_code_lines(text)):
        yield Read(match.group(1), "read", _line(text, match.start()))


# --- RCCL's libfabric net plugins (aws-ofi-rccl, aws-ofi-nccl) ----------------------------------------------------

_OFI_RCCL_PARAM = re.compile(r"\bOFI_NCCL_PARAM_(INT|STR)\(\s*\w+\s*,\s*\"(\w+)\"\s*,\s*([^;]+?)\)\s*;")
_OFI_NCCL_PARAM = re.compile(
    r"\bOFI_NCCL_PARAM(?:_DEPRECATED)?\(\s*([\w:\s]+?)\s*,\s*\w+\s*,\s*\"(\w+)\"\s*,\s*((?:[^;()]|\([^()]*\))+?)\)",
    re.S,
)
_OFI_VALUE_SET = re.compile(r"\bOFI_NCCL_PARAM_VALUE_SET\(\s*(\w+)\s*,\s*((?:\(\w+\))+)\s*\)")
_OFI_NUMBER_TYPES = ("int", "size_t", "unsigned long int", "unsigned int", "long", "long int", "uint32_t", "uint64_t")


def ofi_rccl_param(text: str) -> Iterator[Read]:
    """aws-ofi-rccl's OFI_NCCL_PARAM_INT/STR(name, "SUFFIX", default): OFI_NCCL_SUFFIX, an int read by strtoll
    without a check, or a string."""
    for match in _OFI_RCCL_PARAM.finditer(_code_lines(text)):
        kind, suffix, default = match.groups()
        rule = "ofi-rccl-int" if kind == "INT" else "read"
        yield Read(f"OFI_NCCL_{suffix}", rule, _line(text, match.start()), default.strip())


def ofi_nccl_param(text: str) -> Iterator[Read]:
    """aws-ofi-nccl's OFI_NCCL_PARAM(type, name, "SUFFIX", default): OFI_NCCL_SUFFIX parsed by its type (a bool,
    a number, an enum of OFI_NCCL_PARAM_VALUE_SET, a string); a value its type refuses stops the plugin's start."""
    code = _code_lines(text)
    enums = {m.group(1): tuple(re.findall(r"\((\w+)\)", m.group(2))) for m in _OFI_VALUE_SET.finditer(code)}
    for match in _OFI_NCCL_PARAM.finditer(code):
        type_, suffix, default = (" ".join(match.group(1).split()), match.group(2), match.group(3))
        if "#else" in default:  # a default chosen by the build (#if HAVE_NEURON ... #else ... #endif): the else
            default = default.split("#else", 1)[1].split("#endif", 1)[0]
        default = re.split(r",(?![^()]*\))", default, maxsplit=1)[0]  # a deprecation's message follows it
        values: tuple[str, ...] = ()
        if type_ == "bool":
            rule = "ofi-bool"
        elif type_ in _OFI_NUMBER_TYPES:
            rule = "ofi-int"
        elif type_ in enums:
            rule, values = "ofi-enum", enums[type_]
        else:
            rule = "read"
        yield Read(f"OFI_NCCL_{suffix}", rule, _line(text, match.start()), " ".join(default.split()), values)


# --- rocBLAS, hipBLASLt --------------------------------------------------------------------------------------------

_READ_ENV = re.compile(r"\b(?:read_env|open_log_stream)\(\s*\"(" + NAME + r")\"")
_NAMED_CONSTANT = re.compile(r"\bconstexpr\s+char\s+\w+\[\]\s*=\s*\"(" + NAME + r")\"\s*;")


def rocblas_read_env(text: str) -> Iterator[Read]:
    for match in _READ_ENV.finditer(_code_lines(text)):
        yield Read(match.group(1), "read", _line(text, match.start()))


def named_constant(text: str) -> Iterator[Read]:
    """A name kept in a constant and passed to getenv (`static constexpr char varname[] = "..."`)."""
    code = _code_lines(text)
    for match in _NAMED_CONSTANT.finditer(code):
        if "getenv" in code[match.end() : match.end() + 400]:
            yield Read(match.group(1), "read", _line(text, match.start()))


# --- MIOpen --------------------------------------------------------------------------------------------------------

_MIOPEN_DECLARE = re.compile(r"\bMIOPEN_DECLARE_ENV_VAR_(BOOL|UINT64|STR)\s*\(\s*(" + NAME + r")\s*[,)]")


def miopen_env(text: str) -> Iterator[Read]:
    rules = {"BOOL": "miopen-bool", "UINT64": "miopen-uint", "STR": "read"}
    for match in _MIOPEN_DECLARE.finditer(_code_lines(text)):
        yield Read(match.group(2), rules[match.group(1)], _line(text, match.start()))


# --- jax -----------------------------------------------------------------------------------------------------------

_JAX_STATE = re.compile(
    r"\b(bool_state|enum_state|optional_enum_state|int_state|float_state|string_state|optional_string_state|"
    r"optional_bool_state|enum_class_state|string_or_object_state)\(\s*(?:name\s*=\s*)?(['\"])(\w+)\2",
    re.S,
)
_JAX_ENV_HELPER = re.compile(r"\b(bool_env|int_env)\(\s*(['\"])(\w+)\2")
_PY_ENVIRON = re.compile(
    r"\bos\.(?:getenv|environ\.get)\(\s*(['\"])(" + NAME + r")\1"
    r"|\bos\.environ\[\s*(['\"])(" + NAME + r")\3\s*\](?!\s*=[^=])"
    r"|(['\"])(" + NAME + r")\5\s+(?:not\s+)?in\s+os\.environ\b"
)
_PY_CONSTANT = re.compile(r"^_?\w+\s*=\s*(['\"])([A-Z][A-Z0-9_]{2,})\1\s*$", re.M)


def call_arguments(text: str, start: int, limit: int = 4000) -> str:
    """The text of a call's arguments from the opening parenthesis at or after `start` (balanced, at most `limit`
    characters)."""
    opening = text.find("(", start)
    depth = 0
    for index in range(opening, min(len(text), opening + limit)):
        depth += {"(": 1, ")": -1}.get(text[index], 0)
        if depth == 0:
            return text[opening + 1 : index]
    return text[opening + 1 : opening + limit]


def jax_state(text: str) -> Iterator[Read]:
    """config.<kind>_state(name='jax_x', default=...): read once at import from JAX_X (the name in capitals)."""
    for match in _JAX_STATE.finditer(text):
        kind, name = match.group(1), match.group(3)
        if text[max(0, match.start() - 4) : match.start()].endswith("def "):
            continue
        arguments = call_arguments(text, match.start())
        default = re.search(r"\bdefault\s*=\s*([^,\n]+)", arguments)
        default_text = default.group(1).strip() if default else None
        if kind == "optional_bool_state" and default_text in (None, "None"):
            continue  # jax reads no variable for it (its default is None)
        values: tuple[str, ...] = ()
        rule = {
            "bool_state": "jax-bool",
            "optional_bool_state": "jax-bool",
            "int_state": "jax-int",
            "float_state": "jax-float",
        }.get(kind, "read")
        if kind in ("enum_state", "optional_enum_state"):
            listed = re.search(r"\benum_values\s*=\s*\[([^\]]*)\]", arguments)
            if listed is not None:
                values = tuple(re.findall(r"['\"]([^'\"]*)['\"]", listed.group(1)))
                rule = "jax-enum" if values else "read"
        yield Read(name.upper(), rule, _line(text, match.start()), default_text, values)


def jax_env_helper(text: str) -> Iterator[Read]:
    for match in _JAX_ENV_HELPER.finditer(text):
        if text[max(0, match.start() - 4) : match.start()].endswith("def "):
            continue
        rule = "jax-bool" if match.group(1) == "bool_env" else "jax-int"
        yield Read(match.group(3), rule, _line(text, match.start()))


def python_environ(text: str) -> Iterator[Read]:
    for match in _PY_ENVIRON.finditer(text):
        name = match.group(2) or match.group(4) or match.group(6)
        yield Read(name, "read", _line(text, match.start()))


def python_constant(text: str) -> Iterator[Read]:
    """A module constant holding a variable's name, where the module reads os.environ with it (jax's launcher
    detection: _PROCESS_ID = 'SLURM_PROCID')."""
    if "os.environ" not in text:
        return
    for match in _PY_CONSTANT.finditer(text):
        constant = text[match.start() : match.start() + text[match.start() :].find("=")].strip()
        if re.search(r"os\.environ(?:\.get)?[\[(]\s*" + re.escape(constant) + r"\b", text):
            yield Read(match.group(2), "read", _line(text, match.start()))


_XLA_FLAG = re.compile(r"tsl::Flag\(\s*\"(\w+)\"")


def xla_flag_names(text: str) -> list[str]:
    """The names of the flags a source registers (tsl::Flag("name", ...)): what XLA_FLAGS may hold as --name."""
    return sorted(set(_XLA_FLAG.findall(_code_lines(text))))


MECHANISMS: dict[str, Callable[[str], Iterator[Read]]] = {
    "rocr-flag": rocr_flag,
    "rocr-getenv": rocr_getenv,
    "c-getenv": c_getenv,
    "clr-flag": clr_flag,
    "rocprofiler-sdk-env": rocprofiler_sdk_env,
    "rocprofiler-register-env": rocprofiler_register_env,
    "nccl-param": nccl_param,
    "nccl-getenv": nccl_getenv,
    "ofi-rccl-param": ofi_rccl_param,
    "ofi-nccl-param": ofi_nccl_param,
    "rocblas-read-env": rocblas_read_env,
    "named-constant": named_constant,
    "miopen-env": miopen_env,
    "jax-state": jax_state,
    "jax-env-helper": jax_env_helper,
    "python-environ": python_environ,
    "python-constant": python_constant,
}
