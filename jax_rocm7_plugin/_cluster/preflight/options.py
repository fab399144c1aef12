"""What the preflight is asked (its options) and the deadlines its phases share."""

from __future__ import annotations

from pathlib import Path

from jax_rocm7_plugin._record import NamedTuple

DEFAULT_TIMEOUT = 60.0
DEFAULT_STEP_TIMEOUT = 60.0  # --deep: each step's deadline (the 256 MiB collectives over sockets take seconds)
KILL_GRACE_SECONDS = 2.0


class Options(NamedTuple):
    coordinator: str | None = None
    num_processes: int | None = None
    process_id: int | None = None
    local_device_ids: tuple[int, ...] | None = None
    timeout: float = DEFAULT_TIMEOUT
    json: bool = False
    verbose: bool = False
    sysroot: Path | None = None
    library: Path | None = None
    deep: bool = False  # then run the job's collectives for real (_cluster/deep.py)
    sizes: tuple[int, ...] = ()  # --deep's message sizes (collectives.DEFAULT_SIZES where empty)
    platform: str = "rocm"  # --deep's backend; "cpu" runs the same steps over gloo
    step_timeout: float = DEFAULT_STEP_TIMEOUT
    html: Path | None = None  # process 0 writes the report as a page there (_pages/cluster.py)
    trace: Path | None = None  # --deep: process 0 writes the steps as Chrome trace-event JSON there
    force: bool = False  # replace those files

    @property
    def deep_on_cpu(self) -> bool:
        """`--deep --platform cpu`: the job's collectives on jax's CPU backend (gloo), no ROCm backend needed."""
        return self.deep and self.platform == "cpu"


class Here(NamedTuple):
    """Who says a failure: this process (its id where known) on this host, and the options' timeout it waited."""

    process_id: int | None
    host: str
    timeout: float
