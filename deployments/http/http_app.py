"""The HTTP surface of the ingress: the FastAPI app, its routes and the error handlers
that turn every failure into the contract's JSON error body."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from ray import serve
from starlette.exceptions import HTTPException as StarletteHTTPException

from deployments.api import ApiError, BatchResponse, ClassifyResponse, ErrorBody, describe_validation_errors
from deployments.config_loop import AdminConfig
from deployments.http.admin import admin_router
from deployments.http.console import console_router
from deployments.http.ingress import Ingress

logger = logging.getLogger("ray.serve")

HTTP_CODES = {400: "invalid_json", 404: "not_found", 405: "method_not_allowed", 413: "input_too_long"}


class JsonBodies:
    """Every POST body is read as JSON whatever its Content-Type says.

    Without this, `curl -d '{...}'` (form content type) would get a baffling
    "valid dictionary" error instead of an answer.
    """

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and scope["method"] == "POST":
            headers = [(k, v) for k, v in scope["headers"] if k != b"content-type"]
            scope = {**scope, "headers": [*headers, (b"content-type", b"application/json")]}
        await self.app(scope, receive, send)


def error_response(e: ApiError) -> JSONResponse:
    return JSONResponse(e.body(), e.status, headers=e.headers())


def make_ingress(cls: type[Ingress], admin: AdminConfig) -> type:
    """The FastAPI app and routes, attached to `cls` without decorating it in place."""
    app = FastAPI(
        title="ticketserve",
        description="Customer-service ticket classification on Ray Serve + vLLM.",
        version="0.1.0",
    )

    app.add_middleware(JsonBodies)

    @app.exception_handler(ApiError)
    async def _api_error(_: Request, e: ApiError) -> JSONResponse:
        return error_response(e)

    @app.exception_handler(RequestValidationError)
    async def _validation(_: Request, e: RequestValidationError) -> JSONResponse:
        errors = e.errors()
        if any(err.get("type") == "json_invalid" for err in errors):
            return error_response(ApiError(400, "invalid_json", "the body is not valid JSON"))
        return error_response(ApiError(422, "invalid_request", describe_validation_errors(errors)))

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, e: StarletteHTTPException) -> JSONResponse:
        code = HTTP_CODES.get(e.status_code, "http_error")
        return error_response(ApiError(e.status_code, code, str(e.detail)))

    @app.exception_handler(Exception)
    async def _unexpected(_: Request, e: Exception) -> JSONResponse:
        logger.exception("unhandled error in ingress")
        return error_response(ApiError(500, "internal_error", type(e).__name__))

    error_responses: dict[int | str, dict[str, Any]] = {
        status: {"model": ErrorBody} for status in (400, 413, 422, 500, 503)
    }
    routes = {
        "classify": app.post("/v1/classify", response_model=ClassifyResponse, responses=error_responses),
        "classify_batch": app.post("/v1/classify/batch", response_model=BatchResponse, responses=error_responses),
        "labels": app.get("/v1/labels"),
        "healthz": app.get("/healthz"),
    }
    decorated = {name: route(getattr(cls, name)) for name, route in routes.items()}
    app.include_router(admin_router(cls, admin))
    app.include_router(console_router())
    return serve.ingress(app)(type(cls.__name__, (cls,), decorated))
