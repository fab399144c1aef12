"""A rule added the engine's way (its reader: _machine/temp_dir.py): XLA compiles every GPU kernel in the first
existing temporary folder and never checks it may write there, so a folder this process cannot write in (a
read-only /tmp in a container, a TMPDIR owned by another user) or none at all fails every jit on the GPU.

Only where the backend will come up on a GPU this process can use: elsewhere no GPU kernel is compiled.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jax_rocm7_plugin import _findings as catalog
from jax_rocm7_plugin._engine import RuleSet
from jax_rocm7_plugin._environment import read
from jax_rocm7_plugin._findings import Finding
from jax_rocm7_plugin._machine.identity import read_identity
from jax_rocm7_plugin._machine.temp_dir import CANDIDATES, TempDir, may_write_in, read_temp_dir
from jax_rocm7_plugin._safe_io import Deadline, with_deadline

RULES = RuleSet("compile-temp-dir")


# A stat of a folder on a stale network mount waits for the mount: the reader runs under a deadline.
READ_SECONDS = 5.0


@RULES.rule("read", reads=("settings",), gives="temp-dir")
def _temp_dir(facts: Mapping[str, Any]) -> TempDir | Deadline:
    settings = facts["settings"]
    try:
        return with_deadline(lambda: read_temp_dir(settings.sysroot, settings.environ or {}), READ_SECONDS)
    except Deadline as late:
        return late


@RULES.rule("find", reads=("temp-dir", "checked", "settings"))
def _compile_temp_dir(facts: Mapping[str, Any]) -> list[Finding]:
    temp: TempDir | Deadline = facts["temp-dir"]
    machine = facts["checked"].facts.machine
    if machine is None or not machine.usable_gpus:
        return []
    if isinstance(temp, Deadline):
        environ = facts["settings"].environ or {}
        named = tuple(n for n in CANDIDATES if read(n, environ))
        return [catalog.compile_temp_dir_unanswered(temp.path, temp.seconds, named)]
    evidence = tuple(
        f"{c.named_by}={c.path}: {c.why_not or 'taken'}"
        if c.named_by != c.path
        else f"{c.path}: {c.why_not or 'taken'}"
        for c in temp.considered
    )
    variables = tuple(c.named_by for c in temp.considered if c.named_by in CANDIDATES)
    if temp.path is None:
        why = "; ".join(f"{c.path}: {c.why_not}" for c in temp.considered) or "no candidate"
        return [catalog.compile_temp_dir_unusable(None, None, why, evidence, variables, ())]
    identity = machine.identity or read_identity(machine.root)
    if may_write_in(temp, identity):
        return []
    chosen = temp.chosen
    assert chosen is not None and temp.mode is not None
    why = f"mode {temp.mode:o}, owner uid {temp.uid} gid {temp.gid}; this process is uid {identity.uid}"
    finding = catalog.compile_temp_dir_unusable(temp.path, chosen.named_by, why, evidence, variables, (temp.path,))
    return [finding]
