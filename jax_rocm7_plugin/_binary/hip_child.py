"""The HIP child of `doctor --deep`: start one HIP runtime and ask it what it sees.

Run as `python -I -S hip_child.py RUNTIME` through the one child runner (`child.py`); stdlib only.
It calls hipInit, hipGetDeviceCount, hipRuntimeGetVersion and hipDriverGetVersion, naming every
error with the runtime's own hipGetErrorName, and prints {"stage": "hip", ...} then
{"stage": "done"}: a runtime that aborts in hipInit leaves no "hip" line, and the parent says so.
"""

import ctypes
import json
import sys


def say(stage: str, **fields: object) -> None:
    sys.stdout.write(json.dumps({"stage": stage, **fields}) + "\n")
    sys.stdout.flush()


def version_text(encoded: int) -> str:
    """HIP_VERSION encoding: major*10,000,000 + minor*100,000 + patch (50221153 -> 5.2.21153)."""
    major, rest = divmod(encoded, 10_000_000)
    minor, patch = divmod(rest, 100_000)
    return f"{major}.{minor}.{patch}"


def main(runtime: str) -> None:
    try:
        hip = ctypes.CDLL(runtime)
    except OSError as error:
        say("hip", loaded=False, error=str(error))
        say("done")
        return
    hip.hipGetErrorName.restype = ctypes.c_char_p

    def name(code: int) -> str:
        return (hip.hipGetErrorName(code) or b"unknown").decode()

    result: dict[str, object] = {"loaded": True}
    code = hip.hipInit(0)
    result["init"] = {"code": code, "name": name(code)}
    count = ctypes.c_int(-1)
    code = hip.hipGetDeviceCount(ctypes.byref(count))
    result["device_count"] = {"code": code, "name": name(code), "value": count.value if code == 0 else 0}
    for key, function in (("runtime_version", hip.hipRuntimeGetVersion), ("driver_version", hip.hipDriverGetVersion)):
        version = ctypes.c_int(0)
        code = function(ctypes.byref(version))
        value = version.value
        result[key] = {"code": code, "name": name(code), "value": value, "text": version_text(value)}
    say("hip", **result)
    say("done")


if __name__ == "__main__":
    main(sys.argv[1])
