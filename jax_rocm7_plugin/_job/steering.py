"""The variables that steer collectives and the GPU runtime, as a record states them: by name, secrets redacted,
values bounded (the cluster policy's lists). Its own module because the job check at a warm start states them
too, without the rest of the record's building."""

from __future__ import annotations

import re
from collections.abc import Mapping

from jax_rocm7_plugin import _environment
from jax_rocm7_plugin._policy import cluster_policy
from jax_rocm7_plugin._policy.cluster_policy import REDACTED

_URL_CREDENTIALS = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?P<userinfo>[^/@\s]+)@")
_MIN_SECRET_CHARS = 4  # shorter values ("1", "no") would redact half of every other value


def redact(value: str, secrets: tuple[str, ...]) -> str:
    """Credentials in URLs and every known secret value become `<redacted>`."""
    text = _URL_CREDENTIALS.sub(lambda m: f"{m.group('scheme')}{REDACTED}@", value)
    for secret in secrets:
        text = text.replace(secret, REDACTED)
    return text


def secret_values(environ: Mapping[str, str]) -> tuple[str, ...]:
    """Values of every variable whose name looks like a credential, longest first."""
    values = {
        v for k, v in _environment.everything(environ) if cluster_policy.looks_secret(k) and len(v) >= _MIN_SECRET_CHARS
    }
    return tuple(sorted(values, key=len, reverse=True))


def steering_environment(environ: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """The variables that steer collectives and the GPU runtime, redacted and bounded, by name."""
    secrets = secret_values(environ)
    limit = cluster_policy.value_max_chars()
    chosen: list[tuple[str, str]] = []
    for name, value in _environment.matching(cluster_policy.steering_names_and_prefixes(), environ):
        value = REDACTED if cluster_policy.looks_secret(name) else redact(value, secrets)
        if len(value) > limit:
            value = f"{value[:limit]}...(+{len(value) - limit} chars)"
        chosen.append((name, value))
    return tuple(chosen)
