"""_job/store.py against jaxlib's real coordination service and client (jax 0.10.2, this checkout), in a child
process: the listing it falls back on reads the real client's keys, and processes that published count however
little of the deadline is left when their turn comes."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.support.cluster import free_port
from tests.support.environment import REPO
from tests.support.snippets import clean_env

READS = """
import json, os, sys, time
try:
    from jax._src.lib import _jax as xla
except ImportError:
    from jax._src.lib import xla_extension as xla
from jax_rocm7_plugin._job.store import read_published

port = int(sys.argv[1])
service = xla.get_distributed_runtime_service(f"[::]:{port}", 1, heartbeat_timeout=60, shutdown_timeout=5)
client = xla.get_distributed_runtime_client(
    f"127.0.0.1:{port}", 0, init_timeout=20, heartbeat_timeout=60, shutdown_on_destruction=False
)
client.connect()
for process in (0, 2, 3):
    client.key_value_set(f"jax_rocm7/test/step/{process}", f"outcome {process}")
client.key_value_set("jax_rocm7/test/step/abort", "0")
client.key_value_set("jax_rocm7/test/step10/1", "another step")
began = time.monotonic()
waited = read_published(client, "jax_rocm7/test/step", range(4), began + 0.5)
waited_seconds = time.monotonic() - began
# Process 1 never publishes; each read below leaves process 2 and 3 a millisecond or nothing.
tight = [sorted(read_published(client, "jax_rocm7/test/step", range(4), time.monotonic() + 0.002)) for _ in range(50)]
passed = read_published(client, "jax_rocm7/test/step", range(4), time.monotonic() - 1)
print(json.dumps({"waited": waited, "seconds": waited_seconds, "tight": tight, "passed": passed}))
sys.stdout.flush()
os._exit(0)
"""


def test_real_client_reads_every_published_process_by_the_deadline() -> None:
    done = subprocess.run(
        [sys.executable, "-c", READS, str(free_port())],
        capture_output=True,
        text=True,
        timeout=120,
        env=clean_env(PYTHONPATH=str(REPO)),
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["waited"] == {"0": "outcome 0", "2": "outcome 2", "3": "outcome 3"}
    assert 0.45 <= result["seconds"] < 10  # process 1 was waited for until the deadline, not longer
    assert all(found == [0, 2, 3] for found in result["tight"]), result["tight"]
    assert sorted(result["passed"]) == ["0", "2", "3"]
