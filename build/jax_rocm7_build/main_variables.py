"""`build.py variables --snapshots DIR [--output FILE] [--check]`: the doctor's table of the environment variables the
stack reads, generated from its readers' sources at the commits build/stack_sources.json pins.

DIR holds one bare git repository per source repository, as `<owner>+<name>/repo` (the layout of this project's
snapshot store) or `<owner>+<name>` itself. A missing repository or commit is one line naming it. `--check` writes
nothing and exits 1 when FILE differs from what the sources give (the table is generated, never edited by hand).
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from jax_rocm7_build import snapshots
from jax_rocm7_plugin._names import PLUGIN_PACKAGE

NAME = "variables"
HELP = "generate the table of environment variables the stack reads, from its sources at pinned commits"
REPO = Path(__file__).resolve().parents[2]
SOURCES = REPO / "build" / "stack_sources.json"
OUTPUT = REPO / PLUGIN_PACKAGE / "_policy" / "stack_variables_generated.json"
PRECEDENCE = ("read",)  # a rule that judges beats "read" for the same variable and reader
FLAG_MECHANISMS = ("clr-flag", "miopen-env")  # reads that declare a global of the variable's own name


def configure_parser(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    snapshots.add_arguments(commands, NAME, HELP, __doc__ or "", OUTPUT)


validate = snapshots.validate


def execute(args: argparse.Namespace) -> int:
    from jax_rocm7_build.progress import BuildError

    try:
        table = generate(json.loads(SOURCES.read_text(encoding="utf-8")), args.snapshots)
    except BuildError as error:
        print(f"build.py variables: {error}", file=sys.stderr)
        return 2
    judged = sum(1 for v in table["variables"] if v["rule"] != "read")
    names = len({v["name"] for v in table["variables"]})
    said = f"{names} variables ({len(table['variables'])} reads), {judged} judged"
    return snapshots.write_or_check(table, args.output, args.check, said)


def _files(git_dir: Path, commit: str, patterns: list[str], exclude: re.Pattern[str]) -> dict[str, str]:
    """path -> text of every file at `commit` matching a pattern (fnmatch: * crosses folders), read in one batch."""
    listing = snapshots.git(git_dir, "ls-tree", "-r", "--name-only", commit).decode().splitlines()
    wanted = [p for p in listing if any(fnmatch.fnmatch(p, g) for g in patterns) and not exclude.search(p)]
    if not wanted:
        return {}
    batch = snapshots.git(git_dir, "cat-file", "--batch", stdin="".join(f"{commit}:{p}\n" for p in wanted).encode())
    texts, at = {}, 0
    for path in wanted:
        header_end = batch.index(b"\n", at)
        size = int(batch[at:header_end].split()[2])
        texts[path] = batch[header_end + 1 : header_end + 1 + size].decode("utf-8", errors="replace")
        at = header_end + 1 + size + 1
    return texts


def _texts_at(
    folder: Path, repo: str, commit: str, paths: list[str], exclude: re.Pattern[str], what: str
) -> dict[str, str]:
    """The files of `repo` at `commit` the reader's paths name; BuildError where the snapshot lacks the commit
    (`what`: how the commit is named in that error)."""
    from jax_rocm7_build.progress import BuildError

    git_dir = snapshots.git_dir(folder, repo)
    try:
        snapshots.git(git_dir, "cat-file", "-e", f"{commit}^{{commit}}")
    except BuildError:
        raise BuildError(f"{repo}: {what} {commit} is not in {git_dir}") from None
    return _files(git_dir, commit, paths, exclude)


def _reads(texts: dict[str, str], mechanisms: list[str]) -> Iterator[tuple[str, str, str, Any]]:
    """(path, text, mechanism, read) of every read the mechanisms find in the texts, by path."""
    from jax_rocm7_build.stack_variables_gen import MECHANISMS

    for path, text in sorted(texts.items()):
        for mechanism in mechanisms:
            for read in MECHANISMS[mechanism](text):
                yield path, text, mechanism, read


def _defaults_by_release(
    found: dict[tuple[str, str], dict[str, Any]], sources: dict[str, Any], folder: Path, exclude: re.Pattern[str]
) -> None:
    """Each read's default at the reader's earlier releases (`releases`: release -> commit), kept where one differs
    from the pinned commit's: the default a machine of that release runs with where the variable is unset."""
    for reader in sources["readers"]:
        for release, commit in reader.get("releases", {}).items():
            texts = _texts_at(folder, reader["repo"], commit, reader["paths"], exclude, f"{release}'s commit")
            seen: dict[str, str] = {}
            for _, _, _, read in _reads(texts, reader["mechanisms"]):
                if read.default is not None:
                    seen.setdefault(read.name, read.default[:80])
            for (name, who), entry in found.items():
                if who == reader["reader"] and name in seen and seen[name] != entry.get("default"):
                    entry.setdefault("defaults", {})[release] = seen[name]


def _type_by_flow(
    found: dict[tuple[str, str], dict[str, Any]],
    sites: dict[tuple[str, str], tuple[str, int, bool]],
    reader_texts: dict[str, dict[str, str]],
    sources: dict[str, Any],
    by_reader: dict[str, dict[str, Any]],
) -> None:
    """Each read not judged ("read") that reaches a call naming something on the machine gets what the call needs
    (`machine`), how much of the value reaches it (`shape`) and where (`used_at`)."""
    from jax_rocm7_build.value_flows import flows

    keeps = frozenset(sources["keeps"])
    for key, entry in found.items():
        if entry["rule"] != "read":
            continue
        path, line, flag = sites[key]
        reached = flows(entry["name"], path, line, reader_texts[key[1]], sources["sinks"], keeps, flag=flag)
        if not reached:
            continue
        first = reached[0]
        reader = by_reader[key[1]]
        used_at = f"https://github.com/{reader['repo']}/blob/{reader['commit']}/{first.path}#L{first.line}"
        if first.rule is not None:  # a parsing call: the read is judged by its rule where the whole value reaches it
            if first.shape == "whole":
                entry["rule"] = first.rule
                entry["flow"] = {"call": first.call, "shape": first.shape, "used_at": used_at}
            continue
        created = first.machine != sources["sinks"][first.call]["machine"]
        entry["flow"] = {
            "call": f"{first.call} (creating)" if created else first.call,
            "machine": first.machine,
            "shape": first.shape,
            "used_at": used_at,
        }


def _check_cited_line(read: Any, text: str, path: str) -> None:
    """The call at the line a read cites names it, on that line or the two after where the call wraps (NCCL_PARAM
    and the OFI plugins' params name only the suffix; jax's states are in lower case): a table whose links point
    elsewhere is refused."""
    from jax_rocm7_build.progress import BuildError

    lines = text.split("\n")
    line = "\n".join(lines[read.line - 1 : read.line + 2]).lower() if 0 < read.line <= len(lines) else ""
    suffixes = {read.name.lower(), *(read.name.split("_", words)[-1].lower() for words in (1, 2))}
    if not any(suffix in line for suffix in suffixes):
        raise BuildError(f"{path}: {read.name} cites line {read.line}, which does not name it (a mechanism's offsets)")


def generate(sources: dict[str, Any], folder: Path) -> dict[str, Any]:
    exclude = re.compile(sources["exclude"])
    found: dict[tuple[str, str], dict[str, Any]] = {}
    sites: dict[tuple[str, str], tuple[str, int, bool]] = {}  # (name, reader) -> where its kept read is
    reader_texts: dict[str, dict[str, str]] = {}  # a reader's files, every entry of it together
    readers = []
    for reader in sources["readers"]:
        readers.append({"reader": reader["reader"], "repo": reader["repo"], "commit": reader["commit"]})
        texts = _texts_at(folder, reader["repo"], reader["commit"], reader["paths"], exclude, "commit")
        reader_texts.setdefault(reader["reader"], {}).update(texts)
        for path, text, mechanism, read in _reads(texts, reader["mechanisms"]):
            _check_cited_line(read, text, path)
            key = (read.name, reader["reader"])
            entry = {
                "name": read.name,
                "reader": reader["reader"],
                "rule": read.rule,
                "source": f"https://github.com/{reader['repo']}/blob/{reader['commit']}/{path}#L{read.line}",
            }
            if read.default is not None:
                entry["default"] = read.default[:80]
            if read.values:
                entry["values"] = list(read.values)
            kept = found.get(key)
            if kept is None or (kept["rule"] in PRECEDENCE and read.rule not in PRECEDENCE):
                found[key] = entry
                sites[key] = (path, read.line, mechanism in FLAG_MECHANISMS)
    _type_by_flow(found, sites, reader_texts, sources, {r["reader"]: r for r in sources["readers"]})
    _defaults_by_release(found, sources, folder, exclude)
    from jax_rocm7_build.progress import BuildError
    from jax_rocm7_build.stack_variables_gen import xla_flag_names

    xla_flags = {}
    for release in sources.get("xla_flags", []):
        git_dir = snapshots.git_dir(folder, release["repo"])
        texts = _files(git_dir, release["commit"], release["paths"], exclude)
        if len(texts) != len(release["paths"]):
            raise BuildError(f"{release['repo']} at {release['commit']}: not all of {release['paths']}")
        names = sorted({n for text in texts.values() for n in xla_flag_names(text)})
        where = f"https://github.com/{release['repo']}/blob/{release['commit']}/{release['paths'][0]}"
        xla_flags[release["release"]] = {"source": where, "names": names}
    rules = {}
    for rule, spec in sources["rules"].items():
        where = spec.get("where")
        rules[rule] = {k: v for k, v in spec.items() if k != "where"}
        if where is not None:
            rules[rule]["source"] = f"https://github.com/{where[0]}/blob/{where[1]}/{where[2]}"
    return {
        "about": (
            "Generated by `python build/build.py variables --snapshots DIR` from build/stack_sources.json: every "
            "environment variable its readers read at the pinned commits, the rule of its reader's parser, and the "
            "line it is read at. Do not edit: change the sources or the generator, then run it again."
        ),
        "readers": readers,
        "rules": rules,
        "xla_flags": xla_flags,
        "sinks": {
            call: {"machine": spec["machine"], "effect": spec["effect"]}
            for call, spec in sources["sinks"].items()
            if "machine" in spec
        }
        | {
            f"{call} (creating)": {"machine": spec["created"], "effect": spec["effect"]}
            for call, spec in sources["sinks"].items()
            if "created" in spec
        },
        "variables": sorted(found.values(), key=lambda v: (v["name"], v["reader"])),
    }
