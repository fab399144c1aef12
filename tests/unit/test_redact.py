"""The report's redactor: which variables are secrets, and that their values leave no trace."""

from __future__ import annotations

import pytest

from jax_rocm7_plugin._report.redact import REDACTED, Redactor, is_secret_name


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("HF_TOKEN", True),
        ("AWS_SECRET_ACCESS_KEY", True),
        ("PGPASSWORD", True),
        ("GITHUB_AUTH", True),
        ("WANDB_API_KEY", True),
        ("gcs_credentials", True),
        ("XLA_FLAGS", False),
        ("HIP_VISIBLE_DEVICES", False),
        ("JAX_PLATFORMS", False),
    ],
)
def test_secret_names(name: str, secret: bool) -> None:
    assert is_secret_name(name) is secret


def test_values_urls_and_repeats_are_redacted_everywhere() -> None:
    environ = {
        "HF_TOKEN": "hf_abcdef123",
        "PIP_EXTRA_INDEX_URL": "https://bob:hunter22@index.example/simple",
        "XLA_FLAGS": "--xla_dump_to=/tmp/x",
        "SHORT_KEY": "1",
    }
    redactor = Redactor(environ)
    assert redactor.variable("HF_TOKEN", "hf_abcdef123") == REDACTED
    assert redactor.variable("SHORT_KEY", "1") == REDACTED  # its own value, however short
    assert redactor.variable("XLA_FLAGS", "--xla_dump_to=/tmp/x") == "--xla_dump_to=/tmp/x"
    printed = "token hf_abcdef123, url https://bob:hunter22@index.example, again hunter22; 1 2 3"
    assert redactor.text(printed) == (
        f"token {REDACTED}, url https://{REDACTED}@index.example, again {REDACTED}; 1 2 3"
    )  # a one-character value is not hunted elsewhere: that would rewrite every "1"
    assert b"hf_abcdef123" not in redactor.data(b"\x00\xffbinary hf_abcdef123 blob")
    assert redactor.names == ["HF_TOKEN", "password in a URL in PIP_EXTRA_INDEX_URL", "SHORT_KEY"]


def test_a_url_credential_in_any_text_is_redacted_even_if_no_variable_held_it() -> None:
    assert Redactor({}).text("git clone https://user:tok3n@git.example/repo") == (
        f"git clone https://{REDACTED}@git.example/repo"
    )
    assert Redactor({}).text("https://user@host/ keeps a bare user") == "https://user@host/ keeps a bare user"
