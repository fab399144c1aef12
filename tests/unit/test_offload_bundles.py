from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jax_rocm7_plugin._binary.offload_bundles import scan_bundles, target_of
from tests.support.bundles import compressed_bundle, plain_bundle

IDS = [
    "host-x86_64-unknown-linux-gnu-",
    "hipv4-amdgcn-amd-amdhsa--gfx90a:xnack-",
    "hipv4-amdgcn-amd-amdhsa--gfx942",
    "hipv4-amdgcn-amd-amdhsa--gfx11-generic",
]


@pytest.mark.parametrize(
    ("entry_id", "target"),
    [
        (IDS[0], None),
        (IDS[1], "gfx90a"),
        (IDS[2], "gfx942"),
        (IDS[3], "gfx11-generic"),
        ("hipv4-amdgcn-amd-amdhsa--gfx9-4-generic:sramecc+:xnack-", "gfx9-4-generic"),
        ("hip-amdgcn-amd-amdhsa-gfx1151", "gfx1151"),
        ("openmp-nvptx64-nvidia-cuda-sm_90", None),
    ],
)
def test_target_of(entry_id: str, target: str | None) -> None:
    assert target_of(entry_id) == target


def test_plain_bundle() -> None:
    scan = scan_bundles(b"\xaa" * 100 + plain_bundle(IDS))
    assert scan.targets == {"gfx90a", "gfx942", "gfx11-generic"}
    assert (scan.plain_bundles, scan.compressed_bundles, scan.problems) == (1, 0, [])


@pytest.mark.parametrize(("version", "method"), [(1, 0), (2, 1), (3, 1), (3, 0)])
def test_compressed_bundles(version: int, method: int) -> None:
    blob = compressed_bundle(plain_bundle(IDS[:2]), version, method) + b"\0" * 13
    blob += compressed_bundle(plain_bundle([IDS[0], IDS[2]], b"\x01" * 100_000), version, method)
    scan = scan_bundles(blob)
    assert scan.targets == {"gfx90a", "gfx942"}
    assert scan.compressed_bundles == 2
    assert scan.problems == []


def test_large_entry_table_is_read_past_the_first_block() -> None:
    ids = [f"hipv4-amdgcn-amd-amdhsa--gfx{900 + n % 10}:xnack-{'x' * 200}" for n in range(200)]
    scan = scan_bundles(compressed_bundle(plain_bundle(ids), 3))
    assert scan.problems == [] and len(scan.entry_ids) == 200


def test_truncated_and_corrupt_streams_are_problems() -> None:
    good = compressed_bundle(plain_bundle(IDS), 3)
    corrupt = good[:40] + b"\xff" * (len(good) - 40)
    scan = scan_bundles(corrupt + plain_bundle(IDS)[:60])
    assert scan.targets == set()
    assert len(scan.problems) == 2


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=2048), st.sampled_from([b"", b"CCOB", b"__CLANG_OFFLOAD_BUNDLE__"]), st.integers(0, 64))
def test_scanner_never_raises(noise: bytes, magic: bytes, cut: int) -> None:
    good = compressed_bundle(plain_bundle(IDS), 3)
    scan_bundles(magic + noise)
    scan_bundles(good[: len(good) - cut] + noise)
    scan_bundles(noise + good[cut:])
