"""The pure rooms stay pure: policies/ and kv_partition/ take a snapshot and return a
decision, so they import no serving, HTTP or engine library (imports inside functions
included) and read no wall clock."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PURE = ("policies", "kv_partition")
FORBIDDEN = {"ray", "fastapi", "starlette", "httpx", "aiohttp", "vllm", "requests", "torch"}


def pure_files() -> list[Path]:
    return sorted(p for room in PURE for p in (ROOT / room).rglob("*.py"))


def imported(tree: ast.AST) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("path", pure_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_pure_rooms_import_no_serving_http_or_engine_library(path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    assert not imported(tree) & FORBIDDEN, f"{path.relative_to(ROOT)} imports {sorted(imported(tree) & FORBIDDEN)}"
    clocks = [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "time"
        and node.attr in ("time", "monotonic", "perf_counter")
    ]
    assert not clocks, f"{path.relative_to(ROOT)} reads the clock at lines {clocks}: take `now` instead"


def test_the_check_sees_an_import_inside_a_function():
    tree = ast.parse("def f():\n    from ray import serve\n    import vllm.config\n")
    assert imported(tree) == {"ray", "vllm"}


# Rooms from the top down: a module imports only its own room's modules and those of the
# rooms below it (serve_app.py binds deployments; tests may import anything).
ROOMS = [
    {"bench", "loadtest"},
    {"loadkit", "serve_app", "deploy"},
    {"deployments"},
    {"policies", "kv_partition", "models"},
]
# bench/ and loadtest/ share one room but neither imports the other.
APART = {"bench": {"loadtest"}, "loadtest": {"bench"}}


def room_files() -> list[Path]:
    rooms = set().union(*ROOMS)
    return sorted(p for p in ROOT.rglob("*.py") if p.relative_to(ROOT).parts[0].removesuffix(".py") in rooms)


@pytest.mark.parametrize("path", room_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_module_imports_a_higher_room(path):
    room = path.relative_to(ROOT).parts[0].removesuffix(".py")
    level = next(i for i, r in enumerate(ROOMS) if room in r)
    higher = set().union(*ROOMS[:level]) | APART.get(room, set())
    wrong = imported(ast.parse(path.read_text(encoding="utf-8"))) & higher
    assert not wrong, f"{path.relative_to(ROOT)} ({room}) imports {sorted(wrong)}"


# Inside deployments/, from the top down: the graph's wiring, the HTTP front (ingress,
# admin, console), the Serve nodes (and the parts only they use), the callers' clients of
# other nodes and the replica's control loops, the settings, then what everything shares.
DEPLOYMENT_ROOMS = [
    {"graph"},
    {"http"},
    {"nodes"},
    {"callers", "control"},
    {"config", "config_loop"},
    {"engines", "metrics", "api", "config_base", "graph_nodes", "ray_env"},
]


def deployments_room(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if parts[0] == "deployments" and len(parts) > 1 else None


@pytest.mark.parametrize("path", sorted((ROOT / "deployments").rglob("*.py")), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_deployments_module_imports_a_higher_room_of_deployments(path):
    own = path.relative_to(ROOT / "deployments").parts[0].removesuffix(".py")
    if own == "__init__":
        return
    level = next(i for i, r in enumerate(DEPLOYMENT_ROOMS) if own in r)
    higher = set().union(*DEPLOYMENT_ROOMS[:level])
    tree = ast.parse(path.read_text(encoding="utf-8"))
    modules = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module and n.level == 0}
    wrong = {m for m in modules if deployments_room(m) in higher}
    assert not wrong, f"{path.relative_to(ROOT)} ({own}) imports {sorted(wrong)}"


def test_every_deployments_room_is_placed():
    rooms = {p.relative_to(ROOT / "deployments").parts[0].removesuffix(".py") for p in (ROOT / "deployments").iterdir()}
    placed = set().union(*DEPLOYMENT_ROOMS)
    assert rooms - {"__init__", "__pycache__"} <= placed, sorted(rooms - placed)
