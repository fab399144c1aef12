"""The first-jit child of `doctor --deep`: compile and run one small program on the 'rocm' backend.

Run as `python jit_child.py` (site-packages on: it imports jax, which loads our plugin the way a
user's program does) through the one child runner (`child.py`), with JAX_PLATFORMS=rocm so that a
backend that does not come up is an error, not a quiet fall back to CPU. Each step prints one JSON
line when it begins ({"stage": "begin", "step": ...}) and one when it is done -- imported, backend, put,
compiled, ran, memory -- so a hang or a crash names the step it happened in; an exception prints
{"stage": "error", "step": ..., "message": ...}.
"""

import json
import sys
import time
import traceback

SIZE = 256  # a 256x256 float32 matmul and a sum: every GPU compiles and runs it in well under a second


def say(stage: str, **fields: object) -> None:
    sys.stdout.write(json.dumps({"stage": stage, **fields}) + "\n")
    sys.stdout.flush()


def main() -> None:
    step = ""

    def begin(name: str) -> None:
        """Say which step starts, so a hang or a death names it; an error names it too."""
        nonlocal step
        step = name
        say("begin", step=name)

    begin("import jax")
    try:
        import jax
        import numpy as np

        say("imported", jax=jax.__version__)
        begin("start the rocm backend")
        devices = jax.devices("rocm")
        device = devices[0]
        say("backend", platform=device.platform, devices=[str(d) for d in devices], kind=device.device_kind)
        begin("device_put")
        host = np.linspace(-1.0, 1.0, SIZE * SIZE, dtype=np.float32).reshape(SIZE, SIZE)
        x = jax.device_put(host, device)
        x.block_until_ready()
        say("put", bytes=host.nbytes)
        begin("compile")
        start = time.perf_counter()
        compiled = jax.jit(lambda a: (a @ a.T).sum(axis=0)).lower(x).compile()
        say("compiled", seconds=time.perf_counter() - start)
        begin("run")
        start = time.perf_counter()
        result = np.asarray(compiled(x).block_until_ready())
        seconds = time.perf_counter() - start
        expected = (host.astype(np.float64) @ host.T.astype(np.float64)).sum(axis=0)
        error = float(np.max(np.abs(result - expected)))
        say("ran", seconds=seconds, max_abs_error=error, ok=bool(np.allclose(result, expected, rtol=1e-3, atol=1e-2)))
        begin("memory_stats")
        stats = device.memory_stats() or {}
        say("memory", stats={k: v for k, v in stats.items() if isinstance(v, int)})
    except BaseException as error:  # noqa: BLE001 - every failure is the answer, said as data
        lines = traceback.format_exception_only(type(error), error)
        say("error", step=step, type=type(error).__name__, message="".join(lines).strip()[-4000:])
    say("done")


if __name__ == "__main__":
    main()
