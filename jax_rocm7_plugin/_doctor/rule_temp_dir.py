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
from jax_rocm7_plugin._findings import Finding
from jax_rocm7_plugin._machine.identity import read_identity
from jax_rocm7_plugin._machine.temp_dir import CANDIDATES, TempDir, may_write_in, read_temp_dir

RULES = RuleSet("compile-temp-dir")


@RULES.rule("read", reads=("settings",), gives="temp-dir")
def _temp_dir(facts: Mapping[str, Any]) -> TempDir:
    settings = facts["settings"]
    return read_temp_dir(settings.sysroot, settings.environ or {})


@RULES.rule("find", reads=("temp-dir", "checked"))
def _compile_temp_dir(facts: Mapping[str, Any]) -> list[Finding]:
    temp: TempDir = facts["temp-dir"]
    machine = facts["checked"].facts.machine
    if machine is None or not machine.usable_gpus:
        return []
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
