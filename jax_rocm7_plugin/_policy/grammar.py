"""The grammars of values the stack reads, one parser each: every reader and rule that reads such a value comes here,
so that the doctor, the cluster check and the job check never read one value two ways.

- RCCL's (and NCCL's) lists (NCCL_SOCKET_IFNAME, NCCL_IB_HCA, ...): RCCL's parseStringList and matchIfList
  (src/misc/utils.cc): one leading '^' excludes, then one '=' matches names exactly (else as prefixes), then
  comma-separated entries `name[:port]`; a port is compared only where both sides have one.
- HOST:PORT, as jax's coordinator address (gRPC's): a host name or IPv4 address, or an IPv6 address in brackets,
  then a colon and a port from 1 to 65535. An IPv6 address without brackets is none (gRPC takes it for a host with
  no port).
- Sizes: a count of bytes with an optional binary suffix, K, M, G or T, written alone or as KB, KiB, ... in any
  case (64K, 16M, 256MiB, 65536k); B alone is bytes.
- Package names, as each package database allows them before they enter a printed command: dpkg's (Debian policy
  5.6.1: lowercase letters, digits, + - . and at least two characters), rpm's, pip's (PEP 508).
- Loose versions of ROCm and of the kernel: the leading MAJOR[.MINOR[.PATCH]] of '7.2.0-43', '7.13.0a20260415',
  '6.14.0-1018-oem'. Versions of Python distributions are PEP 440's (versions.py).

Stdlib only.
"""

from __future__ import annotations

import re

from jax_rocm7_plugin._record import NamedTuple


class ListEntry(NamedTuple):
    text: str  # as written
    name: str
    port: str  # as written after the colon ("": none)

    @property
    def port_number(self) -> int | None:
        """The port, where one is given as a number."""
        return int(self.port) if self.port.isascii() and self.port.isdigit() else None


class RcclList(NamedTuple):
    exclude: bool
    exact: bool
    entries: tuple[ListEntry, ...]

    def matches(self, name: str, port: int | None = None) -> bool:
        """Whether `name` (at `port`) is one this list names; an exclusion list names every other."""
        hit = any(
            (name == e.name if self.exact else name.startswith(e.name))
            and (e.port_number is None or port is None or e.port_number == port)
            for e in self.entries
        )
        return hit != self.exclude


def rccl_list(value: str) -> RcclList:
    text = value.strip()
    exclude = text.startswith("^")
    text = text[1:] if exclude else text
    exact = text.startswith("=")
    text = text[1:] if exact else text
    entries = []
    for entry in filter(None, (e.strip() for e in text.split(","))):
        name, _, port = entry.partition(":")
        entries.append(ListEntry(entry, name, port))
    return RcclList(exclude, exact, tuple(entries))


def rccl_list_matches(value: str | None, name: str, port: int | None = None) -> bool:
    """Whether `name` (at `port`) passes the list `value` (None or empty: everything passes)."""
    if not value or not value.strip():
        return True
    return rccl_list(value).matches(name, port)


# Patterns as text, compiled (and cached by re) at their first use: this module is imported inside `import jax`.
_ADDRESS = r"(?:\[(?P<v6>[0-9A-Fa-f:.]+)\]|(?P<host>[^\s:\[\]]+)):(?P<port>[0-9]{1,5})"


class Address(NamedTuple):
    host: str  # a name, an IPv4 address, or an IPv6 address without its brackets
    port: int

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


def parse_address(text: str) -> Address | None:
    """HOST:PORT, or None where `text` is not one (the grammar above)."""
    match = re.fullmatch(_ADDRESS, text)  # no blank around it: jax hands the text to gRPC as it is
    if match is None or not 0 < int(match["port"]) < 65536:
        return None
    return Address(match["v6"] or match["host"], int(match["port"]))


_SIZE = r"([0-9]+)\s*(?:([kmgt])(?:i?b)?|b)?"
_UNIT = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def parse_size(text: str) -> int | None:
    """Bytes of a size (the grammar above), or None where `text` is not one."""
    match = re.fullmatch(_SIZE, text.strip(), re.IGNORECASE)
    if match is None:
        return None
    return int(match[1]) * _UNIT[(match[2] or "").lower()]


_LOOSE_VERSION = r"([0-9]+)(?:\.([0-9]+))?(?:\.([0-9]+))?"


def loose_version(text: str | None) -> tuple[int, int, int] | None:
    """(major, minor, patch) of a loose version (the grammar above), missing parts 0; None where it starts with none."""
    if not text:
        return None
    match = re.match(_LOOSE_VERSION, text.strip())
    if match is None:
        return None
    return int(match[1]), int(match[2] or 0), int(match[3] or 0)


PACKAGE_NAME = {
    "dpkg": re.compile(r"[a-z0-9][a-z0-9+.-]+"),
    "rpm": re.compile(r"[A-Za-z0-9_][A-Za-z0-9._+-]*"),
    "pip": re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?"),
}
