"""On a real AMD GPU host with ROCm 7 and the pair installed (`pytest -m rocm`); skipped elsewhere."""

from __future__ import annotations

import subprocess
import sys

import pytest


def run(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_rocm_devices_listed() -> None:
    out = run("import jax; print(jax.devices(), jax.default_backend())")
    assert "RocmDevice(id=0)" in out
    assert out.strip().endswith("gpu")


def test_jitted_matmul_matches_numpy() -> None:
    run(
        "import jax, jax.numpy as jnp, numpy as np\n"
        "x = np.random.default_rng(0).standard_normal((256, 256), dtype=np.float32)\n"
        "y = jax.jit(lambda a: a @ a.T)(jax.device_put(x, jax.devices('rocm')[0]))\n"
        "np.testing.assert_allclose(np.asarray(y), x @ x.T, rtol=1e-3, atol=1e-3)\n"
    )


# The device jax gives for 'rocm' is a ROCm device, not whatever was registered under that name: a stand-in library
# registered as 'rocm' (the CPU plugin in this project's tests) has platform 'cpu' and a version without "rocm".
IS_ROCM = (
    "gpu = jax.devices('rocm')[0]\n"
    "assert gpu.platform == 'rocm' and 'rocm' in gpu.client.platform_version.lower(), "
    "(gpu.platform, gpu.client.platform_version)\n"
)


def test_rocm_version_reported() -> None:
    # Through the device's client: `import jax` alone imports no jax.extend (jax 0.10.2 to 0.12.0).
    out = run("import jax\n" + IS_ROCM + "print(gpu.client.platform_version)\n")
    assert "rocm" in out.lower()


def test_doctor_says_ok() -> None:
    done = subprocess.run([sys.executable, "-m", "jax_rocm7_plugin", "doctor"], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout


# What the extension modules give, each checked against the CPU result (the plugin wheel must carry them).
ON_BOTH = """
import jax, jax.numpy as jnp, numpy as np
gpu, cpu = jax.devices("rocm")[0], jax.devices("cpu")[0]
def both(f, *args):
    on_gpu = jax.jit(f)(*[jax.device_put(a, gpu) for a in args])
    on_cpu = jax.jit(f)(*[jax.device_put(a, cpu) for a in args])
    assert all(list(x.devices())[0] == gpu for x in jax.tree.leaves(on_gpu))
    return on_gpu, on_cpu
rng = np.random.default_rng(0)
a = rng.standard_normal((64, 64)).astype(np.float32)
spd = a @ a.T + 64 * np.eye(64, dtype=np.float32)
b = rng.standard_normal((64, 3)).astype(np.float32)
"""


@pytest.mark.parametrize(
    "check",
    [
        "g, c = both(jnp.linalg.solve, a, b); np.testing.assert_allclose(g, c, rtol=1e-3, atol=1e-3)",
        "g, c = both(lambda m: jnp.linalg.eigh(m)[0], spd); np.testing.assert_allclose(g, c, rtol=1e-3, atol=1e-2)",
        "g, c = both(lambda m: jnp.linalg.svd(m, compute_uv=False), a); np.testing.assert_allclose(g, c, rtol=1e-3)",
        "g, c = both(lambda m: jnp.abs(jnp.linalg.qr(m)[1]), a); np.testing.assert_allclose(g, c, atol=1e-3)",
        "g, c = both(jnp.linalg.cholesky, spd); np.testing.assert_allclose(g, c, rtol=1e-3, atol=1e-3)",
    ],
    ids=["solve", "eigh", "svd", "qr", "cholesky"],
)
def test_linear_algebra_on_the_gpu_matches_the_cpu(check: str) -> None:
    run(ON_BOTH + check + "\n")


def test_bcoo_sparse_matmul_matches_the_cpu() -> None:
    run(
        ON_BOTH + "from jax.experimental import sparse\n"
        "matrix = sparse.BCOO.fromdense(np.where(np.abs(a) > 1.0, a, 0).astype(np.float32))\n"
        "g, c = both(lambda m, v: m @ v, matrix, b)\n"
        "np.testing.assert_allclose(g, c, rtol=1e-4, atol=1e-4)\n"
    )


def test_gpu_prng_kernel_matches_the_cpu() -> None:
    run(
        ON_BOTH + "key = jax.random.key(7, impl='threefry2x32')\n"
        "g, c = both(lambda k: jax.random.uniform(k, (1024,)), key)\n"
        "np.testing.assert_array_equal(np.asarray(g), np.asarray(c))\n"
    )


def test_miopen_rnn_matches_the_reference_lstm() -> None:
    run(
        ON_BOTH + "from jax.experimental import rnn\n"
        "batch, seq, size, hidden, layers = 2, 5, 8, 16, 1\n"
        "x = rng.standard_normal((batch, seq, size)).astype(np.float32)\n"
        "h0 = np.zeros((layers, batch, hidden), np.float32); c0 = np.zeros_like(h0)\n"
        "w = rng.standard_normal(rnn.get_num_params_in_lstm(size, hidden, layers, False)).astype(np.float32) * 0.1\n"
        "lengths = np.full((batch,), seq, np.int32)\n"
        "shape = dict(input_size=size, hidden_size=hidden, num_layers=layers, dropout=0.0, bidirectional=False)\n"
        "args = [jax.device_put(t, gpu) for t in (x, h0, c0, w, lengths)]\n"
        "on_gpu = jax.jit(lambda *t: rnn.lstm(*t, **shape)[0])(*args)\n"
        "w_ih, w_hh, b_ih, b_hh = rnn.unpack_lstm_weights(w, size, hidden, layers, False)\n"
        "with jax.default_device(cpu):\n"
        "    reference = rnn.lstm_ref(x, h0, c0, w_ih, w_hh, b_ih, b_hh, lengths, **shape)[0]\n"
        "np.testing.assert_allclose(np.asarray(on_gpu), np.asarray(reference), rtol=1e-3, atol=1e-3)\n"
    )


def test_small_pallas_kernel_matches_the_cpu() -> None:
    run(
        ON_BOTH + "from jax.experimental import pallas as pl\n"
        "def kernel(x_ref, y_ref, o_ref):\n"
        "    o_ref[...] = x_ref[...] * 2.0 + y_ref[...]\n"
        "x = rng.standard_normal((8, 128)).astype(np.float32); y = rng.standard_normal((8, 128)).astype(np.float32)\n"
        "call = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))\n"
        "out = jax.jit(call)(jax.device_put(x, gpu), jax.device_put(y, gpu))\n"
        "np.testing.assert_allclose(np.asarray(out), x * 2.0 + y, rtol=1e-6)\n"
    )


def test_the_deep_preflight_on_the_gpus_of_this_host(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """`cluster --deep` on 'rocm' as one process of one host: RCCL collectives over this host's GPUs, results
    right, a bus bandwidth for every size (the figures the README's table describes)."""
    import json
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    argv = [sys.executable, "-m", "jax_rocm7_plugin", "cluster", "--coordinator-address", f"127.0.0.1:{port}"]
    argv += ["--num-processes", "1", "--process-id", "0", "--deep", "--sizes", "8,1M,64M", "--json"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=900, cwd=tmp_path)
    report = json.loads(done.stdout)
    assert done.returncode == 0 and report["findings"] == [], (report["findings"], done.stderr[-2000:])
    assert [c["bytes"] for c in report["collectives"] if c["group"] == "job"] == [8, 8, 2**20, 2**20, 2**26, 2**26]
    assert all(c["busbw_gbps"] is None or c["busbw_gbps"] >= 0 for c in report["collectives"])


def test_the_doctors_math_library_verdict_agrees_with_a_matmul_and_a_convolution() -> None:
    """Where the doctor says rocBLAS (or MIOpen) carries this GPU's kernels, a matmul and a convolution run;
    a healthy machine gets no math-library warning or error (recall and precision on real files)."""
    import json

    done = subprocess.run(
        [sys.executable, "-m", "jax_rocm7_plugin", "doctor", "--json"], capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stdout[-2000:]  # the doctor says the backend comes up and programs run
    report = json.loads(done.stdout)
    loud = [f for f in report["findings"] if f["id"] == "math-library-gpu-unsupported" and f["severity"] != "info"]
    assert loud == [], loud
    # On the ROCm device, never a CPU fallback: the inputs are put there, the outputs must stay there, and the
    # values are checked against numpy's (a matmul through rocBLAS/hipBLASLt, a convolution through MIOpen).
    run(
        "import jax, jax.numpy as jnp, numpy as np\n" + IS_ROCM + "rng = np.random.default_rng(0)\n"
        "a = rng.standard_normal((128, 128), dtype=np.float32)\n"
        "x = rng.standard_normal((1, 8, 32, 32), dtype=np.float32)\n"
        "k = rng.standard_normal((4, 8, 3, 3), dtype=np.float32)\n"
        "mm = jax.jit(lambda m: m @ m.T)(jax.device_put(a, gpu))\n"
        "conv = jax.jit(lambda i, w: jax.lax.conv_general_dilated(i, w, (1, 1), 'SAME'))(\n"
        "    jax.device_put(x, gpu), jax.device_put(k, gpu))\n"
        "assert mm.devices() == {gpu} and conv.devices() == {gpu}, (mm.devices(), conv.devices())\n"
        "np.testing.assert_allclose(np.asarray(mm), a @ a.T, rtol=1e-3, atol=1e-3)\n"
        "cpu = jax.devices('cpu')[0]\n"
        "ref = jax.jit(lambda i, w: jax.lax.conv_general_dilated(i, w, (1, 1), 'SAME'))(\n"
        "    jax.device_put(x, cpu), jax.device_put(k, cpu))\n"
        "np.testing.assert_allclose(np.asarray(conv), np.asarray(ref), rtol=1e-3, atol=1e-3)\n"
    )


def test_the_health_read_understands_this_machines_files() -> None:
    """The node-health read on real sysfs: every GPU placed at its PCI function (partitions of one GPU at one),
    a discrete GPU's PCIe link parsed, RAS counters read where the driver keeps them, a partitionable GPU's modes
    known; and nothing that reads as a fault on a machine the operator calls healthy (an error here says which)."""
    from pathlib import Path

    from jax_rocm7_plugin._machine.gpu_health import read_node
    from jax_rocm7_plugin._machine.health_findings import health_findings
    from jax_rocm7_plugin._machine.topology import read_topology
    from jax_rocm7_plugin._policy.node_health import rules

    root = Path("/")
    node = read_node(root, read_topology(root))
    assert node.gpus, "no GPU in the KFD topology"
    for gpu in node.gpus:
        kind = rules(gpu.target, gpu.device_id)
        assert gpu.pci is not None and Path(f"/sys/bus/pci/devices/{gpu.pci}").exists(), gpu.where()
        if not kind.integrated:
            assert gpu.link is not None and gpu.link.width, f"{gpu.where()}: no PCIe link read"
        if kind.partitions:
            assert gpu.compute_partition in ("SPX", "DPX", "TPX", "QPX", "CPX"), gpu.compute_partition
        if Path(f"/sys/bus/pci/devices/{gpu.pci}/ras").is_dir():
            assert gpu.ras or gpu.ras_inaccessible, f"{gpu.where()}: RAS folder without counters read"
    faults = [f.sentence() for f in health_findings(node) if f.severity != "info"]
    assert faults == [], faults
