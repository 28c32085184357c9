"""`scrapy COMMAND` outside a project directory (issue 45): the commands that need no project
run there (Scrapy finds them through the ``scrapy.commands`` entry points of setup.cfg), the
others say in one line what they need; inside the project each is listed once."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys

from conftest import CHECKOUT

from webrace.xpack import pack

NEED_SETTINGS = ("aci", "deliver", "pir", "results", "rules", "sentinel", "store", "urd", "user", "web")


def test_xpack_runs_in_an_empty_directory_with_no_settings(elsewhere):
    (elsewhere.root / "doc.xpk").write_bytes(pack(b"<r>" + b"<b>x</b>" * 5 + b"</r>"))
    done = elsewhere.scrapy("xpack", "query", "doc.xpk", "//b", "--count")
    assert (done.returncode, done.stdout.strip()) == (0, "5"), done.stdout + done.stderr


def test_ipmicra_runs_in_an_empty_directory_with_no_settings(elsewhere):
    done = elsewhere.scrapy("ipmicra", "simulate", "--crawlers", "2", "--urls", "20")
    assert done.returncode == 0 and "IPMicra, kept knowledge" in done.stdout, done.stdout + done.stderr
    assert "Unknown command" not in done.stdout


def test_ipmicra_delegate_runs_on_the_shipped_samples_in_an_empty_directory(elsewhere):
    copied = elsewhere.scrapy("ipmicra", "samples", "samples")
    assert copied.returncode == 0, copied.stderr
    printed = copied.stdout.splitlines()[-1].strip()
    assert printed.startswith("scrapy ipmicra delegate --rir samples/")
    done = elsewhere.scrapy(*shlex.split(printed)[1:])  # as printed, from the same directory
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in (elsewhere.root / "samples" / "out.jsonl").read_text().splitlines()]
    assert len(lines) == 12 and {line["crawler"] for line in lines} == {"nicosia", "athens", "frankfurt"}
    assert "Delegated 12 URL(s)" in done.stderr and "skipped 1" in done.stderr
    assert sorted(p.name for p in elsewhere.root.iterdir()) == ["samples"]
    shipped = (elsewhere.metadata / "webrace.egg-info" / "SOURCES.txt").read_text().splitlines()
    assert {f"webrace/demo/ipmicra/{p.name}" for p in (elsewhere.root / "samples").iterdir()} - set(shipped) \
        == {"webrace/demo/ipmicra/out.jsonl"}  # every sample is package data: an install has them


def test_ipmicra_samples_copies_nothing_over_files_already_there(elsewhere):
    (elsewhere.root / "latency.csv").write_text("mine\n")
    done = elsewhere.scrapy("ipmicra", "samples", ".")
    assert done.returncode == 1 and done.stderr.strip() == \
        "error: latency.csv exists: give a new or empty directory", done.stderr
    assert [p.name for p in elsewhere.root.iterdir()] == ["latency.csv"]
    assert (elsewhere.root / "latency.csv").read_text() == "mine\n"


def test_ipmicra_help_says_where_real_rir_files_come_from(elsewhere):
    done = elsewhere.scrapy("ipmicra", "-h")
    assert done.returncode == 0 and "delegated-extended statistics files" in done.stdout
    assert "ftp.ripe.net/pub/stats/ripencc/delegated-ripencc-extended-latest" in " ".join(done.stdout.split())


def test_commands_that_need_settings_say_so_in_one_line_outside_a_project(elsewhere):
    running = {name: subprocess.Popen([sys.executable, "-m", "scrapy", name], cwd=elsewhere.root, env=elsewhere.env,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
               for name in NEED_SETTINGS}
    said = {name: (proc.wait(timeout=120), *proc.communicate()) for name, proc in running.items()}
    for name, (code, out, err) in said.items():
        assert (code, out, err.count("\n")) == (2, "", 1), f"{name}: {code} {out!r} {err!r}"
        assert err.startswith(f"error: scrapy {name} needs WebRACE's settings: ") \
            and "SCRAPY_SETTINGS_MODULE=webrace.settings" in err, err
    assert list(elsewhere.root.iterdir()) == []  # no data directory made where it is not wanted


def test_each_command_is_listed_once_inside_the_project_and_outside(elsewhere):
    outside = elsewhere.scrapy("-h")
    inside = subprocess.run([sys.executable, "-m", "scrapy", "-h"], cwd=CHECKOUT, env=elsewhere.env,
                            capture_output=True, text=True, timeout=120)
    for done, where in ((outside, "no active project"), (inside, "active project: webrace")):
        assert done.returncode == 0 and where in done.stdout, done.stdout + done.stderr
        names = [line.split()[0] for line in done.stdout.splitlines() if line.startswith("  ") and line.split()]
        assert len(names) == len(set(names)), names
        assert {"xpack", "ipmicra", *NEED_SETTINGS} <= set(names)
    assert "crawl" in inside.stdout and " crawl " not in outside.stdout  # Scrapy's own, in a project only
