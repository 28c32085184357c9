"""What every command shares (webrace/commands/__init__.py): output to a reader that has
gone (`| head`) ends the command quietly, with the exit status of a program SIGPIPE ended."""

from __future__ import annotations

import importlib
import inspect
import os
import pkgutil
import subprocess
import sys

import pytest
from scrapy.commands import ScrapyCommand

from webrace.backends import open_aci_store, open_results_store, open_sentinel_store, open_urd_store
from webrace.commands import EXIT_CLOSED_PIPE
from webrace.commands import __path__ as commands_path
from webrace.records.aci import Aci
from webrace.records.sentinel import make
from webrace.urd import Urd
from webrace.xpack import pack


def test_every_command_ends_quietly_on_a_closed_pipe():
    modules = [importlib.import_module(f"webrace.commands.{m.name}") for m in pkgutil.iter_modules(commands_path)]
    commands = [obj for module in modules for obj in vars(module).values()
                if inspect.isclass(obj) and issubclass(obj, ScrapyCommand) and obj.__module__ == module.__name__]
    assert len(commands) >= 10
    assert [c.__module__ for c in commands if not getattr(c.run, "ends_quietly_on_closed_pipe", False)] == []


def test_every_command_says_in_its_help_what_its_exit_statuses_mean():
    """Issue 44: the exit status of every command says whether it did its job, and its help says how."""
    modules = [importlib.import_module(f"webrace.commands.{m.name}") for m in pkgutil.iter_modules(commands_path)]
    commands = [obj for module in modules for obj in vars(module).values()
                if inspect.isclass(obj) and issubclass(obj, ScrapyCommand) and obj.__module__ == module.__name__]
    helps = {c.__module__: c().long_desc() for c in commands}
    assert len(helps) >= 13
    assert {name for name, text in helps.items() if " Exit status: 0" not in text or "2: a usage error" not in text} \
        == set()


@pytest.fixture
def filled(project):
    """A data directory with something for every listing command to print."""
    settings = {"WEBRACE_DATA_DIR": str(project.data)}
    with open_urd_store(settings) as urds:
        urds.put_many([Urd(f"u{i}", "alice", f"http://a.test/{i}", 3_600_000, 0) for i in range(3)])
    with open_aci_store(settings) as acis:
        acis.add([Aci("alice", f"http://a.test/{i}", 2.0, 1_700_000_000_000 + i, 10, 1, f"{i:064x}", "java")
                  for i in range(3)])
    with open_sentinel_store(settings) as sentinels:
        sentinels.add([make("alice", f"http://a.test/{i}", every_ms=60_000) for i in range(3)])
    with open_results_store(settings) as results:
        results.put("Emails", "http://a.test/", 1, ["a@a.test", "b@a.test"], 1_700_000_000_000)
    (project.root / "doc.xpk").write_bytes(pack(b"<r>" + b"<b>x</b>" * 50 + b"</r>"))
    return project


LISTINGS = {
    "aci list": ["-m", "scrapy", "aci", "list", "--owner", "alice"],
    "aci list jsonl": ["-m", "scrapy", "aci", "list", "--owner", "alice", "--format", "jsonl"],
    "sentinel list": ["-m", "scrapy", "sentinel", "list"],
    "urd list": ["-m", "scrapy", "urd", "list"],
    "results show": ["-m", "scrapy", "results", "show"],
    "scrapy xpack query": ["-m", "scrapy", "xpack", "query", "doc.xpk", "//b"],
    "xpack query (console script)": ["-m", "webrace.xpack.cli", "query", "doc.xpk", "//b/text()"],
}


@pytest.mark.parametrize("listing", LISTINGS)
def test_listing_into_a_closed_pipe_ends_quietly(listing, filled):
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the first line: every write meets a closed pipe
    try:
        done = subprocess.run([sys.executable, *LISTINGS[listing]], cwd=filled.root, env=filled.env,
                              stdout=write, stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(write)
    assert "Traceback" not in done.stderr and "BrokenPipeError" not in done.stderr, done.stderr
    assert done.returncode == EXIT_CLOSED_PIPE


def test_long_listing_piped_into_head_prints_its_first_line_and_nothing_on_stderr(project):
    with open_urd_store({"WEBRACE_DATA_DIR": str(project.data)}) as urds:
        urds.put_many([Urd(f"u{i:05}", "alice", f"http://a.test/{i}", 3_600_000, 0) for i in range(3000)])
    done = subprocess.run(["bash", "-o", "pipefail", "-c", f"{sys.executable} -m scrapy urd list | head -n 2"],
                          cwd=project.root, env=project.env, capture_output=True, text=True, timeout=120)
    assert done.stdout.splitlines()[1].split()[0] == "u00000"
    assert done.stderr == ""
    assert done.returncode == EXIT_CLOSED_PIPE  # what `seq 100000 | head -n 2` gives under pipefail


def test_listing_the_commands_imports_no_store_web_app_or_numpy():
    # Scrapy imports every command module to find the commands, before any of them runs: what a
    # subcommand needs is imported when it runs, so `scrapy urd list` does not pay for Flask
    code = ("import importlib, pkgutil, sys, webrace.commands as c\n"
            "for m in pkgutil.iter_modules(c.__path__): importlib.import_module('webrace.commands.' + m.name)\n"
            "print(' '.join(sorted(n for n in ('flask', 'redis', 'numpy', 'xmlschema', 'tldextract', 'argon2',"
            " 'apprise', 'webrace.backends.sqlite', 'webrace.delivery.agent') if n in sys.modules)))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.split() == []
