from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jax_rocm7_plugin._machine.topology import (
    MAX_PROPERTIES_BYTES,
    KfdNode,
    gfx_name,
    parse_properties,
    read_properties,
    read_topology,
)
from tests.support.sysroots import TOPOLOGY, Gpu, make_sysroot


@pytest.mark.parametrize(
    ("version", "name"),
    [
        (90402, "gfx942"),
        (90010, "gfx90a"),
        (110501, "gfx1151"),
        (90008, "gfx908"),
        (120001, "gfx1201"),
        (90500, "gfx950"),
        (0, None),
        (-5, None),
        (91600, None),
    ],
)
def test_gfx_name(version: int, name: str | None) -> None:
    assert gfx_name(version) == name


def test_parse_properties_skips_garbage_lines() -> None:
    text = (
        "simd_count 304\n\ngarbage\nkey with three words\nname notanumber\n9bad 1\n"
        "gfx_target_version 90402\n\x00\xff 3\n"
    )
    assert parse_properties(text) == {"simd_count": 304, "gfx_target_version": 90402}


def test_node_with_missing_keys_is_a_cpu_node() -> None:
    node = KfdNode(0, parse_properties("vendor_id 4098\n"))
    assert not node.is_gpu
    assert node.gfx_target is None
    assert node.drm_render_minor is None


def test_negative_render_minor_is_ignored() -> None:
    assert KfdNode(1, {"simd_count": 4, "drm_render_minor": -1}).drm_render_minor is None


def test_read_topology_absent(tmp_path: Path) -> None:
    assert read_topology(tmp_path).present is False


def test_read_topology_one_gpu(tmp_path: Path) -> None:
    topology = read_topology(make_sysroot(tmp_path, [Gpu(90010, 440, 129)]))
    assert topology.present
    assert [n.index for n in topology.nodes] == [0, 1]
    (gpu,) = topology.gpus
    assert (gpu.gfx_target, gpu.drm_render_minor, gpu.vendor_id) == ("gfx90a", 129, 4098)


def test_nodes_are_in_numeric_order(tmp_path: Path) -> None:
    topology = read_topology(make_sysroot(tmp_path, [Gpu(drm_render_minor=128 + i) for i in range(11)]))
    assert [n.index for n in topology.nodes] == list(range(12))


def test_unreadable_and_huge_files_become_problems(tmp_path: Path) -> None:
    root = make_sysroot(tmp_path, [Gpu(), Gpu(drm_render_minor=129), Gpu(drm_render_minor=130)])
    nodes = root / TOPOLOGY
    (nodes / "1" / "properties").unlink()
    (nodes / "1" / "properties").mkdir()  # reading a directory fails even as root
    (nodes / "2" / "properties").write_bytes(b"simd_count 4\n" * (MAX_PROPERTIES_BYTES // 8))
    os.symlink(nodes / "nowhere", nodes / "4")
    (nodes / "not-a-node").mkdir()
    topology = read_topology(root)
    assert [n.index for n in topology.nodes] == [0, 3]
    assert len(topology.problems) == 3
    assert any("larger than" in p for p in topology.problems)


def test_read_properties_reports_missing_file(tmp_path: Path) -> None:
    properties, problem = read_properties(tmp_path / "missing")
    assert properties is None and problem is not None and "missing" in problem


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=4096))
def test_parser_never_raises_on_arbitrary_bytes(data: bytes) -> None:
    properties = parse_properties(data.decode("utf-8", errors="replace"))
    node = KfdNode(0, properties)
    assert isinstance(node.is_gpu, bool)
    node.gfx_target  # noqa: B018 - must not raise
