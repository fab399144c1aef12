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


# Made-up secrets in the shapes their issuers document (test fixtures: none is a real credential).
CORPUS = {
    "AWS access key id": "AKIAZ7Q2J4K8M1N3P5R6",
    "GitHub classic token": "ghp_" + "aB3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1dF3hJ5",
    "GitHub fine-grained token": "github_pat_" + "11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
    "GitLab token": "glpat-" + "xY7zQ2wE4rT6yU8iO0pA",
    "Slack token": "xoxb-1234567890-0987654321-AbCdEfGhIjKl",
    "Hugging Face token": "hf_" + "QwErTyUiOpAsDfGhJkLzXcVbNm12345678",
    "OpenAI-style key": "sk-proj-" + "Abc123Def456Ghi789Jkl012Mno345",
    "JSON Web Token": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.c2lnbmF0dXJlLXBhcnQ",
    "PEM private key": "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAq8Zp3w\nAbCdEf==\n"
    "-----END RSA PRIVATE KEY-----",
    "Azure account key": "AbCdEfGh1234IjKlMnOp5678QrStUvWx==",
    "token as a URL's user": "x-access-token-abcdefghij0123456789",
    "password in argv": "hunter2-Pa55word",
}


def test_secrets_are_found_by_their_shape_wherever_they_are() -> None:
    """No variable names them: a program printed them, a log or a config file holds them, argv carried them."""
    text = "\n".join(
        [
            f"aws {CORPUS['AWS access key id']} / {CORPUS['GitHub classic token']}",
            f"fine-grained {CORPUS['GitHub fine-grained token']}",
            f"gitlab={CORPUS['GitLab token']} slack={CORPUS['Slack token']} hf={CORPUS['Hugging Face token']}",
            f"Authorization: Bearer {CORPUS['JSON Web Token']} key {CORPUS['OpenAI-style key']}",
            CORPUS["PEM private key"],
            "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey="
            + CORPUS["Azure account key"]
            + ";EndpointSuffix=core.windows.net",
            f"git clone https://{CORPUS['GitHub classic token']}@github.com/org/repo",
            f"git clone https://{CORPUS['token as a URL' + chr(39) + 's user']}@git.example/repo",
            f"argv: python train.py --password {CORPUS['password in argv']} --api-key={CORPUS['password in argv']}x",
        ]
    )
    cleaned = Redactor({}).data(text.encode())
    left = [kind for kind, secret in CORPUS.items() if secret.encode() in cleaned]
    assert left == [], (left, cleaned.decode())
    assert b"AccountName=acct" in cleaned and b"github.com/org/repo" in cleaned  # what is no secret stays


def test_variables_named_for_tokens_jwts_and_connection_strings_are_secrets() -> None:
    environ = {"CI_JOB_JWT": CORPUS["JSON Web Token"], "AZURE_STORAGE_CONNECTION_STRING": "Endpoint=sb://x;Key=abcd"}
    redactor = Redactor(environ)
    assert {"CI_JOB_JWT", "AZURE_STORAGE_CONNECTION_STRING"} <= set(redactor.names)
    assert b"Key=abcd" not in redactor.data(b"config: Endpoint=sb://x;Key=abcd")


def test_bytes_that_are_not_utf8_never_turn_the_patterns_off() -> None:
    """A tail cut inside a character, a binary's bytes: the URL and shapes after them are still taken out, and the
    bytes themselves are kept as they were."""
    data = b"\xe2\x82 cut char \xff\xfe https://bob:hunter22@index.example " + CORPUS["Hugging Face token"].encode()
    cleaned = Redactor({}).data(data)
    assert b"hunter22" not in cleaned and CORPUS["Hugging Face token"].encode() not in cleaned
    assert cleaned.startswith(b"\xe2\x82 cut char \xff\xfe https://")


def test_a_long_run_of_letters_costs_one_pass() -> None:
    """The URL pattern tried a scheme at every letter of a run: 80 KB of letters took 6.4 s. Now one pass."""
    import time

    started = time.perf_counter()
    Redactor({}).text("a" * 200_000 + " https://u:p4ssword@x/ ")
    assert time.perf_counter() - started < 5.0  # a guard against the quadratic walk (about 40 s here), not a goal
