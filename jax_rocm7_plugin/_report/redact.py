"""What must not leave the machine in a report, and the one pass that takes it out.

Secrets are found in the whole environment, not only the variables a report lists: a variable
whose name looks like a credential (SECRET_WORDS) gives its value, and a URL with a password in
any variable gives its user:password part. Each such literal becomes `<redacted>` wherever it
appears in any file of the bundle (the user's program may print it); credentials in URLs are also
taken out of every text by pattern. Literals shorter than MIN_LITERAL are redacted where they are
a variable's value but not searched for elsewhere: replacing every "1" would destroy the report.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from jax_rocm7_plugin import _environment
from jax_rocm7_plugin._job.steering import REDACTED as REDACTED  # one marker for a record and a report
from jax_rocm7_plugin._job.steering import looks_secret, scrub_shapes

# The report's own words: wider than the cluster policy's (PASS), since a bundle holds whatever the program printed.
SECRET_WORDS = (
    "TOKEN", "SECRET", "PASSWORD", "PASSWD", "PASS", "KEY", "CREDENTIAL", "AUTH", "COOKIE", "PRIVATE", "JWT",
    "CONNECTION_STRING",
)  # fmt: skip
MIN_LITERAL = 4
# scheme://user:password@host, its scheme where no scheme character precedes it (linear on a long run of letters).
# A user without a password is kept where it reads as a name; a long one is a token given as the user
# (https://ghp_...@github.com, https://oauth2:TOKEN@...): taken out too.
_URL_CREDENTIALS = re.compile(
    r"(?<![A-Za-z0-9+.-])(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?P<user>[^/\s:@]*):(?P<password>[^/\s@]*)@"
)
_URL_TOKEN_USER = re.compile(r"(?<![A-Za-z0-9+.-])(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?P<user>[^/\s:@]{20,})@")
# A secret passed on a command line: --token=VALUE, --password VALUE, --api-key VALUE ...
_ARGUMENT = re.compile(
    r"(?P<flag>(?<![\w-])--?[A-Za-z0-9_-]*(?:token|password|passwd|secret|api[-_]?key|auth)[A-Za-z0-9_-]*(?:=|\s+))"
    r"(?P<value>[^\s\"']+)",
    re.IGNORECASE,
)


def is_secret_name(name: str) -> bool:
    """A variable whose value is a credential, by its name (HF_TOKEN, AWS_SECRET_ACCESS_KEY, PGPASSWORD...)."""
    return looks_secret(name, SECRET_WORDS)


class Redactor:
    """The secrets of one environment, and the pass that removes them from text or bytes."""

    def __init__(self, environ: Mapping[str, str]) -> None:
        self.names: list[str] = []  # what was redacted, by where it was found (never the value)
        literals: set[str] = set()
        for name, value in _environment.everything(environ):
            if is_secret_name(name) and value:
                self.names.append(name)
                literals.add(value)
            for match in _URL_CREDENTIALS.finditer(value):
                if match.group("password"):
                    self.names.append(f"password in a URL in {name}")
                    literals.add(f"{match.group('user')}:{match.group('password')}")
                    literals.add(match.group("password"))
        # Longest first, so a value that contains another is replaced whole.
        self._literals = sorted((v for v in literals if len(v) >= MIN_LITERAL), key=len, reverse=True)
        self._secret_names = {n for n in environ if is_secret_name(n)}

    def variable(self, name: str, value: str) -> str:
        """A variable's value as a report may show it."""
        if name in self._secret_names and value:
            return REDACTED
        return self.text(value)

    def text(self, text: str) -> str:
        text = _URL_CREDENTIALS.sub(lambda m: f"{m.group('scheme')}{REDACTED}@", text)
        text = _URL_TOKEN_USER.sub(lambda m: f"{m.group('scheme')}{REDACTED}@", text)
        text = _ARGUMENT.sub(lambda m: f"{m.group('flag')}{REDACTED}", text)
        text = scrub_shapes(text)
        for literal in self._literals:
            text = text.replace(literal, REDACTED)
        return text

    def data(self, data: bytes) -> bytes:
        """Bytes of any file: literals replaced in their UTF-8 form, then every pattern over the whole of it: bytes
        that are not UTF-8 (a binary, a tail cut inside a character) are carried through as they are
        (surrogateescape), so they never turn the patterns off for the rest of the file."""
        for literal in self._literals:
            data = data.replace(literal.encode("utf-8", "surrogateescape"), REDACTED.encode())
        return self.text(data.decode("utf-8", "surrogateescape")).encode("utf-8", "surrogateescape")

    def found_in(self, chunks: Iterable[bytes]) -> list[str]:
        """Which secret literals still occur in these bytes (for the report's own check before it writes)."""
        joined = b"".join(chunks)
        return [literal for literal in self._literals if literal.encode("utf-8", "surrogateescape") in joined]
