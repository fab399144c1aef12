"""The variables that steer collectives and the GPU runtime, and every other variable the stack's readers read
(the variable tables' names, carried in the rules), as a record states them: by name, secrets redacted, values
bounded (the cluster policy's lists). Its own module because the job check at a warm start states them
too, without the rest of the record's building; and it reads the policy only where it is not handed the rules
(a job's start-up plan carries them: cluster_policy.steering_rules)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from jax_rocm7_plugin import _environment

REDACTED = "<redacted>"
# A scheme starts where no scheme character precedes it: each run of letters is tried once, so a long run without
# "://" costs a pass over it, not a pass per letter (80 KB of letters took 6.4 s before).
_URL_CREDENTIALS = r"(?<![A-Za-z0-9+.-])(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?P<userinfo>[^/@\s]+)@"
# Secrets by their shape, wherever they are and whatever holds them: the forms their issuers document for access
# keys and tokens (AWS, GitHub, GitLab, Slack, Hugging Face, OpenAI-style keys, JSON Web Tokens), PEM private keys,
# and the key parts of connection strings (Azure's AccountKey and SharedAccessSignature).
SECRET_SHAPES = re.compile(
    "|".join(
        (
            r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA)[0-9A-Z]{16}\b",
            r"\bgh[pousr]_[A-Za-z0-9]{36,255}\b",
            r"\bgithub_pat_[A-Za-z0-9_]{22,255}\b",
            r"\bglpat-[A-Za-z0-9_-]{20,}",
            r"\bxox[abprs]-[A-Za-z0-9-]{10,}",
            r"\bhf_[A-Za-z0-9]{30,}\b",
            r"\bsk-(?:proj-)?[A-Za-z0-9_-]{20,}",
            r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",
            r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----[A-Za-z0-9+/=\s:,-]{0,16384}?"
            r"-----END (?:[A-Z0-9]+ )*PRIVATE KEY-----",
            r"(?<=AccountKey=)[A-Za-z0-9+/=]{16,}",
            r"(?<=SharedAccessSignature=)[^;\s\"']{16,}",
        )
    )
)


def scrub_shapes(text: str) -> str:
    """Every secret of a known shape in `text` becomes `<redacted>`."""
    return SECRET_SHAPES.sub(REDACTED, text)


_MIN_SECRET_CHARS = 4  # shorter values ("1", "no") would redact half of every other value


def looks_secret(name: str, words: tuple[str, ...] | list[str]) -> bool:
    """A name that may hold a credential (one of the policy's `secret_words` in it): its value never leaves the
    process."""
    upper = name.upper()
    return any(word in upper for word in words)


def redact(value: str, secrets: tuple[str, ...]) -> str:
    """Credentials in URLs and every known secret value become `<redacted>`."""
    text = scrub_shapes(value)
    if "://" in text:  # the pattern is compiled (re caches it) only for values that can hold a URL
        text = re.sub(_URL_CREDENTIALS, lambda m: f"{m.group('scheme')}{REDACTED}@", text)
    for secret in secrets:
        text = text.replace(secret, REDACTED)
    return text


def secret_values(environ: Mapping[str, str], words: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """Values of every variable whose name looks like a credential, longest first."""
    values = {v for k, v in _environment.everything(environ) if looks_secret(k, words) and len(v) >= _MIN_SECRET_CHARS}
    return tuple(sorted(values, key=len, reverse=True))


def steering_environment(
    environ: Mapping[str, str], rules: Mapping[str, Any] | None = None
) -> tuple[tuple[str, str], ...]:
    """The variables that steer collectives and the GPU runtime, redacted and bounded, by name. `rules`: the
    cluster policy's steering rules (cluster_policy.steering_rules), read from the policy where not given."""
    if rules is None:
        from jax_rocm7_plugin._policy.cluster_policy import steering_rules

        rules = steering_rules()
    words = tuple(rules["secret_words"])
    secrets = secret_values(environ, words)
    limit = int(rules["value_max_chars"])
    chosen: list[tuple[str, str]] = []
    stated = dict(_environment.matching(tuple(rules["names_and_prefixes"]), environ))
    stated.update(_environment.listed(rules.get("stack_names", ()), environ))  # the rest the stack reads
    for name, value in sorted(stated.items()):
        value = REDACTED if looks_secret(name, words) else redact(value, secrets)
        if len(value) > limit:
            value = f"{value[:limit]}...(+{len(value) - limit} chars)"
        chosen.append((name, value))
    return tuple(chosen)
