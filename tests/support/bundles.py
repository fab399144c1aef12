"""Clang offload bundles in LLVM's documented layouts (plain, and CCOB-compressed v1-v3)."""

from __future__ import annotations

import struct
import zlib

import zstandard


def plain_bundle(ids: list[str], payload: bytes = b"\0" * 64) -> bytes:
    """A clang offload bundle in LLVM's documented layout."""
    table = b"__CLANG_OFFLOAD_BUNDLE__" + struct.pack("<Q", len(ids))
    header_size = len(table) + sum(24 + len(i) for i in ids)
    entries = b""
    for n, entry_id in enumerate(ids):
        entries += struct.pack("<QQQ", header_size + n * len(payload), len(payload), len(entry_id))
        entries += entry_id.encode()
    return table + entries + payload * len(ids)


def compressed_bundle(plain: bytes, version: int, method: int = 1) -> bytes:
    body = zstandard.ZstdCompressor().compress(plain) if method == 1 else zlib.compress(plain)
    if version == 1:
        header = b"CCOB" + struct.pack("<HHIQ", 1, method, len(plain), 0)
    elif version == 2:
        header = b"CCOB" + struct.pack("<HHIIQ", 2, method, 24 + len(body), len(plain), 0)
    else:
        header = b"CCOB" + struct.pack("<HHQQQ", 3, method, 32 + len(body), len(plain), 0)
    return header + body
