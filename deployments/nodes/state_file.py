"""A deployment's state as a JSON file that outlives the graph (the rollout, the retrain
runs): written whole or not at all, read back as None where it is missing or unreadable."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

logger = logging.getLogger("ray.serve")


def save_json(path: str | Path, value: Any) -> None:
    """A reader never sees half a file: the new one replaces the old in one rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(value, indent=1))
    tmp.replace(path)


def load_json(path: str | Path) -> Any | None:
    """None where there is no file, or where it cannot be read (logged: the caller starts over)."""
    path = Path(path)
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        logger.warning("state %s unreadable, starting over: %s", path, e)
        return None
