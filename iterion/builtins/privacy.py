"""Deterministic PII and secret detection (docs/language.md, "Built-in tools"): regular expressions
for well-formed identifiers with structural checks (mod-97 for IBAN, Luhn for cards), about 25
secret patterns of the kind gitleaks ships, and Shannon entropy as a second filter for bearer
tokens, ``password = ...`` assignments and generic high-entropy strings. No model, no network.

Each finding names its ``rule``; overlapping candidates keep the highest score (then the longest).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

CATEGORIES = ("account_number", "email", "phone", "url", "secret")


@dataclass(frozen=True)
class Finding:
    category: str
    rule: str
    score: float
    start: int
    end: int
    value: str


def entropy(s: str) -> float:
    """Shannon entropy in bits per character (``changeme`` about 2.75, ``Xj9$mK2#nQ8@vL5`` 3.9)."""
    if not s:
        return 0.0
    n = len(s)
    return -sum(c / n * math.log2(c / n) for c in Counter(s).values())


def luhn_ok(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch)
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def iban_ok(iban: str) -> bool:
    s = iban.replace(" ", "").upper()
    if not 15 <= len(s) <= 34 or not s[:2].isalpha() or not s[2:4].isdigit():
        return False
    moved = s[4:] + s[:4]
    return int("".join(str(int(ch, 36)) for ch in moved)) % 97 == 1


@dataclass(frozen=True)
class Rule:
    name: str
    category: str
    score: float
    pattern: re.Pattern[str]
    group: int = 0
    check: Callable[[str], bool] | None = None  # structural or entropy check of the match


def _card(value: str) -> bool:
    digits = re.sub(r"[ -]", "", value)
    return 13 <= len(digits) <= 19 and len(set(digits)) > 1 and luhn_ok(digits)


def _phone(value: str) -> bool:
    return 8 <= sum(ch.isdigit() for ch in value) <= 15


def _min_entropy(bits: float) -> Callable[[str], bool]:
    return lambda v: entropy(v) >= bits


def _generic(v: str) -> bool:
    classes = sum(bool(re.search(p, v)) for p in (r"[a-z]", r"[A-Z]", r"\d"))
    return classes == 3 and entropy(v) >= 4.0


def _c(p: str, flags: int = 0) -> re.Pattern[str]:
    return re.compile(p, flags)


_SECRET = "secret"
RULES: tuple[Rule, ...] = (
    # -- secrets (gitleaks-style) -----------------------------------------------------------------
    Rule("ssh_private_key", _SECRET, 0.99, _c(r"-----BEGIN OPENSSH PRIVATE KEY-----[\s\S]{16,}?-----END OPENSSH PRIVATE KEY-----")),
    Rule("pem_private_key", _SECRET, 0.99, _c(r"-----BEGIN[ A-Z0-9_-]{0,40}PRIVATE KEY-----[\s\S]{16,}?-----END[ A-Z0-9_-]{0,40}PRIVATE KEY-----")),
    Rule("aws_access_key", _SECRET, 0.95, _c(r"\b(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[0-9A-Z]{16}\b")),
    Rule("aws_secret_key", _SECRET, 0.9, _c(r"(?i)aws.{0,20}?(?:secret|sk).{0,20}?[=:\s\"']+([A-Za-z0-9/+=]{40})(?![A-Za-z0-9/+=])"), 1),
    Rule("github_pat", _SECRET, 0.95, _c(r"\bghp_[A-Za-z0-9]{36}\b")),
    Rule("github_fine_grained_pat", _SECRET, 0.95, _c(r"\bgithub_pat_[A-Za-z0-9_]{82}\b")),
    Rule("github_oauth", _SECRET, 0.95, _c(r"\bgho_[A-Za-z0-9]{36}\b")),
    Rule("github_app_token", _SECRET, 0.95, _c(r"\bgh[us]_[A-Za-z0-9]{36}\b")),
    Rule("github_refresh_token", _SECRET, 0.95, _c(r"\bghr_[A-Za-z0-9]{36}\b")),
    Rule("gitlab_pat", _SECRET, 0.95, _c(r"\bglpat-[A-Za-z0-9_-]{20}\b")),
    Rule("slack_token", _SECRET, 0.95, _c(r"\bxox[baprs]-[A-Za-z0-9-]{10,72}\b")),
    Rule("slack_webhook", _SECRET, 0.95, _c(r"https://hooks\.slack\.com/(?:services|workflows)/[A-Za-z0-9+/]{20,}")),
    Rule("stripe_key", _SECRET, 0.95, _c(r"\b(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{10,99}\b")),
    Rule("google_api_key", _SECRET, 0.95, _c(r"\bAIza[0-9A-Za-z_-]{35}(?![0-9A-Za-z_-])")),
    Rule("google_oauth_secret", _SECRET, 0.95, _c(r"\bGOCSPX-[A-Za-z0-9_-]{28}(?![A-Za-z0-9_-])")),
    Rule("npm_token", _SECRET, 0.95, _c(r"\bnpm_[A-Za-z0-9]{36}\b")),
    Rule("pypi_token", _SECRET, 0.95, _c(r"\bpypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{50,}")),
    Rule("openai_api_key", _SECRET, 0.95, _c(r"\bsk-(?:proj-|svcacct-)?[A-Za-z0-9_-]{20,}T3BlbkFJ[A-Za-z0-9_-]{20,}")),
    Rule("anthropic_api_key", _SECRET, 0.95, _c(r"\bsk-ant-(?:api|admin)\d{2}-[A-Za-z0-9_-]{80,}")),
    Rule("sendgrid_api_key", _SECRET, 0.95, _c(r"\bSG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}\b")),
    Rule("twilio_api_key", _SECRET, 0.85, _c(r"\bSK[0-9a-f]{32}\b")),
    Rule("mailchimp_api_key", _SECRET, 0.85, _c(r"\b[0-9a-f]{32}-us\d{1,2}\b")),
    Rule("digitalocean_token", _SECRET, 0.95, _c(r"\bdo[opr]_v1_[a-f0-9]{64}\b")),
    Rule("shopify_token", _SECRET, 0.95, _c(r"\bshp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}\b")),
    Rule("azure_storage_key", _SECRET, 0.9, _c(r"AccountKey=([A-Za-z0-9+/]{86}==)"), 1),
    Rule("jwt", _SECRET, 0.9, _c(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}")),
    # entropy as a second filter: only a value that looks random is a secret
    Rule("bearer_token", _SECRET, 0.8, _c(r"(?i)\bbearer\s+([A-Za-z0-9._~+/=-]{16,})"), 1, _min_entropy(3.5)),
    Rule("password_assignment", _SECRET, 0.75,
         _c(r"(?i)\b(?:password|passwd|pwd|passphrase|secret|api[_-]?key|access[_-]?token|auth[_-]?token)"
            r"\s*[:=]\s*[\"']?([^\s\"']{6,})"), 1, _min_entropy(3.0)),
    Rule("generic_high_entropy", _SECRET, 0.6, _c(r"(?<![A-Za-z0-9+/_=-])[A-Za-z0-9+/_=-]{24,}(?![A-Za-z0-9+/_=-])"),
         0, _generic),
    # -- identifiers with structural checks ------------------------------------------------------
    Rule("iban_mod97", "account_number", 0.95, _c(r"\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]){11,30}\b"), 0, iban_ok),
    Rule("card_luhn", "account_number", 0.9, _c(r"(?<![\d-])\d(?:[ -]?\d){12,18}(?![\d-])"), 0, _card),
    Rule("rfc5322", "email", 0.95, _c(r"(?<![\w.+-])[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*"
                                      r"@(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z]{2,63}\b")),
    Rule("url", "url", 0.9, _c(r"\b(?:https?|ftp)://[^\s<>\"'`]+[^\s<>\"'`.,;:!?)\]}]")),
    Rule("e164", "phone", 0.85, _c(r"(?<![\w+])\+[1-9](?:[ .-]?\d){7,14}(?!\d)"), 0, _phone),
)


def detect(text: str, categories: tuple[str, ...] = CATEGORIES, min_score: float = 0.5) -> list[Finding]:
    """Non-overlapping findings in ``text``, in order of position."""
    wanted = set(categories)
    cands: list[Finding] = []
    for rule in RULES:
        if rule.category not in wanted or rule.score < min_score:
            continue
        for m in rule.pattern.finditer(text):
            value = m.group(rule.group)
            if not value or (rule.check is not None and not rule.check(value)):
                continue
            cands.append(Finding(rule.category, rule.name, rule.score, m.start(rule.group), m.end(rule.group), value))
    cands.sort(key=lambda f: (-f.score, -(f.end - f.start), f.start))
    kept: list[Finding] = []
    for f in cands:
        if all(f.end <= k.start or f.start >= k.end for k in kept):
            kept.append(f)
    return sorted(kept, key=lambda f: f.start)
