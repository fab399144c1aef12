"""Small real shared objects compiled with the system C compiler, for loader edge cases."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest


def compile_shared(
    directory: Path,
    name: str,
    source: str,
    *,
    libs: Sequence[str] = (),
    link_dirs: Sequence[Path] = (),
    flags: Sequence[str] = (),
    output_name: str | None = None,
) -> Path:
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("no C compiler")
    directory.mkdir(parents=True, exist_ok=True)
    c_file = directory / f"{name}.c"
    c_file.write_text(source)
    output = directory / (output_name or f"lib{name}.so")
    command = [compiler, "-shared", "-fPIC", "-o", str(output), str(c_file), f"-L{directory}"]
    command += [f"-L{d}" for d in link_dirs] + list(flags) + [f"-l{lib}" for lib in libs]
    subprocess.run(command, check=True, capture_output=True)
    return output


def library_needing(output: Path, sonames: Sequence[str], stubs: Path) -> Path:
    """An empty shared object at `output` whose NEEDED entries are `sonames` (test fixture: each linked against a
    stub of that soname made in `stubs`, which is no part of the machine)."""
    stubs.mkdir(parents=True, exist_ok=True)
    made = []
    for soname in sonames:
        stub = stubs / soname
        if not stub.exists():
            compile_shared(stubs, soname.split(".")[0].replace("-", "_"), "int stub_symbol(void) { return 0; }\n",
                           flags=[f"-Wl,-soname,{soname}"], output_name=soname)  # fmt: skip
        made.append(stub)
    output.parent.mkdir(parents=True, exist_ok=True)
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("no C compiler")
    source = output.parent / f".{output.name}.c"
    source.write_text("int placeholder(void) { return 0; }\n")
    command = [compiler, "-shared", "-fPIC", "-o", str(output), str(source), "-Wl,--no-as-needed", *map(str, made)]
    subprocess.run(command, check=True, capture_output=True)
    source.unlink()
    return output


def library_needing_missing_dependency(directory: Path) -> Path:
    """libneeds.so (PJRT-shaped: it exports GetPjrtApi) with NEEDED libgone.so, deleted after linking."""
    gone = compile_shared(directory, "gone", "int gone(void) { return 1; }\n")
    source = "int gone(void);\nint use(void) { return gone(); }\nvoid* GetPjrtApi(void) { return 0; }\n"
    needs = compile_shared(directory, "needs", source, libs=["gone"])
    gone.unlink()
    return needs


def pjrt_table_source(
    major: int = 0,
    minor: int = 81,
    *,
    api_size: int = 984,
    functions: str = "ok",
    initialize: str = "ok",
    attributes: str = "ok",
    extra: str = "",
    on_call: str = "",
) -> str:
    """C source of a library whose GetPjrtApi returns a PJRT_Api (test fixture).

    Every function slot holds `functions`: "ok" (returns no error), "0" (NULL) or a C expression
    (a wild address); `initialize` / `attributes` replace PJRT_Plugin_Initialize / _Attributes with a
    function `extra` defines; `on_call`: statements GetPjrtApi runs first. PJRT_Error_Message answers
    "no GPU today" for any error.
    """
    slots = min(max((api_size - 40) // 8, 1), 118)  # a struct_size past 984 claims slots it lacks
    value = "(void*)ok" if functions == "ok" else f"(void*)({functions})"
    overrides = "".join(
        f"    if ({slot} < {slots}) the_api.functions[{slot}] = (void*){name};\n"
        for slot, name in ((1, "message" if functions == "ok" else ""), (3, initialize), (4, attributes))
        if name and name != "ok"
    )
    return f"""
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <signal.h>
struct version {{ size_t struct_size; void* ext; int major; int minor; }};
struct message_args {{ size_t struct_size; void* ext; void* error; const char* message; size_t message_size; }};
static void* ok(void* args) {{ (void)args; return 0; }}
static void message(struct message_args* a) {{ a->message = "no GPU today"; a->message_size = strlen(a->message); }}
{extra}
struct api {{ size_t struct_size; void* ext; struct version v; void* functions[{slots}]; }};
static struct api the_api = {{ {api_size}, 0, {{ 24, 0, {major}, {minor} }}, {{ [0 ... {slots - 1}] = {value} }} }};
const struct api* GetPjrtApi(void) {{
    {on_call}
{overrides}    return &the_api;
}}
"""


def fake_pjrt_library(
    directory: Path, major: int, minor: int, *, api_size: int = 984, functions: str = "ok", name: str | None = None
) -> Path:
    """A library whose GetPjrtApi returns a PJRT_Api with the given version and size (test fixture)."""
    source = pjrt_table_source(major, minor, api_size=api_size, functions=functions)
    return compile_shared(directory, name or f"pjrt_{major}_{minor}_{api_size}", source)


# PJRT_Plugin_Initialize replacements for pjrt_table_source (test fixtures): name -> C definition.
PLUGIN_INITIALIZE_VARIANTS = {
    "failing": "static void* failing(void* a) { (void)a; return (void*)1; }",
    "aborting": "static void* aborting(void* a) { (void)a; abort(); }",
    "segfaulting": "static void* segfaulting(void* a) { (void)a; raise(SIGSEGV); return 0; }",
    "hanging": "static void* hanging(void* a) { (void)a; for (;;) pause(); }",
}


def pjrt_library_whose(directory: Path, function: str, variant: str) -> Path:
    """A PJRT-shaped library whose PJRT_Plugin_Initialize (or _Attributes) is one of the variants (test fixture)."""
    source = pjrt_table_source(extra=PLUGIN_INITIALIZE_VARIANTS[variant], **{function: variant})
    return compile_shared(directory, f"{function}_{variant}", source)


HIP_RUNTIME = "libamdhip64.so.7"


def fake_hip_runtime(directory: Path, *, devices: int, version: int = 70051831, name: str = HIP_RUNTIME) -> Path:
    """A library with HIP's probe entry points that reports `devices` GPUs and HIP_VERSION `version`."""
    source = f"""
static const char* names[] = {{"hipSuccess", "hipErrorNoDevice"}};
int hipInit(unsigned flags) {{ return {devices} ? 0 : 100; }}
int hipGetDeviceCount(int* n) {{ *n = {devices}; return {devices} ? 0 : 100; }}
int hipRuntimeGetVersion(int* v) {{ *v = {version}; return 0; }}
int hipDriverGetVersion(int* v) {{ *v = {version}; return 0; }}
const char* hipGetErrorName(int code) {{ return code == 0 ? names[0] : names[1]; }}
"""
    return compile_shared(directory, "hip", source, flags=[f"-Wl,-soname,{name}"], output_name=name)


def pjrt_library_with_code_for(
    directory: Path,
    fatbin: bytes,
    *,
    hip_dir: Path | None = None,
    runpath: Sequence[str] = ("/opt/rocm/lib",),
    extra_exports: Sequence[str] = (),
    needs: Sequence[str] = (),
    link_dirs: Sequence[Path] = (),
) -> Path:
    """A PJRT-shaped library (GetPjrtApi, C API 0.81) whose .hip_fatbin section holds `fatbin`.

    With `hip_dir`, it links against the libamdhip64.so.7 there (NEEDED), with RUNPATH /opt/rocm/lib.
    """
    array = ", ".join(str(b) for b in fatbin)
    extra = (
        f'__attribute__((section(".hip_fatbin"), used)) static const unsigned char fatbin[] = {{ {array} }};\n'
        "int hipInit(unsigned);\n"
    )
    source = pjrt_table_source(extra=extra, on_call="hipInit(0);" if hip_dir else "") + "".join(
        f"int {name}(void) {{ return 0; }}\n" for name in extra_exports
    )
    flags = ["-Wl,--enable-new-dtags", "-Wl,-rpath," + ":".join(runpath)] if hip_dir else []
    flags.append("-Wl,--no-as-needed")  # keep NEEDED entries whose symbols the stub does not use
    libs = ([f":{HIP_RUNTIME}"] if hip_dir else []) + [f":{name}" for name in needs]
    search = [*([hip_dir] if hip_dir else []), *link_dirs]
    return compile_shared(directory, "pjrt_gpu", source, libs=libs, link_dirs=search, flags=flags)
