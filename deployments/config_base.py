"""What every settings section shares: strict models, project-relative paths, and errors
that name each bad key, its value and the allowed ones."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict, ValidationError

PROJECT_ROOT = Path(__file__).resolve().parent.parent


def resolve_project_path(path: str) -> str:
    """Relative paths mean the project root: Ray workers do not share the CLI's cwd. A
    symbolic link stays one (a model alias is read through it, models/registry.py)."""
    p = Path(path).expanduser()
    return str(p if p.is_absolute() else Path(os.path.abspath(PROJECT_ROOT / p)))


ProjectPath = Annotated[str, AfterValidator(resolve_project_path)]


class Strict(BaseModel):
    # validate_default: default paths must be resolved too, not only the ones given.
    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)


M = TypeVar("M", bound=BaseModel)


def validate_args(model: type[M], args: dict | None) -> M:
    try:
        return model.model_validate(args or {})
    except ValidationError as e:
        problems = []
        for err in e.errors():
            key = ".".join(str(p) for p in err["loc"])
            if err["type"] == "extra_forbidden":
                section = _section(model, err["loc"][:-1])
                allowed = ", ".join(section.model_fields) if section else "?"
                problems.append(f"unknown key {key!r} (allowed: {allowed})")
            elif not key:  # a check across sections names its own keys
                problems.append(err["msg"].removeprefix("Value error, "))
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
