"""The load child: dlopen one shared object and, for a PJRT plugin, do what jaxlib does first.

Run as `python -I -S load_child.py LIBRARY KIND ENTRY_SYMBOL [PRELOADED...]` by `load_test` through the one
child runner (`child.py`); stdlib only, plus `pjrt_api.py` imported by path (it imports nothing of
ours). Each stage prints one JSON line as soon as it is known, so a death in a later stage still
leaves what the earlier ones learned and names the stage it died in:

    {"stage": "loaded"} / {"stage": "load-failed", "error": ...}
    {"stage": "api", "api": "missing" | "null" | "called"}
    {"stage": "table", ...ApiTable fields..., "problem": ...}
    {"stage": "PJRT_Plugin_Initialize", "error": ...}, {"stage": "PJRT_Plugin_Attributes", ...}
    {"stage": "done"}   (after every answer: a child without it died or was stopped)
"""

import contextlib
import ctypes
import importlib.util
import json
import os
import sys


def say(stage: str, **fields: object) -> None:
    sys.stdout.write(json.dumps({"stage": stage, **fields}) + "\n")
    sys.stdout.flush()


def load_reader():  # the module object of pjrt_api.py beside this file
    spec = importlib.util.spec_from_file_location("pjrt_api", os.path.join(os.path.dirname(__file__), "pjrt_api.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(library_path: str, kind: str, entry_symbol: str, preloaded: list[str]) -> None:
    for path in preloaded:  # what the parent holds already (ROCm from pip preloads its libraries)
        with contextlib.suppress(OSError):
            ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
    try:
        library = ctypes.CDLL(library_path)
    except OSError as error:
        say("load-failed", error=str(error))
        return
    say("loaded")
    if kind != "pjrt":
        return
    pjrt_api = load_reader()
    try:
        get_api = getattr(library, entry_symbol)
    except AttributeError:
        say("api", api="missing")
        return
    get_api.restype = ctypes.c_void_p
    get_api.argtypes = []
    say("api", api="called")
    address = get_api()
    if not address:
        say("api", api="null")
        return
    table = pjrt_api.read_table(address)
    with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
        executable = pjrt_api.executable_ranges(os.path.realpath(library_path), maps.read())
    problem = pjrt_api.header_problem(table.api_size, table.version_size) or pjrt_api.function_problem(
        table.functions, executable
    )
    fields = {key: value for key, value in table._asdict().items() if key != "functions"}
    say("table", problem=problem, functions=len(table.functions), **fields)
    if problem is not None:
        return  # jaxlib would crash on it; calling it here teaches nothing more
    for slot in (pjrt_api.PLUGIN_INITIALIZE, pjrt_api.PLUGIN_ATTRIBUTES):
        name = pjrt_api.function_name(slot)
        say("calling", function=name)
        error, attributes = pjrt_api.call_plugin_function(table, slot)
        say(name, error=error, attributes=attributes)
        if error is not None:
            return


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:])
    say("done")  # whichever way main returned: the child ran to its end (a death never gets here)
