"""Model aliases: `stable`, `candidate` and `previous` are symbolic links in a models
directory, each naming a built model directory. The Serve config names the links, never
a version (`model.engine.model_dir: artifacts/models/stable`), so moving an alias needs
no edit of the config: a RayService's spec stays what KubeRay applies, and a restarted
graph comes back on what the aliases name. A link is replaced in one rename, so a reader
sees the old target or the new one, never neither.

    python -m models.registry init                 # stable and candidate -> default
    python -m models.registry show
    python -m models.registry point stable artifacts/models/candidates/candidate-20261206-101500
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODELS_DIR = ROOT / "artifacts" / "models"
ALIASES = ("stable", "candidate", "previous")


def target(link: str | Path) -> Path:
    """The directory a model path names now (itself when it is not a link)."""
    return Path(os.path.realpath(link))


def point(link: str | Path, model_dir: str | Path) -> Path | None:
    """Points `link` at `model_dir` (relative to the link's own directory where it lies
    inside it, so the models directory can move); returns the old target, None if none."""
    link, model_dir = Path(link), Path(model_dir).resolve()
    if not model_dir.is_dir():
        raise FileNotFoundError(f"{model_dir} is not a model directory")
    old = target(link) if link.is_symlink() else None
    try:
        value = os.path.relpath(model_dir, link.parent.resolve())
    except ValueError:  # another drive
        value = str(model_dir)
    tmp = link.with_name(f".{link.name}.tmp")
    tmp.unlink(missing_ok=True)
    tmp.symlink_to(value, target_is_directory=True)
    os.replace(tmp, link)
    return old


def previous_link(stable: str | Path) -> Path:
    """The `previous` alias lives beside the stable one."""
    return Path(stable).with_name("previous")


def promote(stable: str | Path, candidate: str | Path) -> Path:
    """What `candidate` names becomes stable, and what stable named becomes `previous`;
    returns the new stable model directory."""
    new = target(candidate)
    old = point(stable, new)
    if old is not None and old != new:
        point(previous_link(stable), old)
    return new


def restore_previous(stable: str | Path) -> Path:
    """Stable back to what `previous` names (and previous to what stable named); returns it."""
    previous = previous_link(stable)
    if not previous.is_symlink():
        raise FileNotFoundError(f"{previous}: no earlier stable model")
    back = target(previous)
    old = point(stable, back)
    if old is not None and old != back:
        point(previous, old)
    return back


def show(models_dir: str | Path) -> dict[str, str | None]:
    models_dir = Path(models_dir)
    return {a: str(target(models_dir / a)) if (models_dir / a).is_symlink() else None for a in ALIASES}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--models-dir", type=Path, default=MODELS_DIR)
    sub = p.add_subparsers(dest="command", required=True)
    init = sub.add_parser("init", help="stable and candidate -> MODEL (default: the default model) where unset")
    init.add_argument("model", nargs="?", type=Path, default=MODELS_DIR / "default")
    sub.add_parser("show")
    pt = sub.add_parser("point")
    pt.add_argument("alias", choices=ALIASES)
    pt.add_argument("model", type=Path)
    sub.add_parser("promote", help="candidate -> stable, stable -> previous")
    sub.add_parser("restore", help="stable -> previous (the last promotion undone)")
    a = p.parse_args(argv)
    if a.command == "init":
        for alias in ("stable", "candidate"):
            if not (a.models_dir / alias).is_symlink():
                point(a.models_dir / alias, a.model)
    elif a.command == "point":
        point(a.models_dir / a.alias, a.model)
    elif a.command == "promote":
        promote(a.models_dir / "stable", a.models_dir / "candidate")
    elif a.command == "restore":
        restore_previous(a.models_dir / "stable")
    print(json.dumps(show(a.models_dir), indent=2))


if __name__ == "__main__":
    main()
