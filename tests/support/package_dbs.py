"""Test fixtures, never shipped: package databases in their documented on-disk formats, for the doctor's search of
ROCm that the loader does not see.

- dpkg: /var/lib/dpkg/info/PACKAGE:ARCH.list, one installed path a line (dpkg(1), "FILES");
- rpm >= 4.16: /var/lib/rpm/rpmdb.sqlite, table Packages(hnum, blob), each blob a package header: two big-endian
  int32s (index entries, data bytes), 16-byte entries (tag, type, offset, count), then the data store (rpm's
  lib/header.c and its file format documentation; tags from rpmtag.h: NAME 1000, DIRINDEXES 1116, BASENAMES 1117,
  DIRNAMES 1118, and the immutable region 63 that opens every real header).
"""

from __future__ import annotations

import sqlite3
import struct
from collections.abc import Mapping, Sequence
from pathlib import Path


def write_dpkg_list(root: Path, package: str, paths: Sequence[str], arch: str = "amd64") -> Path:
    listing = root / "var" / "lib" / "dpkg" / "info" / f"{package}:{arch}.list"
    listing.parent.mkdir(parents=True, exist_ok=True)
    folders = sorted({str(Path(p).parent) for p in paths})
    listing.write_text("/.\n" + "".join(f"{f}\n" for f in folders) + "".join(f"{p}\n" for p in paths))
    return listing


def rpm_header_blob(name: str, files: Sequence[str]) -> bytes:
    """A package header as rpm stores it in rpmdb.sqlite: NAME, VERSION, the file list split into DIRNAMES,
    BASENAMES and DIRINDEXES, after an immutable-region entry (tag 63, type BIN) as in every real header."""
    dirs: list[str] = []
    indexes, bases = [], []
    for path in files:
        folder, _, base = path.rpartition("/")
        folder += "/"
        if folder not in dirs:
            dirs.append(folder)
        indexes.append(dirs.index(folder))
        bases.append(base)
    entries: list[tuple[int, int, bytes, int]] = [
        (1000, 6, name.encode() + b"\0", 1),
        (1001, 6, b"7.14.0\0", 1),
        (1116, 4, struct.pack(f">{len(indexes)}i", *indexes), len(indexes)),
        (1117, 8, b"".join(b.encode() + b"\0" for b in bases), len(bases)),
        (1118, 8, b"".join(d.encode() + b"\0" for d in dirs), len(dirs)),
    ]
    store = bytearray()
    index = bytearray()
    for tag, kind, data, count in entries:
        if kind == 4:
            store += b"\0" * (-len(store) % 4)  # int32 data aligned, as rpm writes it
        index += struct.pack(">iiii", tag, kind, len(store), count)
        store += data
    region = struct.pack(">iiii", 63, 7, len(store), 16)  # its trailer would sit at that offset: not read here
    store += struct.pack(">iiii", 63, 7, -16 * (len(entries) + 1), 16)
    return struct.pack(">ii", len(entries) + 1, len(store)) + region + bytes(index) + bytes(store)


def write_rpmdb(root: Path, packages: Mapping[str, Sequence[str]]) -> Path:
    database = root / "var" / "lib" / "rpm" / "rpmdb.sqlite"
    database.parent.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(database) as connection:
        connection.execute("CREATE TABLE Packages (hnum INTEGER PRIMARY KEY AUTOINCREMENT, blob BLOB NOT NULL)")
        for name, files in packages.items():
            connection.execute("INSERT INTO Packages (blob) VALUES (?)", (rpm_header_blob(name, files),))
    connection.close()
    return database
