"""Read the PJRT C API version a plugin library was built with.

`GetPjrtApi()` returns a `PJRT_Api*` (pjrt_c_api.h). Its layout begins:

    size_t struct_size; PJRT_Extension_Base* extension_start;
    PJRT_Api_Version pjrt_api_version;   // {size_t struct_size; void* ext; int major; int minor;}

so the major and minor sit at byte offsets 32 and 36 on LP64. Calling
`GetPjrtApi` creates no client and touches no device; jax calls it anyway when
it registers the plugin, and dlopen hands both callers the same handle.
"""

from __future__ import annotations

import ctypes
import re
import struct
from dataclasses import dataclass
from pathlib import Path

_HEADER = struct.Struct("<QQQQii")  # PJRT_Api head, up to and including the version
# PJRT_Extension_Type values (pjrt_c_api.h) that jaxlib's GPU plugin extension needs.
EXTENSION_GPU_CUSTOM_CALL = 0  # register_custom_call_target
EXTENSION_FFI = 5  # register_custom_type

_MISSING_DEPENDENCY = re.compile(r"([^\s:]+\.so[.\d]*): cannot open shared object file")


@dataclass(frozen=True)
class CApiVersion:
    major: int
    minor: int

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"


class LibraryLoadError(Exception):
    """dlopen failed; `missing` names the dependency the dynamic loader did not find."""

    def __init__(self, message: str, missing: str | None) -> None:
        super().__init__(message)
        self.missing = missing


class NotAPjrtPlugin(Exception):
    """The library loaded but does not behave like a PJRT C-API plugin."""


def missing_dependency(message: str, path: Path) -> str | None:
    """The dependency a dlopen error message names as not found (not the library itself)."""
    match = _MISSING_DEPENDENCY.search(message)
    return match.group(1) if match and match.group(1) != path.name else None


def header_problem(api_size: int, version_size: int) -> str | None:
    if api_size < _HEADER.size or version_size < 24:
        return (
            f"GetPjrtApi() returned a struct of {api_size} bytes with a version block of "
            f"{version_size} bytes; that is not a PJRT_Api"
        )
    return None


def load_library(path: Path) -> ctypes.CDLL:
    try:
        return ctypes.CDLL(str(path))
    except OSError as error:
        message = str(error)
        raise LibraryLoadError(message, missing_dependency(message, path)) from None


def read_c_api_version(library: ctypes.CDLL) -> CApiVersion:
    try:
        get_api = library.GetPjrtApi
    except AttributeError:
        raise NotAPjrtPlugin("it does not export GetPjrtApi") from None
    get_api.restype = ctypes.c_void_p
    get_api.argtypes = []
    api = get_api()
    if not api:
        raise NotAPjrtPlugin("GetPjrtApi() returned NULL")
    api_size, _ext, version_size, _vext, major, minor = _HEADER.unpack(ctypes.string_at(api, _HEADER.size))
    problem = header_problem(api_size, version_size)
    if problem is not None:
        raise NotAPjrtPlugin(problem)
    return CApiVersion(major, minor)
