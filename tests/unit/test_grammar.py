"""One parser per grammar (_policy/grammar.py), and the places that once read a value their own way now agree."""

from __future__ import annotations

import re

import pytest

from jax_rocm7_plugin._job.compare import socket_ifname_problem
from jax_rocm7_plugin._machine.network import Interface
from jax_rocm7_plugin._policy.grammar import (
    Address,
    loose_version,
    parse_address,
    parse_size,
    rccl_list,
    rccl_list_matches,
)
from tests.support.environment import REPO

UP = (Interface("lo", True, ("127.0.0.1/8",)), Interface("eth0", True, ("10.0.0.5/24",)))


@pytest.mark.parametrize(
    ("value", "name", "port", "passes"),
    [
        ("eth", "eth0", None, True),  # a prefix
        ("=eth", "eth0", None, False),  # exact names only
        ("^docker,lo", "eth0", None, True),
        ("^docker,lo", "lo", None, False),
        ("mlx5_0:1", "mlx5_0", 1, True),
        ("mlx5_0:2", "mlx5_0", 1, False),  # another port
        ("eth0:1", "eth0", None, True),  # an interface has no port: the entry's is not compared
        ("^^eth", "eth0", None, True),  # one '^' is read: the entry is '^eth', which names nothing here
        ("", "anything", None, True),
    ],
)
def test_rccl_lists_read_as_rccl_reads_them(value: str, name: str, port: int | None, passes: bool) -> None:
    assert rccl_list_matches(value, name, port) == passes


def test_the_cluster_check_reads_socket_interfaces_as_the_doctor_does() -> None:
    """The disagreement the one parser ends: an entry with a port (`eth0:1`) named no interface for the cluster
    check (its own reading compared 'eth0:1' as a prefix) while the doctor and RCCL take it for eth0."""
    assert socket_ifname_problem("NCCL_SOCKET_IFNAME", "eth0:1", UP) is None
    assert rccl_list("^=eth0:5,ib").entries[0].port_number == 5
    problem = socket_ifname_problem("NCCL_SOCKET_IFNAME", "ib", UP)
    assert problem is not None and "leaves no interface that is up" in problem


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ("node-0:1234", Address("node-0", 1234)),
        ("10.0.0.1:65535", Address("10.0.0.1", 65535)),
        ("[::1]:8476", Address("::1", 8476)),
        ("[fe80::1%eth0]:1", None),  # a zone index is no part of the grammar gRPC takes
        ("::1:8476", None),  # IPv6 without brackets: gRPC reads no port in it
        ("node-0:0", None),
        ("node-0:65536", None),
        ("node-0", None),
        (":1234", None),
        (" node-0:1234", None),  # jax hands the text to gRPC as it is
        ("node 0:1234", None),
    ],
)
def test_host_port_as_the_coordinator_takes_it(text: str, parsed: Address | None) -> None:
    assert parse_address(text) == parsed
    if parsed is not None:
        assert str(parsed) == text


@pytest.mark.parametrize(
    ("text", "size"),
    [("8", 8), ("64K", 65536), ("65536k", 64 << 20), ("16M", 16 << 20), ("256MiB", 256 << 20), ("1gb", 1 << 30),
     ("2T", 2 << 40), ("12B", 12), (" 4 K ", 4096), ("1.5G", None), ("K", None), ("-1", None), ("8X", None)],
)  # fmt: skip
def test_sizes(text: str, size: int | None) -> None:
    assert parse_size(text) == size


@pytest.mark.parametrize(
    ("text", "version"),
    [("7.2.0-43", (7, 2, 0)), ("7.13.0a20260415", (7, 13, 0)), ("6.14.0-1018-oem", (6, 14, 0)), ("6", (6, 0, 0)),
     ("7.2.0.70200-43", (7, 2, 0)), ("", None), ("rocm", None), (None, None)],
)  # fmt: skip
def test_loose_versions(text: str | None, version: tuple[int, int, int] | None) -> None:
    assert loose_version(text) == version


def test_no_module_splits_a_host_and_port_or_a_list_by_hand() -> None:
    """The grammars above have one reader: no other module of the plugin splits HOST:PORT at its last colon or reads
    RCCL's '^' and '=' itself."""
    hand_made = re.compile(r'r(?:partition|split)\(":"|startswith\("\^"\)|startswith\("="\)')
    found = [
        f"{path.relative_to(REPO)}:{n}"
        for path in (REPO / "jax_rocm7_plugin").rglob("*.py")
        if path.name != "grammar.py"
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if hand_made.search(line)
    ]
    assert found == []
