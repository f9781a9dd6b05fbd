"""The application's settings: the `args` of serve_config.yaml, validated once in build_app."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from deployments.engines import EngineConfig

PROJECT_ROOT = Path(__file__).resolve().parent.parent


def resolve_project_path(path: str) -> str:
    """Relative paths mean the project root: Ray workers do not share the CLI's cwd."""
    p = Path(path).expanduser()
    return str(p if p.is_absolute() else (PROJECT_ROOT / p).resolve())


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class IngressConfig(_Strict):
    max_text_chars: int = Field(10_000, gt=0, description="longest ticket text accepted, after normalization")
    max_batch_tickets: int = Field(64, gt=0, description="most tickets in one /v1/classify/batch call")
    request_timeout_s: float = Field(30.0, gt=0, description="end-to-end budget for one ticket")
    health_timeout_s: float = Field(5.0, gt=0, description="how long /healthz waits for each node")
    retry_after_s: int = Field(1, ge=0, description="Retry-After sent with 503 overloaded")


class TokenizerConfig(_Strict):
    max_tokens: int = Field(2048, gt=0, description="tickets are truncated to this many tokens (or the model's limit)")
    timeout_ms: float = Field(50.0, gt=0, description="after this the raw text goes to the model replica instead")
    tokenizer_dir: str | None = Field(
        None, description="tokenizer files to load; default the model's own (must hash the same)"
    )

    @field_validator("tokenizer_dir")
    @classmethod
    def _resolve(cls, v: str | None) -> str | None:
        return None if v is None else resolve_project_path(v)


class ModelReplicaConfig(_Strict):
    engine: EngineConfig = Field(
        default_factory=EngineConfig, validate_default=True, description="vLLM engine settings"
    )
    max_inflight_requests: int = Field(
        128, gt=0, description="batch knob: most requests inside the engine at once, adjustable at run time"
    )

    @field_validator("engine")
    @classmethod
    def _resolve(cls, v: EngineConfig) -> EngineConfig:
        return v.model_copy(update={"model_dir": resolve_project_path(v.model_dir)})


class AppConfig(_Strict):
    ingress: IngressConfig = Field(default_factory=IngressConfig, description="HTTP front door")
    tokenizer: TokenizerConfig = Field(default_factory=TokenizerConfig, description="tokenizer deployment")
    model: ModelReplicaConfig = Field(default_factory=ModelReplicaConfig, description="model replica")

    @classmethod
    def from_args(cls, args: dict | None) -> "AppConfig":
        """Validates serve_config.yaml `args`; the error names each bad key and value."""
        try:
            return cls.model_validate(args or {})
        except ValidationError as e:
            problems = []
            for err in e.errors():
                key = ".".join(str(p) for p in err["loc"])
                if err["type"] == "extra_forbidden":
                    section = _section(cls, err["loc"][:-1])
                    allowed = ", ".join(section.model_fields) if section else "?"
                    problems.append(f"unknown key {key!r} (allowed: {allowed})")
                else:
                    problems.append(f"{key}={err.get('input')!r}: {err['msg']}")
            raise ValueError("invalid application args: " + "; ".join(problems)) from None


def _section(model: type[BaseModel], loc: tuple) -> type[BaseModel] | None:
    for part in loc:
        field = model.model_fields.get(str(part))
        if field is None or not isinstance(field.annotation, type) or not issubclass(field.annotation, BaseModel):
            return None
        model = field.annotation
    return model
