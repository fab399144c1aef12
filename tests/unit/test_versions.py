from __future__ import annotations

import pytest

from jax_rocm7_plugin._policy import versions


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("0.10.2", "0.10.2", True),
        ("0.10.2", "0.10.2.post1", True),
        ("0.10.2.post3", "0.10.2.post1", True),
        ("0.10.2", "0.10.2.1", True),
        ("0.10.2", "0.10.2+rocm7.13.0a20260415", True),
        ("0.10.2.dev20261101", "0.10.2", True),
        ("0.10.2", "0.10.1", False),
        ("0.10.2", "0.11.2", False),
        ("0.10.2", "1.10.2", False),
        ("0.10", "0.10.0", True),
        ("0.10.2", "0.10.20", False),
    ],
)
def test_same_release(a: str, b: str, same: bool) -> None:
    assert versions.same_release(a, b) is same
    assert versions.same_release(b, a) is same


def test_pin_for_post_release() -> None:
    assert versions.pin_for("0.10.2.post4") == "==0.10.2.*"


def test_pjrt_skew_names_both_versions_and_the_install() -> None:
    skew = versions.check_pjrt("0.10.2", "0.10.1")
    assert skew is not None
    assert "0.10.2" in skew.summary and "0.10.1" in skew.summary
    assert 'pip install "jax-rocm7-pjrt==0.10.2.*"' in skew.fix


def test_jaxlib_skew_offers_both_directions() -> None:
    skew = versions.check_jaxlib("0.10.2", "0.10.1")
    assert skew is not None
    assert "jax-rocm7-plugin==0.10.1.*" in skew.fix and "jax[rocm7-local]==0.10.2" in skew.fix


@pytest.mark.parametrize("other", ["0.10.2.post1", "0.10.2.1", "0.10.2+local"])
def test_compatible_pairs_pass(other: str) -> None:
    assert versions.check_pjrt("0.10.2", other) is None
    assert versions.check_jaxlib(other, "0.10.2") is None


def test_garbage_version_is_a_skew_not_an_exception() -> None:
    skew = versions.check_pjrt("0.10.2", "not a version")
    assert skew is not None and "cannot compare" in skew.summary


def test_c_api_major_known_for_served_release() -> None:
    from jax_rocm7_plugin.version import JAX_RELEASE

    assert versions.expected_pjrt_c_api_major(JAX_RELEASE) == 0
    assert versions.expected_pjrt_c_api_major("9.9.9") is None


@pytest.mark.parametrize(
    ("jaxlib", "pjrt", "ids"),
    [
        (None, None, ["jaxlib-missing"]),
        ("0.10.2", None, []),
        ("0.10.2", "0.10.2.post2", []),
        ("0.10.1", "0.10.2", ["version-skew-jaxlib"]),
        ("0.10.2", "0.10.1", ["version-skew-pjrt"]),
        ("0.10.1", "0.10.1", ["version-skew-jaxlib", "version-skew-pjrt"]),
    ],
)
def test_version_findings(jaxlib: str | None, pjrt: str | None, ids: list[str]) -> None:
    assert [f.id for f in versions.version_findings("0.10.2", jaxlib, pjrt)] == ids
