"""What a request must carry before the API acts on it (docs/technical/web-security.md).

Browsers send the ``SameSite=Strict`` cookie to every port of a host (127.0.0.1:9000's page is
the same *site* as 127.0.0.1:8080), so the cookie proves nothing about who wrote the request.
A state-changing call therefore needs the token in a header (``Authorization: Bearer`` or
``X-Iterion-Token``; a page of another origin cannot read it nor set it without a CORS
preflight this server never grants) and, when the browser says where the request comes from
(``Origin``, ``Sec-Fetch-Site``), that place must be this very origin: same scheme, host AND port.

JSON bodies are parsed bounded: size (413 in app.py), nesting depth (422 here, before
``json.loads`` could recurse), an empty body is 422 and another content type 415.
"""

from __future__ import annotations

import json
from typing import Any

from starlette.requests import Request

from gitrefs.persist.errors import ErrorKind
from iterion.server.apierror import ApiError
from iterion.server.auth import matches

TOKEN_HEADER = "x-iterion-token"
MUTATING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
MAX_JSON_DEPTH = 64
SAME_ORIGIN_FETCH = frozenset({"same-origin", "none"})  # "none": typed in the address bar / a bookmark


def header_token(request: Request, token: str) -> bool:
    """The token arrived in a header a cross-origin page cannot set (bearer or X-Iterion-Token)."""
    auth = request.headers.get("authorization", "")
    if auth[:7].lower() == "bearer " and matches(auth[7:].strip(), token):
        return True
    return matches(request.headers.get(TOKEN_HEADER), token)


def _default_port(scheme: str) -> str:
    return "443" if scheme == "https" else "80"


def _normalized(scheme: str, hostport: str) -> tuple[str, str, str]:
    host, sep, port = hostport.rpartition(":")
    if not sep or "]" in port:  # no port, or the tail of a bare IPv6 literal
        host, port = hostport, _default_port(scheme)
    return scheme.lower(), host.lower(), port


def own_origin(request: Request) -> tuple[str, str, str]:
    """(scheme, host, port) this request was addressed to (its Host header)."""
    scheme = request.url.scheme
    return _normalized(scheme, request.headers.get("host") or request.url.netloc)


def origin_refusal(request: Request) -> str | None:
    """Why the browser's own account of where the request comes from rules it out (None: fine,
    or the client is not a browser and said nothing)."""
    fetch_site = request.headers.get("sec-fetch-site")
    if fetch_site is not None and fetch_site.lower() not in SAME_ORIGIN_FETCH:
        return f"the browser marked this request {fetch_site} (Sec-Fetch-Site), not same-origin"
    origin = request.headers.get("origin")
    if origin is None:
        return None
    scheme, _, rest = origin.partition("://")
    if not rest or "/" in rest or _normalized(scheme, rest) != own_origin(request):
        return f"the request comes from origin {origin}, not from this server's own pages"
    return None


def cross_site_error(why: str) -> ApiError:
    return ApiError(403, f"refused a cross-site request: {why}",
                    hint="call the API from `iterion remote`, a script sending the token in a header, or this "
                         "server's own web page", exit_code=ErrorKind.BAD_INPUT)


def json_depth_exceeds(raw: bytes, limit: int = MAX_JSON_DEPTH) -> bool:
    """Does the JSON text nest arrays/objects deeper than ``limit``? One linear pass that skips
    string contents (escapes included), so nothing recursive ever sees a hostile body."""
    depth, in_string, escaped = 0, False, False
    for byte in raw:
        if in_string:
            if escaped:
                escaped = False
            elif byte == 0x5C:  # backslash
                escaped = True
            elif byte == 0x22:  # closing quote
                in_string = False
        elif byte == 0x22:
            in_string = True
        elif byte in (0x5B, 0x7B):  # [ {
            depth += 1
            if depth > limit:
                return True
        elif byte in (0x5D, 0x7D):  # ] }
            depth -= 1
    return False


def parse_json_object(raw: bytes, content_type: str) -> dict[str, Any]:
    """The body of a JSON endpoint as an object, or the ApiError the client gets."""
    ctype = content_type.split(";")[0].strip().lower()
    if ctype != "application/json":
        raise ApiError(415, f"request body must be application/json, not {ctype or 'unspecified'}",
                       hint="send Content-Type: application/json and a JSON object ({} for no fields)",
                       exit_code=ErrorKind.BAD_INPUT)
    if not raw.strip():
        raise ApiError(422, "request body is empty: a JSON object is required",
                       hint="send {} for no fields", exit_code=ErrorKind.BAD_INPUT)
    if json_depth_exceeds(raw):
        raise ApiError(422, f"request body nests deeper than {MAX_JSON_DEPTH} levels",
                       hint="send a flat JSON object", exit_code=ErrorKind.BAD_INPUT)
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise ApiError(422, f"request body is not valid JSON: {exc}", exit_code=ErrorKind.BAD_INPUT) from None
    if not isinstance(data, dict):
        raise ApiError(422, "request body must be a JSON object", exit_code=ErrorKind.BAD_INPUT)
    return data
