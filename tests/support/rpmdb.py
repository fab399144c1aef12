"""A stand-in for rpm's SQLite database (test fixture, never shipped): the `Packages` and `Name` tables of rpm's
sqlite backend, each package a header in rpm's documented format (a big-endian count of index entries and the
data's length, then entries of tag, type, offset and count, then the data, each value aligned to its size)."""

from __future__ import annotations

import sqlite3
import struct
from pathlib import Path

CHAR, INT16, INT32, INT64, STRING, STRING_ARRAY = 1, 3, 4, 5, 6, 8
_CODES = {CHAR: ("b", 1), INT16: ("H", 2), INT32: ("I", 4), INT64: ("Q", 8)}  # rpm: unsigned but a state


def header(tags: dict[int, tuple[int, object]]) -> bytes:
    """One header blob from {tag: (type, value)}: numbers as tuples, strings as str, string arrays as tuples."""
    entries, data = [], b""
    for tag in sorted(tags):
        kind, value = tags[tag]
        if kind in _CODES:
            code, size = _CODES[kind]
            data += b"\0" * (-len(data) % size)
            items = tuple(value)  # type: ignore[call-overload]
            entries.append((tag, kind, len(data), len(items)))
            data += struct.pack(f">{len(items)}{code}", *items)
        elif kind == STRING:
            entries.append((tag, kind, len(data), 1))
            data += str(value).encode() + b"\0"
        else:
            words = tuple(value)  # type: ignore[call-overload]
            entries.append((tag, kind, len(data), len(words)))
            data += b"".join(w.encode() + b"\0" for w in words)
    index = b"".join(struct.pack(">iiii", *e) for e in entries)
    return struct.pack(">ii", len(entries), len(data)) + index + data


def write(path: Path, packages: dict[str, bytes]) -> None:
    """rpmdb.sqlite with each package's header and its name in the Name index (rpm's sqlite backend's tables)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE Packages (hnum INTEGER PRIMARY KEY AUTOINCREMENT, blob BLOB NOT NULL)")
        db.execute("CREATE TABLE Name (key TEXT NOT NULL, hnum INTEGER NOT NULL, idx INTEGER NOT NULL)")
        for name, blob in packages.items():
            number = db.execute("INSERT INTO Packages (blob) VALUES (?)", (blob,)).lastrowid
            db.execute("INSERT INTO Name VALUES (?, ?, 0)", (name, number))
    db.close()


def package(name: str, version: str, files: list[tuple[str, bytes, int, int, int]]) -> bytes:
    """A package's header with its files as (path, content, mode, flags, state): digests in SHA-256 (algorithm 8),
    the paths split into DIRNAMES, DIRINDEXES and BASENAMES as rpm stores them."""
    import hashlib

    dirs: list[str] = []
    indexes, bases = [], []
    for path, *_ in files:
        folder, _, base = path.rpartition("/")
        if folder + "/" not in dirs:
            dirs.append(folder + "/")
        indexes.append(dirs.index(folder + "/"))
        bases.append(base)
    return header(
        {
            1000: (STRING, name),
            1001: (STRING, version.split("-")[0]),
            1002: (STRING, version.split("-")[1]),
            1028: (INT32, tuple(len(f[1]) for f in files)),
            1029: (CHAR, tuple(f[4] for f in files)),  # FILESTATES (a char array): 0 normal, 2 not installed
            1030: (INT16, tuple(f[2] for f in files)),
            1035: (STRING_ARRAY, tuple(hashlib.sha256(f[1]).hexdigest() for f in files)),
            1037: (INT32, tuple(f[3] for f in files)),
            1116: (INT32, tuple(indexes)),
            1117: (STRING_ARRAY, tuple(bases)),
            1118: (STRING_ARRAY, tuple(dirs)),
            5011: (INT32, (8,)),
        }
    )
