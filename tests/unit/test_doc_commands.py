"""Every command README.md and docs/ show is one the project accepts: its script, module
and files exist and its own argument parser reads its arguments (tests/doc_commands.py)."""

from __future__ import annotations

from tests.doc_commands import check, doc_commands


def test_every_doc_command_is_accepted():
    commands = doc_commands()
    quick_start = [c.text for c in commands if c.doc == "README.md"][:2]
    assert quick_start == ["bash scripts/serve.sh", "bash scripts/test.sh"]
    assert sum(c.kind == "exact" for c in commands) >= 20
    failed = [f"{v.command.doc}:{v.command.line} {v.command.text}: {v.problem}" for v in check(commands) if v.problem]
    assert not failed, "\n".join(failed)


def test_a_command_argparse_rejects_fails_the_check(tmp_path):
    doc = tmp_path / "bad.md"
    doc.write_text(
        "```bash\n"
        "python -m bench.quality --dataset bundled\n"
        "bash scripts/loadtest.sh --targets graph \\\n    --no-such-option 3\n"
        "bash scripts/serve.sh missing.yaml\n"
        "python -m bench.quality --dataset bitext\n"
        "```\n"
        "Run `python -m bench.loop --not-an-option X` or `python -m models.nothing`.\n"
        "Stamped `bash scripts/serve.sh; python -m bench.loop --rounds 1  # then the golden set`.\n"
    )
    verdicts = {v.command.text: v.problem or "" for v in check(doc_commands((doc,)))}
    assert "invalid choice: 'bundled'" in verdicts["python -m bench.quality --dataset bundled"]
    assert "--no-such-option" in verdicts["bash scripts/loadtest.sh --targets graph --no-such-option 3"]
    assert verdicts["bash scripts/serve.sh missing.yaml"] == "no file missing.yaml"
    assert verdicts["python -m bench.quality --dataset bitext"] == ""
    assert "--not-an-option" in verdicts["python -m bench.loop --not-an-option X"]
    assert verdicts["python -m models.nothing"] == "no module models.nothing"
    # A line of several commands is each of them, without the comment.
    assert verdicts["bash scripts/serve.sh"] == "" and verdicts["python -m bench.loop --rounds 1"] == ""
