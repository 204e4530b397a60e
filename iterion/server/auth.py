"""The service's bearer token: where it comes from, where a generated one is kept, how it is checked.

Precedence: ``--token-file F`` (its first line), else ``ITERION_SERVER_TOKEN``, else the token
saved at ``<store>/server/token`` by an earlier start, else a fresh random one written there with
0600 permissions (the directory 0700). Only a token the operator gave explicitly (file or env)
allows binding a non-loopback address: a generated one is printed to whoever started the
server, which says nothing about who can reach a public port.

Tokens are compared with ``hmac.compare_digest`` (constant time).
"""

from __future__ import annotations

import hmac
import ipaddress
import os
import secrets
import socket
from dataclasses import dataclass
from pathlib import Path

from gitrefs.persist import UserError, atomic_write_bytes

ENV_TOKEN = "ITERION_SERVER_TOKEN"
MIN_TOKEN_CHARS = 16
COOKIE = "iterion_token"


class TokenError(UserError):
    pass


@dataclass(frozen=True)
class Token:
    value: str
    source: str  # "file" | "env" | "saved" | "generated"
    path: Path | None = None

    @property
    def explicit(self) -> bool:
        return self.source in ("file", "env")


def _check(value: str, where: str) -> str:
    value = value.strip()
    if len(value) < MIN_TOKEN_CHARS:
        raise TokenError(f"the token from {where} is too short ({len(value)} characters, at least {MIN_TOKEN_CHARS})",
                         hint="use a long random string, e.g. `python3 -c 'import secrets; print(secrets.token_urlsafe(32))'`")
    if any(ch.isspace() or not ch.isprintable() for ch in value):
        raise TokenError(f"the token from {where} contains whitespace or control characters",
                         hint="use a URL-safe random string")
    return value


def load_token(token_file: Path | None, store_root: Path) -> Token:
    if token_file is not None:
        try:
            lines = token_file.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            raise TokenError(f"--token-file {token_file}: {getattr(exc, 'strerror', None) or exc}",
                             hint="give a readable file whose first line is the token") from None
        return Token(_check(lines[0] if lines else "", f"--token-file {token_file}"), "file", token_file)
    env = os.environ.get(ENV_TOKEN)
    if env:
        return Token(_check(env, ENV_TOKEN), "env")
    saved = store_root / "server" / "token"
    if saved.is_file():
        text = saved.read_text(encoding="utf-8").strip()
        if text:
            return Token(_check(text, str(saved)), "saved", saved)
    value = secrets.token_urlsafe(32)
    saved.parent.mkdir(parents=True, exist_ok=True)
    os.chmod(saved.parent, 0o700)
    atomic_write_bytes(saved, (value + "\n").encode("ascii"), mode=0o600)
    os.chmod(saved, 0o600)
    return Token(value, "generated", saved)


def is_loopback(host: str) -> bool:
    if host in ("localhost", "ip6-localhost"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None)
    except OSError:
        return False
    return bool(infos) and all(ipaddress.ip_address(i[4][0]).is_loopback for i in infos)


def matches(given: str | None, token: str) -> bool:
    if not given:
        return False
    return hmac.compare_digest(given.encode("utf-8", "surrogateescape"), token.encode("utf-8"))
