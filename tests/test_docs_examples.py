"""The documentation's examples, executed: every ``sh``, ``console`` and ``python`` block of
README.md and of every page in docs/ runs here, in page order, as a reader types it (issue 45),
so a page that lies fails. Each page is one session: a temporary working directory, a user's
environment (no settings module, data directory or Redis chosen for them; HOME a directory of
its own), ``python``, ``scrapy`` and ``xpack`` this interpreter's, and the servers the page
starts on 127.0.0.1.

How a page is read (the conventions the pages follow):

- a ``console`` block is commands after ``$ `` (continued by a trailing ``\\`` or a here-document)
  and, under each, what it prints: compared as doctest compares (``...`` stands for anything,
  runs of blanks are one); a command that shows nothing is not compared. A ``sh`` block is
  commands only, their output not compared;
- every command must exit with 0, unless the next one is ``echo $?`` showing its status;
- a command ending in `` &`` runs in the background until the page ends or ``kill %N`` stops it;
  the page goes on once it has printed what the block shows under it (or, showing nothing,
  its first line): servers print their address when they listen. ``wait %N`` waits for one and
  wants its status 0;
- a ``python`` block runs as a script in the working directory; one with ``>>>`` prompts runs
  under doctest (ELLIPSIS, NORMALIZE_WHITESPACE);
- ``<!-- file: NAME -->`` before a block (any language) writes it to NAME, as the page asks
  the reader to; ``<!-- not run: REASON -->`` leaves a block out (a remote host, an install),
  and ``<!-- run by tests/test_x.py -->`` names the test that runs it its own way;
- the ports the pages use (8000 the demo site, 8080 the web app, 6379 Redis, 8001 another
  site) are replaced by free ones, in commands, in what is shown and in the files written.

The counts of blocks run, written, left out and run elsewhere are asserted at the end, so the
lead can quote them and a new block is counted on purpose.
"""

from __future__ import annotations

import contextlib
import doctest
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from conftest import CHOSEN

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PAGES = [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]
EXAMPLES = ("sh", "console", "python")
BLOCK = re.compile(r"(?:^<!-- (?P<mark>[^\n]*?) -->\n)?^```(?P<lang>[\w-]*)\n(?P<body>.*?)^```$", re.M | re.S)
DOC_PORTS = ("8000", "8001", "8080", "6379")
COMMAND_TIMEOUT = 300  # seconds: the longest command of a page is a crawl of a few seconds
WAIT_TIMEOUT = 60  # seconds for a background command to print what the page shows
CHECKER = doctest.OutputChecker()
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
# the variables a user has not set in a fresh shell (tests/conftest.py chooses them for the suite)
UNSET = (*CHOSEN, "PYTEST_CURRENT_TEST")
UNSET = (
    "SCRAPY_SETTINGS_MODULE",
    "WEBRACE_DATA_DIR",
    "REDIS_URL",
    "WEBRACE_REDIS_PREFIX",
    "WEBRACE_OBJECTS_DIR",
    "SCRAPY_PROJECT",
    "PYTEST_CURRENT_TEST",
)

# The counts, per kind, over every page (README.md and docs/): see the module's docstring.
EXPECTED_COUNTS = {"run": 48, "written": 7, "not run": 13, "run elsewhere": 7}


@dataclass
class Block:
    page: Path
    line: int
    lang: str
    body: str
    mark: str = ""

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"

    @property
    def kind(self) -> str:
        if self.mark.startswith("not run:"):
            return "not run"
        if self.mark.startswith("run by "):
            return "run elsewhere"
        if self.mark.startswith("file: "):
            return "written"
        return "run" if self.lang in EXAMPLES else "text"


def blocks(page: Path) -> list[Block]:
    text = page.read_text(encoding="utf-8")
    found = []
    for match in BLOCK.finditer(text):
        line = text.count("\n", 0, match.start("lang")) + 1
        found.append(Block(page, line, match["lang"], match["body"], (match["mark"] or "").strip()))
    return found


ALL = {page: blocks(page) for page in PAGES}
RUN = [page for page, found in ALL.items() if any(b.kind in ("run", "written") for b in found)]


@dataclass
class Step:
    command: str
    shown: str = ""  # what the page shows under it (console blocks)
    checked: bool = False


def steps(block: Block) -> list[Step]:
    """A block's commands, each with what is shown under it."""
    lines = block.body.splitlines()
    found: list[Step] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if block.lang == "console" and not line.startswith("$ "):
            assert found, f"{block.where}: output before the first command"
            found[-1].shown += line + "\n"
            found[-1].checked = True
            i += 1
            continue
        command = line[2:] if block.lang == "console" else line
        i += 1
        if block.lang == "sh" and (not command.strip() or command.lstrip().startswith("#")):
            continue
        while command.endswith("\\") and i < len(lines):  # continued
            command += "\n" + lines[i]
            i += 1
        here = re.search(r"<<-?\s*'?(\w+)'?", command)
        if here:  # a here-document: its lines up to the delimiter
            while i < len(lines) and lines[i].strip() != here[1]:
                command += "\n" + lines[i]
                i += 1
            command += "\n" + here[1]
            i += 1
        found.append(Step(command))
    return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Background:
    """A command running in the background; its output (stdout and stderr, as a terminal shows
    them) gathered by a thread."""

    def __init__(self, proc: subprocess.Popen, command: str) -> None:
        self.proc, self.command, self.output = proc, command, ""
        self.changed = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            with self.changed:
                self.output += line
                self.changed.notify_all()
        with self.changed:
            self.changed.notify_all()

    def wait_for(self, shown: str) -> None:
        """Until it has printed ``shown`` (or any first line when nothing is shown)."""

        def printed() -> bool:
            if not shown:
                return "\n" in self.output
            return CHECKER.check_output(shown, self.output, FLAGS)

        with self.changed:
            ok = self.changed.wait_for(lambda: printed() or self.proc.poll() is not None, timeout=WAIT_TIMEOUT)
            assert ok and printed(), f"{self.command!r} printed:\n{self.output[-3000:]}\nnot:\n{shown}"

    def stop(self) -> int:
        """Ends the command and what it started: its process group, a session of its own."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        with contextlib.suppress(ProcessLookupError):  # a child that outlived the shell
            os.killpg(self.proc.pid, signal.SIGTERM)
        return self.proc.returncode


CHECKOUT_MARK = "<!-- session: checkout -->"  # a page whose examples run from the checkout's root
LEFT_OUT = {".git", ".webrace", "build", "dist", "__pycache__", ".pytest_cache", ".ruff_cache", ".hypothesis"}


@dataclass
class Session:
    """One page's shell: its working directory, environment and background jobs."""

    root: Path
    ports: dict[str, str]
    checkout: bool = False
    cwd: Path = field(init=False)
    env: dict[str, str] = field(init=False)
    jobs: list[Background] = field(default_factory=list)
    status: int = 0

    def __post_init__(self) -> None:
        self.cwd = self.root / "work"
        home, bin_dir = self.root / "home", self.root / "bin"
        for directory in (self.cwd, home, bin_dir):
            directory.mkdir()
        if self.checkout:  # a clone's root, read-only: its files linked, what the page writes beside them
            for entry in ROOT.iterdir():
                if entry.name not in LEFT_OUT and not entry.name.endswith(".egg-info"):
                    (self.cwd / entry.name).symlink_to(entry)
        python = shlex.quote(sys.executable)
        shims = {
            "python": f'exec {python} "$@"',
            "python3": f'exec {python} "$@"',
            "scrapy": f'exec {python} -m scrapy "$@"',
            "xpack": f'exec {python} -m webrace.xpack.cli "$@"',
            "warcio": f'exec {python} -m warcio.cli "$@"',
        }
        for name, line in shims.items():
            (bin_dir / name).write_text(f"#!/bin/sh\n{line}\n")
            (bin_dir / name).chmod(0o755)
        env = {k: v for k, v in os.environ.items() if k not in UNSET}
        path = os.pathsep.join([str(ROOT), env["PYTHONPATH"]]) if env.get("PYTHONPATH") else str(ROOT)
        self.env = {
            **env,
            "PATH": f"{bin_dir}{os.pathsep}{env.get('PATH', '')}",
            "HOME": str(home),
            "PYTHONPATH": path,
            "PYTHONUNBUFFERED": "1",
        }
        self.bin = bin_dir

    def shim(self, name: str, target: str) -> None:
        (self.bin / name).write_text(f'#!/bin/sh\nexec {shlex.quote(target)} "$@"\n')
        (self.bin / name).chmod(0o755)

    def ported(self, text: str) -> str:
        return re.sub(r"\b(" + "|".join(DOC_PORTS) + r")\b", lambda m: self.ports[m[1]], text)

    def run(self, block: Block) -> None:
        if block.kind == "written":
            name = block.mark.removeprefix("file: ").strip()
            (self.cwd / name).write_text(self.ported(block.body), encoding="utf-8")
        elif block.lang == "python":
            self.python(block)
        else:
            found = steps(block)
            for step, following in zip(found, [*found[1:], None], strict=True):
                self.step(block, step, following is not None and following.command.strip() == "echo $?")

    def python(self, block: Block) -> None:
        script = self.root / f"example-{block.line}.py"
        script.write_text(self.ported(block.body), encoding="utf-8")
        args = [sys.executable, str(script)]
        if ">>> " in block.body:
            args = [sys.executable, "-m", "doctest", "-o", "ELLIPSIS", "-o", "NORMALIZE_WHITESPACE", str(script)]
            script.rename(script.with_suffix(".txt"))
            args[-1] = str(script.with_suffix(".txt"))
        done = subprocess.run(args, cwd=self.cwd, env=self.env, capture_output=True, text=True, timeout=COMMAND_TIMEOUT)
        assert done.returncode == 0, f"{block.where}: the python block failed:\n{done.stdout}{done.stderr}"

    def step(self, block: Block, step: Step, status_shown: bool = False) -> None:
        """Run one command; ``status_shown``: the page's next command shows its exit status."""
        command, shown = self.ported(step.command), self.ported(step.shown)
        where = f"{block.where}: {step.command.splitlines()[0]}"
        job = re.fullmatch(r"(kill|wait)((?: %\d+)+)", command.strip())
        if job:
            for number in job[2].split():
                background = self.jobs[int(number[1:]) - 1]
                if job[1] == "kill":
                    background.stop()
                else:
                    background.proc.wait(timeout=COMMAND_TIMEOUT)
                    assert background.proc.returncode == 0, f"{where}: {background.output[-3000:]}"
            return
        if command.rstrip().endswith("&") and not command.rstrip().endswith("&&"):
            proc = subprocess.Popen(
                ["bash", "-c", f"set -a\n{command.rstrip().removesuffix('&')}"],
                cwd=self.cwd,
                env=self.env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                start_new_session=True,
            )
            self.jobs.append(Background(proc, command))
            self.jobs[-1].wait_for(shown)
            return
        # bash, with the session's directory, variables (every assignment exported: set -a) and the
        # previous command's status ($?); afterwards its directory and variables are the session's
        cwd, env = self.root / "cwd", self.root / "env"
        script = (
            f"cd {shlex.quote(str(self.cwd))}\nset -a\n(exit {self.status})\n{command}\n"
            f"__status=$?\npwd > {cwd}\nenv -0 > {env}\nexit $__status\n"
        )
        done = run_session(["bash", "-c", script], self.env, where)
        if cwd.exists():  # not when the command ended the shell (exit)
            self.cwd = Path(cwd.read_text().strip())
            pairs = (item.split("=", 1) for item in env.read_text().split("\0") if "=" in item)
            self.env = {k: v for k, v in pairs if k not in ("PWD", "OLDPWD", "SHLVL", "_", "__status")}
            cwd.unlink()
        if command.strip() != "echo $?":
            assert done.returncode == 0 or status_shown, f"{where}: status {done.returncode}:\n{done.stdout[-3000:]}"
            self.status = done.returncode
        if step.checked:
            assert CHECKER.check_output(shown, done.stdout, FLAGS), (
                f"{where}: printed\n{done.stdout[-4000:]}\nwhere the page shows\n{shown}"
            )

    def close(self) -> None:
        for background in reversed(self.jobs):
            background.stop()


def run_session(args: list[str], env: dict[str, str], where: str) -> subprocess.CompletedProcess:
    """``args`` in a session of its own: a command still running after ``COMMAND_TIMEOUT`` ends
    with everything it started (its process group), not only the shell (a crawl the shell
    started would run on, orphaned, after the test)."""
    proc = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=COMMAND_TIMEOUT)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        raise AssertionError(f"{where}: still running after {COMMAND_TIMEOUT} s:\n{out[-3000:]}") from None
    return subprocess.CompletedProcess(args, proc.returncode, out, None)


def commands(page: Path) -> list[str]:
    return [
        step.command for block in ALL[page] if block.kind == "run" and block.lang != "python" for step in steps(block)
    ]


@pytest.mark.parametrize("page", RUN, ids=[str(p.relative_to(ROOT)) for p in RUN])
def test_the_pages_examples_run_as_written(page: Path, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    typed = commands(page)
    for tool in ("curl", "wget", "javadoc"):
        if any(re.search(rf"(^|[\s|(]){tool}\b", command) for command in typed) and shutil.which(tool) is None:
            pytest.skip(f"{page.name} runs {tool}, which is not installed")
    checkout = CHECKOUT_MARK in page.read_text(encoding="utf-8")
    session = Session(tmp_path, {port: str(free_port()) for port in DOC_PORTS}, checkout)
    if any(re.search(r"(^|\s)redis-server\b", command) for command in typed):
        session.shim("redis-server", request.getfixturevalue("redis_binary"))  # the tests' own (conftest.py)
    try:
        for block in ALL[page]:
            if block.kind in ("run", "written"):
                session.run(block)
    finally:
        session.close()


def test_every_example_is_run_or_says_why_not() -> None:
    """Every example block is run here, written as a file, run by a named test, or left out with
    a reason; the counts are the ones this module states."""
    counts = dict.fromkeys(EXPECTED_COUNTS, 0)
    commands = 0
    for page, found in ALL.items():
        for block in found:
            if block.kind == "run elsewhere":
                test = ROOT / block.mark.removeprefix("run by ").strip()
                assert test.is_file(), f"{block.where}: no {test}"
                assert page.name in test.read_text(encoding="utf-8"), f"{block.where}: {test.name} does not read it"
            if block.kind in counts and (block.lang in EXAMPLES or block.kind == "written"):
                counts[block.kind] += 1
            if block.kind == "run" and block.lang != "python":
                commands += len(steps(block))
    print(f"\ndocs examples: {counts}, {commands} commands in the blocks run")
    assert counts == EXPECTED_COUNTS
