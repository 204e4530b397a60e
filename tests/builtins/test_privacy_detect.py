"""privacy_filter's detection table (builtin-tools.md): true positives name their rule;
structurally invalid candidates (Luhn, mod-97) and low-entropy values are not findings."""

from __future__ import annotations

from pathlib import Path

import pytest

from iterion.builtins import vault
from iterion.builtins.privacy import detect, entropy, iban_ok, luhn_ok
from iterion.builtins.registry import BuiltinContext, BuiltinError, call

A36 = "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"


@pytest.mark.parametrize("text, rule, value", [
    ("write to jane.doe+tag@mail.example.org today", "rfc5322", "jane.doe+tag@mail.example.org"),
    ("call +14155552671 now", "e164", "+14155552671"),
    ("call +33 6 12 34 56 78 now", "e164", "+33 6 12 34 56 78"),
    ("see https://example.com/a/b?c=1.", "url", "https://example.com/a/b?c=1"),
    ("iban GB82 WEST 1234 5698 7654 32 ok", "iban_mod97", "GB82 WEST 1234 5698 7654 32"),
    ("iban DE89370400440532013000 ok", "iban_mod97", "DE89370400440532013000"),
    ("card 4111-1111-1111-1111 ok", "card_luhn", "4111-1111-1111-1111"),
    ("card 5500005555555559 ok", "card_luhn", "5500005555555559"),
    ("AKIAIOSFODNN7EXAMPLE", "aws_access_key", "AKIAIOSFODNN7EXAMPLE"),
    ("aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "aws_secret_key",
     "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
    (f"token ghp_{A36}", "github_pat", f"ghp_{A36}"),
    (f"gho_{A36}", "github_oauth", f"gho_{A36}"),
    ("xoxb-123456789012-abcdefABCDEF", "slack_token", "xoxb-123456789012-abcdefABCDEF"),
    ("sk_live_" + "a1B2c3D4e5F6g7H8", "stripe_key", "sk_live_a1B2c3D4e5F6g7H8"),
    ("AIza" + "SyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q", "google_api_key", "AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q"),
    (f"npm_{A36}", "npm_token", f"npm_{A36}"),
    ("pypi-AgEIcHlwaS5vcmc" + "x" * 60, "pypi_token", "pypi-AgEIcHlwaS5vcmc" + "x" * 60),
    ("glpat-abcdefghij0123456789", "gitlab_pat", "glpat-abcdefghij0123456789"),
    ("-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7abc\n-----END RSA PRIVATE KEY-----", "pem_private_key",
     "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7abc\n-----END RSA PRIVATE KEY-----"),
    ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAA\n-----END OPENSSH PRIVATE KEY-----",
     "ssh_private_key",
     "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAA\n-----END OPENSSH PRIVATE KEY-----"),
    ("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U", "jwt",
     "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"),
    ("Authorization: Bearer a8Fk2LmQ9zXv7Rt3Yp1W", "bearer_token", "a8Fk2LmQ9zXv7Rt3Yp1W"),
    ('password = "Xj9$mK2#nQ8@vL5"', "password_assignment", "Xj9$mK2#nQ8@vL5"),
    ("blob Zq8Lm2Xv9Rt4Yp7Wk3Hs6Jd1Fg5 end", "generic_high_entropy", "Zq8Lm2Xv9Rt4Yp7Wk3Hs6Jd1Fg5"),
])
def test_true_positives_name_their_rule(text: str, rule: str, value: str) -> None:
    found = detect(text)
    assert [(f.rule, f.value) for f in found] == [(rule, value)]
    assert text[found[0].start:found[0].end] == value


@pytest.mark.parametrize("text", [
    'password = "changeme"',                      # entropy about 2.75: not a secret
    "card 4111 1111 1111 1112",                   # Luhn fails
    "card 0000 0000 0000 0000",                   # one repeated digit
    "iban GB82 WEST 1234 5698 7654 33",           # mod-97 fails
    "call 4155552671",                            # not E.164 (no +)
    "no at sign: jane.doe.example.com",
    "Bearer aaaaaaaaaaaaaaaaaaaaaaaa",            # a bearer token with no entropy
    "commit 3f786850e387550fdab836ed7e6dc881de23001b",  # hex only: below the generic bar
    "a_long_python_identifier_name_here",
])
def test_non_findings(text: str) -> None:
    assert detect(text) == []


def test_entropy_figures_from_the_spec() -> None:
    assert entropy("changeme") < 3.0 < 3.5 < entropy("Xj9$mK2#nQ8@vL5")


def test_structural_checks() -> None:
    assert luhn_ok("4111111111111111") and not luhn_ok("4111111111111112")
    assert iban_ok("DE89370400440532013000") and not iban_ok("DE89370400440532013001")


def test_categories_and_min_score_filter() -> None:
    text = "jane@example.com AKIAIOSFODNN7EXAMPLE"
    assert [f.category for f in detect(text, ("email",))] == ["email"]
    assert detect("Bearer a8Fk2LmQ9zXv7Rt3Yp1W", min_score=0.9) == []


def _ctx(tmp_path: Path, run_id: str = "r1") -> BuiltinContext:
    return BuiltinContext(workspace=tmp_path, run_dir=tmp_path / run_id, run_id=run_id)


def test_redact_output_fields_and_stable_tokens(tmp_path: Path) -> None:
    ctx = _ctx(tmp_path)
    ctx.run_dir.mkdir()
    text = "a jane@example.com b jane@example.com c"
    out = call("privacy_filter", ctx, {"text": text, "placeholder_format": "[{category}:{token}]"})
    assert set(out) == {"redacted", "placeholders", "category_counts", "has_account_number", "has_email",
                        "has_phone", "has_url", "has_secret", "engine", "elapsed_ms"}
    token = out["placeholders"][0]["token"]
    assert token.startswith("PII_") and len(token) == 12
    assert out["redacted"] == f"a [EMAIL:{token}] b [EMAIL:{token}] c"
    assert out["category_counts"] == {"account_number": 0, "email": 2, "phone": 0, "url": 0, "secret": 0}
    # stable per (run, value, category); another run gets another token
    assert call("privacy_filter", ctx, {"text": "jane@example.com"})["placeholders"][0]["token"] == token
    other = _ctx(tmp_path, "r2")
    other.run_dir.mkdir()
    assert call("privacy_filter", other, {"text": "jane@example.com"})["placeholders"][0]["token"] != token
    back = call("privacy_unfilter", ctx, {"text": out["redacted"]})
    assert back == {"text": text, "substituted": 2, "missing": []}


def test_detect_mode_never_returns_the_value_and_writes_no_vault(tmp_path: Path) -> None:
    ctx = _ctx(tmp_path)
    ctx.run_dir.mkdir()
    out = call("privacy_filter", ctx, {"text": "k AKIAIOSFODNN7EXAMPLE", "mode": "detect"})
    assert set(out) == {"spans", "category_counts", "has_account_number", "has_email", "has_phone", "has_url",
                        "has_secret"}
    (span,) = out["spans"]
    assert set(span) == {"category", "score", "start", "end", "rule", "value_hash"}
    assert "AKIAIOSFODNN7EXAMPLE" not in repr(out) and out["has_secret"]
    assert not vault.vault_path(ctx.run_dir).exists()


@pytest.mark.parametrize("policy, text, missing", [
    ("leave", "x PII_0badf00d y", "x PII_0badf00d y"),
    ("remove", "x PII_0badf00d y", "x  y"),
])
def test_unfilter_missing_policy(tmp_path: Path, policy: str, text: str, missing: str) -> None:
    ctx = _ctx(tmp_path)
    out = call("privacy_unfilter", ctx, {"text": text, "missing_policy": policy})
    assert out == {"text": missing, "substituted": 0, "missing": ["PII_0badf00d"]}
    with pytest.raises(BuiltinError, match="no vault entry for PII_0badf00d"):
        call("privacy_unfilter", ctx, {"text": text, "missing_policy": "error"})


def test_scrub_replaces_vault_values_everywhere(tmp_path: Path) -> None:
    ctx = _ctx(tmp_path)
    ctx.run_dir.mkdir()
    assert vault.scrub(ctx.run_dir, {"a": "jane@example.com"}) == {"a": "jane@example.com"}  # no vault yet
    out = call("privacy_filter", ctx, {"text": "jane@example.com"})
    token = out["placeholders"][0]["token"]
    assert vault.scrub(ctx.run_dir, {"a": ["to jane@example.com", 3]}) == {"a": [f"to {token}", 3]}
