from __future__ import annotations

import pytest

from jax_rocm7_plugin._machine.topology import gfx_name
from jax_rocm7_plugin._policy.gfx_targets import (
    GENERIC_FAMILIES,
    covering_target,
    describe,
    override_suggestion,
    override_target,
    override_value,
)

# The targets the released jax-rocm7-pjrt 0.10.0 carries (read from its offload bundles).
RELEASED_0_10_0 = frozenset({"gfx908", "gfx90a", "gfx9-4-generic", "gfx10-3-generic", "gfx11-generic", "gfx12-generic"})


@pytest.mark.parametrize(
    ("gpu", "covered_by"),
    [
        ("gfx942", "gfx9-4-generic"),  # MI300X through its family
        ("gfx950", "gfx9-4-generic"),
        ("gfx90a", "gfx90a"),  # exact
        ("gfx1151", "gfx11-generic"),  # Strix Halo
        ("gfx1036", "gfx10-3-generic"),  # Raphael iGPU
        ("gfx1201", "gfx12-generic"),
        ("gfx906", None),  # gfx9-generic is not in that library
        ("gfx1010", None),
        ("gfx1170", None),  # a gfx11 part outside gfx11-generic
    ],
)
def test_coverage_of_the_released_library(gpu: str, covered_by: str | None) -> None:
    assert covering_target(gpu, RELEASED_0_10_0) == covered_by


def test_every_family_member_is_a_real_processor_name() -> None:
    for family, members in GENERIC_FAMILIES.items():
        assert family.endswith("-generic")
        for member in members:
            assert covering_target(member, {family}) == family
            assert override_target(override_value(member) or "") == member


@pytest.mark.parametrize(
    ("value", "target"),
    [("10.3.0", "gfx1030"), ("11.0.0", "gfx1100"), ("9.4.2", "gfx942"), ("9.0.10", "gfx90a"), (" 11.5.1 ", "gfx1151")],
)
def test_override_values(value: str, target: str) -> None:
    assert override_target(value) == target
    assert (
        gfx_name(int(value.strip().split(".")[0]) * 10000 + int(value.split(".")[1]) * 100 + int(value.split(".")[2]))
        == target
    )


@pytest.mark.parametrize("value", ["", "gfx1030", "10.3", "10.3.0.1", "0.0.0", "9.16.0", "a.b.c", "10.3.0;rm"])
def test_bad_override_values(value: str) -> None:
    assert override_target(value) is None


def test_override_suggestion_names_a_sibling_the_library_has() -> None:
    assert override_suggestion("gfx1031", {"gfx1030", "gfx1100"}) == "10.3.0"
    assert override_suggestion("gfx1031", {"gfx1100"}) is None
    assert override_suggestion("gfx803", {"gfx900"}) is None


def test_describe() -> None:
    assert describe("gfx942") == "gfx942 (Instinct MI300X/MI300A/MI325X)"
    assert describe("gfx1151") == "gfx1151 (Radeon 8060S (Strix Halo APU))"
    assert describe("gfx9999") == "gfx9999" and describe(None) == "unknown target"
