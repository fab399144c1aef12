"""Where a read value goes: the call its reader hands it to (dlopen, fopen, mkdir, gethostbyname ...), found in the
reader's sources, so that a variable is typed as a reference by what its reader does with it and not by its name.

The tracking is lexical and bounded, like the rest of the generator: from the read, the value is followed through
assignments, declarations, range-for loops, accessors (`T name() const { return member_; }`) and a flag's global
name, at most HOPS steps, until it is an argument of a call named in stack_sources.json's "sinks". Locals are
followed in their own file for LOCAL_LINES lines; members, accessors and flags across the reader's files. What is
not found is not typed (the doctor keeps the read as "read, not judged"): a missed flow costs coverage, never a false
alarm.

Each flow keeps its shape: "whole" (the value itself reaches the call), "suffixed" (the value with text appended, so
it keeps its folder), or "element" (a part of it: a split, a parse, a loop over it). Build-only.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any, Literal, NamedTuple

from jax_rocm7_build.stack_variables_gen import call_arguments

Shape = Literal["whole", "suffixed", "element"]
HOPS = 4
LOCAL_LINES = 80
_IDENT = r"[A-Za-z_]\w*"
_ORDER: dict[str, int] = {"whole": 0, "suffixed": 1, "element": 2}


class Flow(NamedTuple):
    call: str  # a key of the sinks table
    machine: str | None  # what the call needs the value to name (a machine kind of stack_variables.py)
    shape: Shape
    path: str
    line: int
    rule: str | None = None  # or how the call parses it (a rule of stack_sources.json: atoi, strcmp against "0")


class _Carrier(NamedTuple):
    pattern: str  # a regex matching a use of the value
    path: str | None  # the file a local lives in (None: every file of the reader)
    after: int  # a local is followed from this line on (1-based)
    shape: Shape


def _worse(a: Shape, b: Shape) -> Shape:
    return a if _ORDER[a] >= _ORDER[b] else b


def _line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


Sink = tuple[str | None, str | None]  # (machine kind, parsing rule): one of the two


def _sink_kind(call: str, arguments: str, sinks: Mapping[str, Mapping[str, Any]]) -> Sink | None:
    """What a call makes of its argument: the machine kind it needs it to name (fopen and open by their mode), or
    the rule it parses it by (strtol by its base, strcmp by the literal it compares with); None: nothing known."""
    spec = sinks.get(call)
    if spec is None:
        return None
    if "machine" in spec:
        if "created_when" in spec and re.search(spec["created_when"], arguments):
            return spec["created"], None
        return spec["machine"], None
    for pattern, rule in spec.get("rule_when", {}).items():
        if re.search(pattern, arguments):
            return None, rule
    return (None, spec["rule"]) if "rule" in spec else None


def _sinks_in(
    text: str, start: int, end: int, use: re.Pattern[str], sinks: Mapping[str, Mapping[str, Any]]
) -> Iterator[tuple[str, Sink, int]]:
    """(call, kind, offset) of each sink call in text[start:end] whose arguments hold a use of the carrier."""
    names = "|".join(sorted((re.escape(c) for c in sinks), key=len, reverse=True))
    # A free call `f(x)`, a declaration `T v(x)`, a template's `make_unique<T>(x)`; not a method of the same name
    # (`stream.open(x)` opens for writing where POSIX open(x) without O_CREAT needs the file).
    pattern = r"(?<![>\w])(" + names + r")\s*(\(|>\s*\(|\s+" + _IDENT + r"\s*[({])"
    for match in re.finditer(pattern, text[start:end]):
        before = text[max(0, start + match.start() - 4) : start + match.start()]
        if match.group(1) == "open" and before.endswith(".") and not before.endswith("os."):
            continue  # a stream's open method, not POSIX open (Python's os.open is)
        opening = start + match.end() - 1
        arguments = call_arguments(text, opening, 300) if text[opening] == "(" else _arguments_brace(text, opening)
        if use.search(arguments):
            kind = _sink_kind(match.group(1), arguments, sinks)
            if kind is not None:
                yield match.group(1), kind, start + match.start()


def _arguments_brace(text: str, opening: int) -> str:
    closing = {"(": ")", "{": "}"}[text[opening]]
    end = text.find(closing, opening)
    return text[opening + 1 : end if end != -1 else opening + 300]


def _expression(text: str) -> str:
    """An assigned expression up to its end: a semicolon, or a line end outside parentheses (Python)."""
    depth = 0
    for index, char in enumerate(text):
        depth += {"(": 1, "[": 1, ")": -1, "]": -1}.get(char, 0)
        if char == ";" or (char == "\n" and depth <= 0):
            return text[:index]
    return text


def _derived(statement_rhs: str, use: re.Pattern[str], keeps: frozenset[str]) -> Shape | None:
    """How an assigned expression keeps the value: itself (or passed through a call of `keeps`, which returns the
    same reference: a path type, a string type, ~ expansion), with text appended, or a part of it."""
    rhs = _expression(statement_rhs).strip()
    found = use.search(rhs)
    if found is None:
        return None
    head, tail = rhs[: found.start()].strip(), rhs[found.end() :].strip()
    tail = re.sub(r"^\.c_str\(\)", "", tail).strip()
    wrapped = head.endswith(("(", "{")) and head[:-1].strip() in keeps
    if (head == "" or wrapped) and tail in ("", ")", "}"):
        return "whole"
    if (head == "" or wrapped) and tail.lstrip(")}").strip().startswith("+"):
        return "suffixed"
    return "element"


def _assignments(
    text: str, start: int, end: int, use: re.Pattern[str], keeps: frozenset[str]
) -> Iterator[tuple[str, Shape, int]]:
    """(target, shape, offset) for each statement in text[start:end] that stores a use of the carrier in a name:
    `x = ...`, `T x = ...`, `T x(...)`, `for (auto& x : ...)`, `for x in ...:`."""
    body = text[start:end]
    for match in re.finditer(
        r"(?:\b(?:const\s+)?[\w:<>]+[\s*&]+)?(" + _IDENT + r")\s*(?:\[[^\]]*\])?\s*(?<![=!<>+\-*/])=(?!=)([^;{}]*;?)",
        body,
    ):
        shape = _derived(match.group(2), use, keeps)
        if shape is not None:
            yield match.group(1), shape, start + match.start()
    for match in re.finditer(r"\bstd::\w+\s+(" + _IDENT + r")\s*[({]([^;]*)", body):
        shape = _derived(match.group(2).rstrip(")}"), use, keeps)
        if shape is not None:
            yield match.group(1), shape, start + match.start()
    for match in re.finditer(r"\bfor\s*\(\s*[^:;()]*?(" + _IDENT + r")\s*:\s*([^)]*)\)", body):
        if use.search(match.group(2)):
            yield match.group(1), "element", start + match.start()
    for match in re.finditer(r"\bfor\s+(" + _IDENT + r")\s+in\s+([^:\n]*):", body):
        if use.search(match.group(2)):
            yield match.group(1), "element", start + match.start()


def _until_reassigned(text: str, start: int, end: int, use: re.Pattern[str]) -> int:
    """Where a local stops holding the value: the next statement after its first line that assigns it anything not
    made from itself (`var = GetEnv("OTHER")`), in the block it was set in. An assignment in a sibling block (the
    `else` of the `if` that set it) ends nothing: lexically, either may be the one that ran."""
    first_line_end = text.find("\n", start)
    for match in re.finditer(r"(?<![\w.>])(" + _IDENT + r")\s*=(?!=)([^;]*);", text[first_line_end:end]):
        if not use.fullmatch(match.group(1)) or use.search(match.group(2)):
            continue
        line_start = text.rfind("\n", 0, first_line_end + match.start()) + 1
        previous = text[text.rfind("\n", 0, max(line_start - 1, 0)) + 1 : line_start].strip()
        guarded = re.match(r"\s*(?:if|else|for|while)\b", text[line_start : first_line_end + match.start()])
        if guarded or re.fullmatch(r"(?:(?:else\s+)?if|for|while)\s*\(.*\)|else", previous):
            continue  # a conditional statement without braces (`if(!x) x = other;`): either value may follow
        depth, lowest = 0, 0
        for char in text[first_line_end : first_line_end + match.start()]:
            depth += {"{": 1, "}": -1}.get(char, 0)
            lowest = min(lowest, depth)
        if lowest == 0 and depth == 0:
            return first_line_end + match.start()
    return end


def _helper_carriers(helper: str, texts: Mapping[str, str]) -> list[_Carrier]:
    """Where `helper`'s definition takes the variable's name as a parameter and reads the environment with it: the
    local that holds the value, followed in the helper's file from that line."""
    found = []
    definition = re.compile(
        r"\b"
        + re.escape(helper)
        + r"\s*\(\s*(?:const\s+)?(?:char\s*(?:const\s*)?\*|std::string\s*&?)\s*("
        + _IDENT
        + r")\s*[,)]"
    )
    for path, text in texts.items():
        for match in definition.finditer(text):
            body = text[match.end() : match.end() + 2000]
            read = re.search(
                r"(" + _IDENT + r")\s*=\s*[\w:]*(?:getenv|read_env|GetEnvVar)\s*\(\s*" + match.group(1) + r"\b", body
            )
            if read is not None:
                line = _line_of(text, match.end() + read.start())
                found.append(_Carrier(r"\b" + re.escape(read.group(1)) + r"\b", path, line, "whole"))
    return found


def _is_local(name: str) -> bool:
    return not (name.endswith("_") or name.startswith("m_") or name.isupper())


def _accessor(text: str, member: str) -> str | None:
    """The name of a getter returning `member` (`T name() const { return member_; }`), if the file has one."""
    found = re.search(
        r"\b(" + _IDENT + r")\s*\(\s*\)\s*(?:const\s*)?\{\s*return\s+" + re.escape(member) + r"\s*;", text
    )
    return found.group(1) if found else None


def _enclosing_function(text: str, offset: int) -> str | None:
    """The name of the function whose body holds `offset`, where it is a getter of no arguments."""
    before = text[:offset]
    heads = list(re.finditer(r"\b(" + _IDENT + r")\s*\(\s*\)\s*(?:const\s*)?(?:->\s*[\w:<>]+\s*)?\{", before))
    found = heads[-1] if heads else None
    if found is None or before.count("{", found.end()) != before.count("}", found.end()):
        return None
    return found.group(1)


def flows(
    name: str,
    path: str,
    line: int,
    texts: Mapping[str, str],
    sinks: Mapping[str, Mapping[str, Any]],
    keeps: frozenset[str] = frozenset(),
    *,
    flag: bool,
) -> list[Flow]:
    """The calls the value of `name`, read at `path`:`line`, reaches in `texts` (the reader's files). `flag`: the read
    declares a global of the variable's own name (HIP's flags, MIOpen's declarations), used elsewhere by that name.
    `keeps`: calls that return the reference they are given (a path or string type, ~ expansion)."""
    text = texts[path]
    read_at = sum(len(x) + 1 for x in text.split("\n")[: line - 1])
    statement = _expression(text[read_at:])
    statement_end = read_at + len(statement) + 1
    # The whole read expression: getenv("X"), os::GetEnvVar("X"), os.environ.get('X', d), os.environ['X'].
    named = re.compile(
        r"[\w:.]*\s*[(\[]\s*[\"']" + re.escape(name) + r"[\"'][^;\n()\]]*(?:\([^()\n]*\)[^;\n()\]]*)*[)\]]"
    )
    found: list[Flow] = []
    queue: list[tuple[_Carrier, int]] = []
    # The read itself, where its call sits inside a sink's arguments.
    for call, kind, offset in _sinks_in(text, read_at, statement_end, named, sinks):
        found.append(Flow(call, kind[0], "whole", path, _line_of(text, offset), kind[1]))
    for target, shape, _ in _assignments(text, read_at, statement_end, named, keeps):
        queue.append((_Carrier(r"\b" + re.escape(target) + r"\b", path if _is_local(target) else None, line, shape), 0))
        if not _is_local(target) and (getter := _accessor(text, target)) is not None:
            queue.append((_Carrier(r"\b" + re.escape(getter) + r"\s*\(\s*\)", None, 0, shape), 0))
    if re.search(r"\breturn\b", statement) and (getter := _enclosing_function(text, read_at)) is not None:
        queue.append((_Carrier(r"\b" + re.escape(getter) + r"\s*\(\s*\)", None, 0, "whole"), 0))
    # A helper handed the variable's name (`open_log_stream("NAME")`): its parameter's getenv in its body.
    helper = re.match(r"\s*(?:[\w:.>*\[\]]+\s*=\s*)?(?:return\s+)?(\w+)\s*\(\s*[\"']" + re.escape(name), statement)
    if helper is not None:
        queue.extend((carrier, 0) for carrier in _helper_carriers(helper.group(1), texts))
    if flag:  # HIP's global of the flag's name, or MIOpen's env::value(NAME)
        pattern = r"(?:\benv::value\s*\(\s*)?\b" + re.escape(name) + r"\b(?!\s*,)(?:\s*\))?"
        queue.append((_Carrier(pattern, None, 0, "whole"), 0))
    seen: set[tuple[str, str | None]] = set()
    while queue:
        carrier, hops = queue.pop(0)
        if (carrier.pattern, carrier.path) in seen or hops > HOPS:
            continue
        seen.add((carrier.pattern, carrier.path))
        use = re.compile(carrier.pattern)
        for where, body in texts.items() if carrier.path is None else ((carrier.path, texts[carrier.path]),):
            start, end = 0, len(body)
            if carrier.path is not None:
                lines = body.split("\n")
                start = sum(len(x) + 1 for x in lines[: carrier.after - 1])
                end = sum(len(x) + 1 for x in lines[: carrier.after - 1 + LOCAL_LINES])
                end = _until_reassigned(body, start, end, use)
            if not use.search(body, start, end):
                continue
            assigned = list(_assignments(body, start, end, use, keeps))
            # A local assigned from itself (`name = name + "_" + pid`) no longer holds the value as read.
            kept = carrier.shape
            for target, shape, _ in assigned:
                if carrier.path is not None and use.fullmatch(target):
                    kept = _worse(kept, shape)
            # A value also compared with words (`var == "MAX"`) means more than the number a parse reads from it.
            worded = re.search(
                r"(?:"
                + carrier.pattern
                + r")\s*[!=]=\s*\"[^\"0-9]|strcmp\(\s*(?:"
                + carrier.pattern
                + r")[^,;]*,\s*\"[^\"0-9]",
                body[start:end],
            )
            for call, kind, offset in _sinks_in(body, start, end, use, sinks):
                if kind[1] is not None and worded:
                    continue
                found.append(Flow(call, kind[0], kept, where, _line_of(body, offset), kind[1]))
            for returned in re.finditer(r"\breturn\s+(" + carrier.pattern + r")\s*;", body[start:end]):
                getter = _enclosing_function(body, start + returned.start())
                if getter is not None:
                    queue.append((_Carrier(r"\b" + re.escape(getter) + r"\s*\(\s*\)", None, 0, kept), hops + 1))
            for target, shape, offset in assigned:
                if use.fullmatch(target):
                    continue
                local = _is_local(target)
                after = _line_of(body, offset)
                queue.append((_Carrier(r"\b" + re.escape(target) + r"\b", where if local else None, after,
                                       _worse(carrier.shape, shape)), hops + 1))  # fmt: skip
    found.sort(key=lambda f: (_ORDER[f.shape], f.path != path, f.line))
    return found
