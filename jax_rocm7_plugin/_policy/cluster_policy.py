"""What the cluster preflight compares across processes, and its thresholds (data: cluster_policy.json).

Stdlib only; the JSON is read once per process.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

POLICY = Path(__file__).resolve().parent / "cluster_policy.json"


@cache
def _policy() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(POLICY.read_text(encoding="utf-8"))
    return data


def record_max_bytes() -> int:
    return int(_policy()["record_max_bytes"])


def steering_rules() -> dict[str, Any]:
    """What a record's variables are chosen and redacted by, as plain data (_job/steering.py reads it; a job's
    start-up plan carries it, so that a warm start states the variables without reading this policy)."""
    policy = _policy()
    steering = policy["steering_variables"]
    return {
        "names_and_prefixes": [*steering["names"], *steering["prefixes"]],
        "stack_names": _stack_names(tuple(steering["names"]), tuple(steering["prefixes"])),
        "secret_words": list(policy["secret_name_words"]),
        "value_max_chars": int(policy["value_max_chars"]),
    }


def _stack_names(names: tuple[str, ...], prefixes: tuple[str, ...]) -> list[str]:
    """Every variable the stack's readers read (the variable tables) that no steering name or prefix holds, but
    those jax reads to detect its launcher (ranks, counts, addresses: per process by nature) and those the policy
    sets per process: what a record states beside the steering variables, so that processes compare them too."""
    from jax_rocm7_plugin._policy.stack_variables import launcher_names, variables

    launchers = launcher_names()
    return sorted(
        {
            v.name
            for v in variables()
            if v.name not in launchers
            and v.name not in names
            and not v.name.startswith(prefixes)
            and not is_per_process_variable(v.name)
        }
    )


def is_per_process_variable(name: str) -> bool:
    """Set per process on purpose (device selection, ranks): recorded, never compared."""
    rule = _policy()["per_process_variables"]
    return name in rule["names"] or name.startswith(tuple(rule["prefixes"]))


def threshold(name: str) -> tuple[int, str]:
    """(value, why) of a threshold: "shm_min_bytes", "open_files_min" or "line_rate_percent_min"."""
    entry = _policy()[name]
    return int(entry["value"]), str(entry["why"])


def loopback_names() -> tuple[str, ...]:
    return tuple(_policy()["loopback_hosts"])
