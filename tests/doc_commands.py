"""Every command README.md and docs/ show, checked against what it would run, without
running it: a `python -m` command's own argument parser reads its arguments (a command
argparse rejects fails here, not in a reader's shell), a script or config file it names
exists, and a script's arguments go to the parser of the module the script hands them to.

    python -m tests.doc_commands          # every command and its verdict; exit 1 on any failure

A command in a code block is run as written: every argument must parse. A command in
running text, or one with placeholders (`NAME=DIR`, `[--epochs N]`, `...`), is a sketch:
its module must have a command line and every option it names must be one of it."""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import re
import runpy
import shlex
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

ROOT = Path(__file__).resolve().parent.parent
DOCS = (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")))
START = re.compile(
    r"^(?:[A-Z_]+=\S+\s+)*(?:\.venv/bin/)?(?:python3?\s+-m\s+\S|bash\s+scripts/|serve\s+(?:run|deploy)\b)"
)
# Upper-case words stand for a value the reader chooses (PATH, NAME=DIR, NEW.csv, HEAD:6379).
PLACEHOLDER = re.compile(r"\b[A-Z]{1,}[A-Z0-9_]*\b|\.\.\.|…|\[|\]|\|")
# What each script hands its arguments to: the module, after the script's own arguments.
SCRIPT_MODULES = {
    "loadtest.sh": ("loadtest.run", ()),
    "loop_serve.sh": ("bench.loop", ("--write-config", "var/loop_config.yaml")),
}
SCRIPT_FILE_ARGUMENT = {"serve.sh"}  # its one argument is a Serve config file
SCRIPT_OWN_FLAGS = {"test.sh": {"--fast", "--drills"}}

Kind = Literal["exact", "sketch"]


@dataclass(frozen=True)
class DocCommand:
    doc: str
    line: int
    text: str
    kind: Kind


@dataclass(frozen=True)
class ModuleCall:
    """A `python -m` module and the arguments it would get."""

    module: str
    args: list[str]
    kind: Kind


def strip_comment(line: str) -> str:
    return re.split(r"\s+#\s", line, maxsplit=1)[0].strip()


def split_commands(line: str) -> list[str]:
    """The commands of one line: `a; b && c`, each without its comment."""
    return [part.strip() for part in re.split(r";|&&", strip_comment(line)) if part.strip()]


def doc_commands(docs: tuple[Path, ...] = DOCS) -> list[DocCommand]:
    """Commands in code blocks (fenced or indented, continued lines joined) and in inline
    code spans of the running text."""
    found = []
    for doc in docs:
        name = str(doc.relative_to(ROOT)) if doc.is_relative_to(ROOT) else doc.name
        lines = doc.read_text().splitlines()
        fenced = False
        i = 0
        while i < len(lines):
            line = lines[i]
            if line.lstrip().startswith("```"):
                fenced = not fenced
                i += 1
                continue
            in_block = fenced or line.startswith("    ")
            if in_block and START.match(line.strip()):
                first = i
                text = line.strip()
                while text.endswith("\\") and i + 1 < len(lines):
                    i += 1
                    text = text[:-1].rstrip() + " " + lines[i].strip()
                for part in split_commands(text):
                    if START.match(part):
                        kind: Kind = "sketch" if PLACEHOLDER.search(" ".join(words(part))) else "exact"
                        found.append(DocCommand(name, first + 1, part, kind))
            elif not fenced:
                for span in re.findall(r"`([^`]+)`", line):
                    found += [DocCommand(name, i + 1, c, "sketch") for c in split_commands(span) if START.match(c)]
            i += 1
    return found


def words(text: str) -> list[str]:
    """The command's words without leading VAR=value assignments and `.venv/bin/`."""
    out = shlex.split(text)
    while out and re.match(r"^[A-Z_]+=", out[0]):
        out.pop(0)
    if out:
        out[0] = out[0].removeprefix(".venv/bin/")
    return out


def module_file(module: str) -> Path | None:
    base = ROOT.joinpath(*module.split("."))
    for path in (base.with_suffix(".py"), base / "__main__.py"):
        if path.is_file():
            return path
    return None


def check_files(command: DocCommand) -> tuple[list[str], ModuleCall | None]:
    """Problems with the files a command names, and the module call left to parse."""
    w = words(command.text)
    if w[0].startswith("python"):
        module, args = w[2], w[3:]
        if not (ROOT / module.split(".")[0]).is_dir():
            return [], None  # not the project's (python3 -m venv)
        if module_file(module) is None:
            return [f"no module {module}"], None
        return [], ModuleCall(module, args, command.kind)
    if w[0] == "bash":
        script, args = Path(w[1]).name, w[2:]
        if not (ROOT / w[1]).is_file():
            return [f"no script {w[1]}"], None
        if script in SCRIPT_MODULES:
            module, own = SCRIPT_MODULES[script]
            return [], ModuleCall(module, [*own, *args], command.kind)
        if script in SCRIPT_FILE_ARGUMENT:
            return missing_files(args), None
        known = SCRIPT_OWN_FLAGS.get(script)
        if known is not None:
            return [f"{script} takes no {a}" for a in args if a.startswith("--") and a not in known], None
        return [], None
    # serve run|deploy CONFIG
    return missing_files(w[2:3]), None


def missing_files(args: list[str]) -> list[str]:
    """The config files named (placeholders aside) that are not there."""
    return [f"no file {a}" for a in args if not PLACEHOLDER.search(a) and not (ROOT / a).is_file()]


def option_names(text: str) -> list[str]:
    return [t.split("=", 1)[0] for t in re.findall(r"(?<![\w-])--[a-z][\w-]*(?:=\S*)?", text)]


class Stop(Exception):
    """Raised at the module's argument parse, with its parser."""

    def __init__(self, parser: argparse.ArgumentParser):
        self.parser = parser


def known_options(parser: argparse.ArgumentParser) -> set[str]:
    names = set(parser._option_string_actions)
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                names |= known_options(sub)
    return names


def parse(call: ModuleCall, text: str) -> str | None:
    """Runs the module as `python -m` would, up to its argument parse (main() stops
    there); None when the arguments are its own, else why not."""
    parse_args, parse_known_args = argparse.ArgumentParser.parse_args, argparse.ArgumentParser.parse_known_args
    stopped = False

    def stop_at(original):
        def at_parse(self, args=None, namespace=None):
            nonlocal stopped
            if stopped:  # a subcommand's own parser, called from the top one's parse
                return original(self, args, namespace)
            stopped = True
            if call.kind == "exact":
                parse_args(self, args, namespace)  # argparse's error exits 2 with its message
            raise Stop(self)

        return at_parse

    argparse.ArgumentParser.parse_args = stop_at(parse_args)
    argparse.ArgumentParser.parse_known_args = stop_at(parse_known_args)
    sys.argv = [call.module, *call.args]
    said = io.StringIO()
    try:
        with contextlib.redirect_stderr(said):
            runpy.run_module(call.module, run_name="__main__", alter_sys=True)
    except Stop as stop:
        if call.kind == "exact":
            return None
        unknown = [o for o in option_names(text) if o not in known_options(stop.parser)]
        return f"unknown options {unknown}" if unknown else None
    except SystemExit as exit_:
        return f"exit {exit_.code}: {said.getvalue().strip()[-400:]}"
    finally:
        argparse.ArgumentParser.parse_args = parse_args
        argparse.ArgumentParser.parse_known_args = parse_known_args
    return "the module ran to its end without parsing arguments"


@dataclass(frozen=True)
class Verdict:
    command: DocCommand
    problem: str | None


def check(commands: list[DocCommand]) -> list[Verdict]:
    """Each command's verdict: files here, the module calls in one child process (the
    modules run there up to their parse; imports are paid once)."""
    checked = [(command, *check_files(command)) for command in commands]
    calls = [[asdict(call), command.text] for command, problems, call in checked if call is not None and not problems]
    done = subprocess.run(
        [sys.executable, "-m", "tests.doc_commands", "--parse"],
        input=json.dumps(calls),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if done.returncode != 0:
        raise RuntimeError(f"the parse child failed: {done.stderr[-3000:]}")
    answers = iter(json.loads(done.stdout.splitlines()[-1]))
    verdicts = []
    for command, problems, call in checked:
        if call is not None and not problems and (answer := next(answers)) is not None:
            problems.append(answer)
        verdicts.append(Verdict(command, "; ".join(problems) or None))
    return verdicts


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--parse", action="store_true", help="(the checker's child) parse the module calls on stdin")
    if p.parse_args().parse:
        calls = json.loads(sys.stdin.read())
        answers = [parse(ModuleCall(**call), text) for call, text in calls]
        print(json.dumps(answers), file=sys.__stdout__, flush=True)
        return 0
    verdicts = check(doc_commands())
    for v in verdicts:
        print(f"{'FAIL' if v.problem else 'ok  '} {v.command.doc}:{v.command.line} [{v.command.kind}] {v.command.text}")
        if v.problem:
            print(f"     {v.problem}")
    return 1 if any(v.problem for v in verdicts) else 0


if __name__ == "__main__":
    sys.exit(main())
