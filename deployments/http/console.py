"""The review console's page (/console): static HTML, CSS and vanilla JS from
deployments/http/console/, served on the graph's own HTTP port. The page holds no data and
needs no token; everything it shows it reads from the /admin API with the token the
person logs in with, so the API's roles are the console's."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from fastapi import APIRouter
from fastapi.responses import Response

ASSETS = Path(__file__).with_name("console")
FILES = {
    "": ("index.html", "text/html; charset=utf-8"),
    "/console.js": ("console.js", "text/javascript; charset=utf-8"),
    "/console.css": ("console.css", "text/css; charset=utf-8"),
}
# Scripts and styles from these files only: a ticket's text that slipped into markup would
# still run nothing (no inline script, no handler attributes, no other origin).
HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
        "img-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}


def _asset(name: str, media_type: str) -> Callable[[], Response]:
    body = (ASSETS / name).read_bytes()

    def asset() -> Response:
        return Response(body, media_type=media_type, headers=HEADERS)

    return asset


def console_router() -> APIRouter:
    """GET /console and its two assets, read once when the ingress starts."""
    router = APIRouter(prefix="/console", include_in_schema=False)
    for suffix, (name, media_type) in FILES.items():
        router.get(suffix)(_asset(name, media_type))
    return router
