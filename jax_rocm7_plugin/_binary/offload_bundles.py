"""Which GPU targets a HIP binary carries: clang offload bundles in `.hip_fatbin`.

Two framings (LLVM's ClangOffloadBundler):
- plain: b"__CLANG_OFFLOAD_BUNDLE__", u64 entry count, then per entry
  u64 offset, u64 size, u64 id length, id bytes (e.g. "hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-").
- compressed: b"CCOB", u16 version, u16 method (0 zlib, 1 zstd), then
  v1: u32 uncompressed size, u64 hash;
  v2: u32 total size, u32 uncompressed size, u64 hash;
  v3: u64 total size, u64 uncompressed size, u64 hash;
  then the compressed plain bundle.

The entry table sits at the start of the uncompressed stream, so only its first
kilobytes are decompressed. Malformed input yields problems, never exceptions.
"""

from __future__ import annotations

import mmap
import re
import struct
import zlib
from dataclasses import dataclass, field
from pathlib import Path

PLAIN_MAGIC = b"__CLANG_OFFLOAD_BUNDLE__"
COMPRESSED_MAGIC = b"CCOB"
_METHOD_ZLIB, _METHOD_ZSTD = 0, 1
_MAX_ENTRIES = 4096
_MAX_ID_LENGTH = 1024
# Enough for any realistic entry table; grown on demand up to the stream's size.
_FIRST_READ = 16 * 1024
_MAGIC = re.compile(re.escape(PLAIN_MAGIC) + b"|" + re.escape(COMPRESSED_MAGIC))
_TARGET = re.compile(r"(gfx[0-9a-z]+(?:-[0-9a-z]+)*-generic|gfx[0-9a-f]+)")


@dataclass
class BundleScan:
    """Targets found (gfx names, host excluded), bundle counts, and what could not be read."""

    targets: set[str] = field(default_factory=set)
    entry_ids: list[str] = field(default_factory=list)
    plain_bundles: int = 0
    compressed_bundles: int = 0
    problems: list[str] = field(default_factory=list)


def target_of(entry_id: str) -> str | None:
    """gfx target of an entry id; None for the host entry. Feature flags (:xnack-) are dropped.

    Ids are `<kind>-<triple>-<target>`; newer clang writes the triple with an empty
    environment, hence `amdgcn-amd-amdhsa--gfx90a`, older clang `amdgcn-amd-amdhsa-gfx90a`.
    """
    _, triple, rest = entry_id.partition("amdgcn-amd-amdhsa-")
    if not triple:
        return None
    processor = rest.lstrip("-").split(":", 1)[0]
    match = _TARGET.fullmatch(processor)
    return match.group(0) if match else None


def parse_entry_table(data: bytes) -> tuple[list[str], bool]:
    """Entry ids of a plain bundle; the flag says whether `data` was too short to hold them all."""
    if not data.startswith(PLAIN_MAGIC):
        raise ValueError("not a clang offload bundle")
    pos = len(PLAIN_MAGIC)
    if len(data) < pos + 8:
        return [], True
    (count,) = struct.unpack_from("<Q", data, pos)
    if count > _MAX_ENTRIES:
        raise ValueError(f"implausible entry count {count}")
    pos += 8
    ids: list[str] = []
    for _ in range(count):
        if len(data) < pos + 24:
            return ids, True
        _offset, _size, id_length = struct.unpack_from("<QQQ", data, pos)
        pos += 24
        if id_length > _MAX_ID_LENGTH:
            raise ValueError(f"implausible entry id length {id_length}")
        if len(data) < pos + id_length:
            return ids, True
        ids.append(data[pos : pos + id_length].decode("ascii", errors="replace"))
        pos += id_length
    return ids, False


def _compressed_header(data: bytes | memoryview, pos: int) -> tuple[int, int, int, int] | None:
    """(method, header length, total size or 0 if unknown, uncompressed size) of a CCOB header."""
    if len(data) < pos + 8:
        return None
    version, method = struct.unpack_from("<HH", data, pos + 4)
    if method not in (_METHOD_ZLIB, _METHOD_ZSTD):
        return None
    if version == 1 and len(data) >= pos + 20:
        (uncompressed,) = struct.unpack_from("<I", data, pos + 8)
        return method, 20, 0, uncompressed
    if version == 2 and len(data) >= pos + 24:
        total, uncompressed = struct.unpack_from("<II", data, pos + 8)
        return method, 24, total, uncompressed
    if version == 3 and len(data) >= pos + 32:
        total, uncompressed = struct.unpack_from("<QQ", data, pos + 8)
        return method, 32, total, uncompressed
    return None


def _decompress_head(method: int, payload: memoryview, want: int) -> bytes:
    if method == _METHOD_ZSTD:
        import zstandard

        reader = zstandard.ZstdDecompressor().stream_reader(payload)
        try:
            return reader.read(want)
        finally:
            reader.close()
    return zlib.decompressobj().decompress(bytes(payload), want)


def _read_compressed(data: bytes | memoryview, pos: int, scan: BundleScan) -> int:
    """Decode the entry table of the CCOB at pos; return where to look for the next bundle."""
    header = _compressed_header(data, pos)
    if header is None:
        return pos + len(COMPRESSED_MAGIC)  # "CCOB" bytes that are not a header
    method, header_length, total, uncompressed = header
    end = pos + total if total else len(data)
    if total and (total < header_length or end > len(data)):
        scan.problems.append(f"compressed bundle at {pos:#x}: size {total} runs past the section")
        return pos + len(COMPRESSED_MAGIC)
    payload = memoryview(data)[pos + header_length : end]
    want = min(_FIRST_READ, uncompressed) if uncompressed else _FIRST_READ
    while True:
        try:
            head = _decompress_head(method, payload, want)
            ids, truncated = parse_entry_table(head)
        except Exception as error:  # noqa: BLE001 - corrupt streams raise many types
            scan.problems.append(f"compressed bundle at {pos:#x}: {error}")
            return end if total else pos + len(COMPRESSED_MAGIC)
        if not truncated or len(head) < want or (uncompressed and want >= uncompressed):
            break
        want *= 4
    scan.compressed_bundles += 1
    _record(scan, ids)
    if truncated:
        scan.problems.append(f"compressed bundle at {pos:#x}: entry table is truncated")
    return end if total else pos + header_length


def _read_plain(data: bytes | memoryview, pos: int, scan: BundleScan) -> int:
    try:
        ids, truncated = parse_entry_table(bytes(data[pos : pos + 1024 * 1024]))
    except ValueError as error:
        scan.problems.append(f"bundle at {pos:#x}: {error}")
        return pos + len(PLAIN_MAGIC)
    scan.plain_bundles += 1
    _record(scan, ids)
    if truncated:
        scan.problems.append(f"bundle at {pos:#x}: entry table is truncated")
    return pos + len(PLAIN_MAGIC)


def _record(scan: BundleScan, ids: list[str]) -> None:
    scan.entry_ids.extend(ids)
    scan.targets.update(t for t in map(target_of, ids) if t is not None)


def scan_bundles(data: bytes | memoryview) -> BundleScan:
    """Every offload bundle in `data` (a `.hip_fatbin` section, or any blob).

    One regex pass finds the next magic of either kind; compressed bundles that
    state their size are skipped whole, so a 55 MB section costs a few ms plus
    the decompression of each entry table.
    """
    scan = BundleScan()
    pos = 0
    while (match := _MAGIC.search(data, pos)) is not None:
        pos = match.start()
        pos = _read_plain(data, pos, scan) if match.group() == PLAIN_MAGIC else _read_compressed(data, pos, scan)
    return scan


def scan_library(path: Path, section_name: str = ".hip_fatbin") -> BundleScan | None:
    """The offload bundles of a shared object's fatbin section, read through a memory map.

    None when the object has no such section (a library without GPU code).
    Raises elf_dynamic.ElfError for a file that is not a readable ELF object.
    """
    from jax_rocm7_plugin._binary.elf_dynamic import SHT_NOBITS, read_dynamic

    section = read_dynamic(path, exports=False).sections.get(section_name)
    if section is None or section.size == 0 or section.type == SHT_NOBITS:
        return None
    return scan_file_range(path, section.offset, section.size)


def scan_file_range(path: Path, offset: int, size: int) -> BundleScan:
    """The offload bundles in bytes [offset, offset + size) of a file (a section whose place is known)."""
    with open(path, "rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
        view = memoryview(mapped)[offset : offset + size]
        try:
            return scan_bundles(view)
        finally:
            view.release()
