"""Who may call the /admin API, and its bodies read only after that check: the token is
checked by a router dependency, before FastAPI reads a path parameter or a body, so a
caller without it learns nothing, not even which fields exist."""

from __future__ import annotations

import hmac
from collections.abc import Callable
from typing import Any, Literal

from fastapi import Request
from pydantic import BaseModel, ValidationError

from deployments.api import ApiError, describe_validation_errors
from deployments.config_loop import AdminConfig

Role = Literal["admin", "reviewer"]
# What the reviewer token may call; every other admin route is the admin token's alone.
REVIEWER_ROUTES = frozenset(
    {
        ("GET", "/admin/whoami"),
        ("GET", "/admin/review"),
        ("POST", "/admin/review/{item_id}/resolve"),
        ("POST", "/admin/review/{item_id}/propose"),
        ("GET", "/admin/labels/proposals"),
    }
)


def caller_role(config: AdminConfig, authorization: str) -> Role | None:
    """The role whose token `authorization` ("Bearer <token>") carries; None for none."""
    scheme, _, given = authorization.partition(" ")
    if scheme.lower() != "bearer":
        return None
    roles: tuple[tuple[Role, str | None], ...] = (
        ("admin", config.resolved_token()),
        ("reviewer", config.resolved_reviewer_token()),
    )
    for role, token in roles:
        if token and hmac.compare_digest(given.encode(), token.encode()):
            return role
    return None


def require_token(config: AdminConfig) -> Callable:
    """A dependency refusing calls without an admin or reviewer token (401), and the
    reviewer's calls outside REVIEWER_ROUTES (403). Tokens are resolved in the replica at
    call time: its environment, not the driver's, holds them."""

    async def authorized(request: Request) -> None:
        role = caller_role(config, request.headers.get("authorization", ""))
        if role is None:
            raise ApiError(401, "unauthorized", "admin API: send Authorization: Bearer <token>")
        route = request.scope.get("route")
        if role == "reviewer" and (request.method, getattr(route, "path", "")) not in REVIEWER_ROUTES:
            raise ApiError(
                403, "forbidden", "the reviewer token may list, resolve and propose labels for review items only"
            )
        request.state.role = role

    return authorized


def json_body(model: type[BaseModel], optional: bool = False) -> Callable:
    """The body as a dependency, so that it is read only after the token check (a body
    parameter would be parsed, and refused, first)."""

    async def parse(request: Request) -> Any:
        raw = await request.body()
        if optional and raw.strip() in (b"", b"null"):
            return model()
        try:
            return model.model_validate_json(raw)
        except ValidationError as e:
            if any(err["type"] == "json_invalid" for err in e.errors()):
                raise ApiError(400, "invalid_json", "the body is not valid JSON") from None
            raise ApiError(422, "invalid_request", describe_validation_errors(e.errors())) from None

    return parse


def documented(model: type[BaseModel]) -> dict:
    """OpenAPI for a body read by json_body(): FastAPI cannot see it."""
    schema = {"content": {"application/json": {"schema": model.model_json_schema()}}}
    return {"requestBody": {"description": model.__doc__, **schema}}
