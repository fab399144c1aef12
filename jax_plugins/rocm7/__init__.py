"""The module jax discovers (entry point group `jax_plugins`): it only forwards.

Imports nothing at module level, so `import jax` pays nothing for this plugin until jax asks for
backends. It is also the last line of defence of a damaged install (a half-written or corrupt file
of our package): whatever importing the loader raises becomes one warning line naming the file and
the reinstall command, never a traceback from jax's plugin discovery. So this module relies on
the standard library only, and states the finding id it reports (the catalog's, checked by a test).
"""

DAMAGED_INSTALL = "plugin-install-damaged"
LOADER = "jax_rocm7_plugin._loader.register"  # a test keeps it equal to _names.PLUGIN_PACKAGE's loader
WARM = "jax_rocm7_plugin._loader.warm"  # the plan of the last start, where it still holds (no checks imported)
JOB_GATE = "jax_rocm7_plugin._loader.job_gate"  # a warm start in a job: the job check and the hang watcher


def initialize() -> None:
    import importlib

    try:
        warm = importlib.import_module(WARM)
        if warm.try_warm():
            if warm.job_plan is not None:
                importlib.import_module(JOB_GATE).from_plan(warm.job_plan)
            return
    except Exception:  # noqa: BLE001 - whatever went wrong, the loader checks everything and says it
        pass
    try:
        loader = importlib.import_module(LOADER)
    except Exception as error:  # noqa: BLE001 - jax would print a traceback for any of it
        _report_damaged(error, LOADER)
        return
    loader.initialize()


def damaged_install(error: BaseException, fallback_package: str) -> tuple[str, str]:
    """(what is broken, how to fix it) for an exception raised while importing our package."""
    import os
    import sys
    import traceback

    path = getattr(error, "filename", None) or getattr(error, "path", None)
    if not path and isinstance(error, ImportError) and error.name:
        path = error.name  # a module that is not there at all (a half-written install)
    if not path:
        frames = [f for f in traceback.extract_tb(error.__traceback__) if not f.filename.startswith("<")]
        # A file that does not compile at all (null bytes) names no file: the import line that met it does.
        words = (frames[-1].line or "").split() if frames else []
        if words[:1] in (["from"], ["import"]) and len(words) > 1:
            import importlib.util

            try:
                spec = importlib.util.find_spec(words[1])
                path = spec.origin if spec is not None else words[1]
            except Exception:  # noqa: BLE001 - its parent may be what is broken
                path = words[1]
        elif frames:
            path = frames[-1].filename
    path = str(path or "an unknown file")
    # The top-level package holding the file names the distribution to reinstall: relative to the
    # innermost sys.path entry holding it (a script's folder may hold the venv, say).
    holders = [os.path.abspath(e) for e in sys.path if e and path.startswith(os.path.join(os.path.abspath(e), ""))]
    package = os.path.relpath(path, max(holders, key=len)).split(os.sep)[0] if holders else None
    distribution = (package or fallback_package.split(".")[0]).replace("_", "-")
    try:
        from importlib.metadata import version

        pinned = f"{distribution}=={version(distribution)}"
    except Exception:  # noqa: BLE001 - its metadata may be what is missing
        pinned = distribution
    what = f"{distribution} is damaged: importing {path} fails ({type(error).__name__}: {error})"
    return what, f"reinstall it: pip install --force-reinstall --no-deps {pinned}"


def _report_damaged(error: BaseException, fallback_package: str) -> None:
    import logging

    what, fix = damaged_install(error, fallback_package)
    # The loader's logger and line format, so tools that read the loader's warning read this one too.
    logging.getLogger(LOADER.split(".")[0]).warning(
        "ROCm backend unavailable, jax falls back to CPU: %s; %s [%s]", what, fix, DAMAGED_INSTALL
    )
