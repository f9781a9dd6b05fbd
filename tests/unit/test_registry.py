from pathlib import Path

import pytest

from models.registry import main, point, previous_link, promote, restore_previous, show, target


def models(tmp_path: Path) -> dict[str, Path]:
    dirs = {name: tmp_path / "builds" / name for name in ("v1", "v2", "v3")}
    for d in dirs.values():
        d.mkdir(parents=True)
    return dirs


def test_a_link_moves_in_one_rename_and_names_its_target_relatively(tmp_path):
    d = models(tmp_path)
    stable = tmp_path / "stable"
    assert point(stable, d["v1"]) is None
    assert target(stable) == d["v1"].resolve() and not Path(stable.readlink()).is_absolute()
    assert point(stable, d["v2"]) == d["v1"].resolve() and target(stable) == d["v2"].resolve()
    assert not list(tmp_path.glob(".*.tmp"))
    with pytest.raises(FileNotFoundError):
        point(stable, tmp_path / "missing")
    assert target(stable) == d["v2"].resolve()


def test_promotion_keeps_the_old_stable_one_action_away(tmp_path):
    d = models(tmp_path)
    stable, candidate = tmp_path / "stable", tmp_path / "candidate"
    point(stable, d["v1"])
    point(candidate, d["v2"])
    assert promote(stable, candidate) == d["v2"].resolve()
    assert (target(stable), target(previous_link(stable))) == (d["v2"].resolve(), d["v1"].resolve())
    assert restore_previous(stable) == d["v1"].resolve()
    assert target(previous_link(stable)) == d["v2"].resolve()  # and undone again by the same action
    assert show(tmp_path) == {
        "stable": str(d["v1"].resolve()),
        "candidate": str(d["v2"].resolve()),
        "previous": str(d["v2"].resolve()),
    }


def test_restore_without_an_earlier_stable_says_so(tmp_path):
    d = models(tmp_path)
    point(tmp_path / "stable", d["v1"])
    with pytest.raises(FileNotFoundError, match="no earlier stable"):
        restore_previous(tmp_path / "stable")


def test_init_sets_only_the_aliases_that_are_unset(tmp_path, capsys):
    d = models(tmp_path)
    point(tmp_path / "candidate", d["v3"])
    main(["--models-dir", str(tmp_path), "init", str(d["v1"])])
    assert target(tmp_path / "stable") == d["v1"].resolve() and target(tmp_path / "candidate") == d["v3"].resolve()
