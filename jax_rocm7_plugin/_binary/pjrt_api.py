"""The one reader of a PJRT plugin's `PJRT_Api` table (pjrt_c_api.h), and what its answers mean.

`GetPjrtApi()` returns a `PJRT_Api*`. On LP64 its layout begins

    size_t struct_size; PJRT_Extension_Base* extension_start;
    PJRT_Api_Version pjrt_api_version;   // {size_t struct_size; void* ext; int major; int minor;}

(40 bytes), followed by one function pointer per 8 bytes up to `struct_size`, in the header's
order: PJRT_Error_Destroy, PJRT_Error_Message, PJRT_Error_GetCode, PJRT_Plugin_Initialize,
PJRT_Plugin_Attributes, ... jaxlib may call any of them, so every one must be set and point into
the library's own code; the first five are what jaxlib calls before any client exists.

Only the load child (`load_child.py`, run as `python -I -S`) reads a live table: it imports this
file by path, so this module uses the standard library only and imports nothing of ours. The
parent uses the pure functions on what the child reported.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import NamedTuple

HEADER = struct.Struct("<QQQQii")  # PJRT_Api head, up to and including the version
FUNCTIONS_OFFSET = HEADER.size
VERSION_BLOCK_SIZE = 24  # sizeof(PJRT_Api_Version)
MAX_API_SIZE = 64 * 1024  # PJRT C API 0.81 is 984 bytes; a larger size is garbage, not a newer API
# The first slots of the function table, by name (pjrt_c_api.h); later ones are named by index.
FIRST_FUNCTIONS = (
    "PJRT_Error_Destroy",
    "PJRT_Error_Message",
    "PJRT_Error_GetCode",
    "PJRT_Plugin_Initialize",
    "PJRT_Plugin_Attributes",
)
ERROR_DESTROY, ERROR_MESSAGE, _ERROR_GET_CODE, PLUGIN_INITIALIZE, PLUGIN_ATTRIBUTES = range(5)
# PJRT_Extension_Base: {size_t struct_size; PJRT_Extension_Type type; (pad); PJRT_Extension_Base* next;}
EXTENSION_NODE = struct.Struct("<QiiQ")
MAX_EXTENSIONS = 64
# PJRT_Extension_Type values that jaxlib's GPU plugin extension needs.
EXTENSION_GPU_CUSTOM_CALL = 0  # register_custom_call_target
EXTENSION_FFI = 5  # register_custom_type

_MISSING_DEPENDENCY = r"([^\s:]+\.so[.\d]*): cannot open shared object file"


class CApiVersion(NamedTuple):
    major: int
    minor: int

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"


class ApiTable(NamedTuple):
    """What a live PJRT_Api table holds (read in the child; JSON-able)."""

    api_size: int
    version_size: int
    major: int
    minor: int
    extensions: tuple[int, ...]
    functions: tuple[int, ...]  # the function pointers, in slot order (empty when the head is not a PJRT_Api)


def function_name(slot: int) -> str:
    return FIRST_FUNCTIONS[slot] if slot < len(FIRST_FUNCTIONS) else f"function slot {slot}"


def missing_dependency(message: str, library_name: str) -> str | None:
    """The dependency a dlopen error message names as not found (not the library itself)."""
    import re

    match = re.search(_MISSING_DEPENDENCY, message)
    return match.group(1) if match and match.group(1) != library_name else None


def header_problem(api_size: int, version_size: int) -> str | None:
    if api_size < HEADER.size or version_size < VERSION_BLOCK_SIZE or api_size > MAX_API_SIZE:
        return (
            f"the table it returns is {api_size} bytes with a version block of "
            f"{version_size} bytes; that is not a PJRT_Api"
        )
    return None


def function_problem(functions: Sequence[int], executable: Sequence[tuple[int, int]]) -> str | None:
    """Which function pointers jaxlib would crash on: NULL, or outside the library's executable mappings."""
    null = [slot for slot, address in enumerate(functions) if address == 0]
    stray = [
        slot
        for slot, address in enumerate(functions)
        if address and not any(start <= address < end for start, end in executable)
    ]
    if not null and not stray:
        return None
    parts = []
    for slots, what in ((null, "NULL"), (stray, "outside the library's code")):
        if slots:
            named = ", ".join(function_name(slot) for slot in slots[:3]) + (", ..." if len(slots) > 3 else "")
            parts.append(f"{len(slots)} {what} ({named})")
    return f"its PJRT_Api has function pointers that are {' and '.join(parts)}; jaxlib would crash calling them"


# ------------------------------------------------------------------ used in the load child only


def read_table(address: int) -> ApiTable:
    """Read the PJRT_Api at `address` (may crash the process on a wild address: the child's job)."""
    import ctypes

    head = ctypes.string_at(address, HEADER.size)
    api_size, extension, version_size, _version_ext, major, minor = HEADER.unpack(head)
    extensions = []
    node = extension
    for _ in range(MAX_EXTENSIONS):
        if not node:
            break
        node_size, kind, _pad, node = EXTENSION_NODE.unpack(ctypes.string_at(node, EXTENSION_NODE.size))
        if node_size < EXTENSION_NODE.size:
            break
        extensions.append(kind)
    functions: tuple[int, ...] = ()
    if header_problem(api_size, version_size) is None:
        count = (api_size - FUNCTIONS_OFFSET) // 8
        functions = struct.unpack(f"<{count}Q", ctypes.string_at(address + FUNCTIONS_OFFSET, count * 8))
    return ApiTable(api_size, version_size, major, minor, tuple(extensions), functions)


def executable_ranges(library_path: str, maps_text: str) -> list[tuple[int, int]]:
    """The address ranges mapped executable from this file (/proc/self/maps' text)."""
    ranges = []
    for line in maps_text.splitlines():
        fields = line.split(None, 5)
        if len(fields) == 6 and "x" in fields[1] and fields[5] == library_path:
            start, _, end = fields[0].partition("-")
            ranges.append((int(start, 16), int(end, 16)))
    return ranges


def call_plugin_function(table: ApiTable, slot: int) -> tuple[str | None, int]:
    """Call PJRT_Plugin_Initialize or PJRT_Plugin_Attributes as jaxlib does: (its error message, attribute count)."""
    import ctypes

    class _PluginArgs(ctypes.Structure):  # PJRT_Plugin_Initialize_Args / PJRT_Plugin_Attributes_Args
        _fields_ = (
            ("struct_size", ctypes.c_size_t),
            ("extension_start", ctypes.c_void_p),
            ("attributes", ctypes.c_void_p),
            ("num_attributes", ctypes.c_size_t),
        )

    class _ErrorMessageArgs(ctypes.Structure):  # PJRT_Error_Message_Args
        _fields_ = (
            ("struct_size", ctypes.c_size_t),
            ("extension_start", ctypes.c_void_p),
            ("error", ctypes.c_void_p),
            ("message", ctypes.c_void_p),
            ("message_size", ctypes.c_size_t),
        )

    call = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)  # PJRT_Error* f(Args*)
    args = _PluginArgs(struct_size=16 if slot == PLUGIN_INITIALIZE else 32)  # each Args struct to its last field
    error = call(table.functions[slot])(ctypes.addressof(args))
    if not error:
        return None, int(args.num_attributes)
    message = _ErrorMessageArgs(struct_size=ctypes.sizeof(_ErrorMessageArgs), error=error)
    ctypes.CFUNCTYPE(None, ctypes.c_void_p)(table.functions[ERROR_MESSAGE])(ctypes.addressof(message))
    text = ctypes.string_at(message.message, message.message_size).decode("utf-8", "replace") if message.message else ""
    destroy = _ErrorMessageArgs(struct_size=24, error=error)  # PJRT_Error_Destroy_Args: size, ext, error
    ctypes.CFUNCTYPE(None, ctypes.c_void_p)(table.functions[ERROR_DESTROY])(ctypes.addressof(destroy))
    return text or "an error without a message", 0
