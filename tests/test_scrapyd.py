"""Deployment with scrapyd: `scrapyd-deploy` the project to a real scrapyd on 127.0.0.1 and
schedule `urd` through schedule.json, as docs/how-to/scrapyd.md shows."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from conftest import urd

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def call(base: str, endpoint: str, data: list[tuple[str, str]] | None = None) -> dict:
    body = urllib.parse.urlencode(data).encode() if data is not None else None
    with urllib.request.urlopen(base + endpoint, data=body, timeout=30) as response:  # noqa: S310 - 127.0.0.1
        return json.load(response)


def wait_for(predicate, what: str, deadline_s: float = 90):
    """Poll an external process's state (scrapyd has no event to wait on), with a deadline."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture
def scrapyd(tmp_path):
    home = tmp_path / "scrapyd"
    home.mkdir()
    port = free_port()
    (home / "scrapyd.conf").write_text(
        "[scrapyd]\nbind_address = 127.0.0.1\n"
        f"http_port = {port}\npoll_interval = 0.2\nmax_proc = 2\n"
        "eggs_dir = eggs\nlogs_dir = logs\ndbs_dir = dbs\n"
    )
    out = (home / "scrapyd.out").open("wb")  # scrapyd's own log: how each job's process ended
    proc = subprocess.Popen([sys.executable, "-m", "scrapyd"], cwd=home, stdout=out, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}/"

    def up():
        try:
            return call(base, "daemonstatus.json")["status"] == "ok"
        except OSError:
            return proc.poll() is not None and pytest.fail("scrapyd exited")

    wait_for(up, "scrapyd to listen")
    yield base, home
    proc.terminate()
    proc.wait(timeout=30)
    out.close()


def deploy(base: str, tmp_path: Path) -> None:
    """`scrapyd-deploy` the project as a user has it: its files and a scrapy.cfg whose
    [deploy] names this scrapyd."""
    checkout = tmp_path / "checkout"
    shutil.copytree(ROOT, checkout, ignore=shutil.ignore_patterns(
        ".git", "tests", "bench", "holdout", "*.egg-info", "build", "__pycache__", ".webrace", "*.png"))
    (checkout / "scrapy.cfg").write_text(
        f"[settings]\ndefault = webrace.settings\n\n[deploy]\nurl = {base}\nproject = webrace\n")
    deployed = subprocess.run(["scrapyd-deploy", "--version", "r1"], cwd=checkout,
                              capture_output=True, text=True, timeout=300)
    assert deployed.returncode == 0, deployed.stderr + deployed.stdout
    assert "webrace" in call(base, "listprojects.json")["projects"]


def run_urd(base: str, project, *args: tuple[str, str]) -> str:
    """Schedule `urd` through schedule.json, wait until scrapyd lists it finished: its id."""
    job = call(base, "schedule.json", [
        ("project", "webrace"), ("spider", "urd"),
        ("setting", f"WEBRACE_DATA_DIR={project.data}"), ("setting", "DOWNLOAD_DELAY=0"),
        ("setting", "WEBRACE_DELAY_FACTOR=0"), *args,
    ])["jobid"]

    def finished():
        jobs = call(base, "listjobs.json?project=webrace")
        return any(j["id"] == job for j in jobs["finished"])

    wait_for(finished, "the scheduled job to finish")
    return job


def test_deploy_with_scrapyd_deploy_and_schedule_urd(scrapyd, site, project, tmp_path):
    base, home = scrapyd
    deploy(base, tmp_path)
    site.html("/", ["/a.html"])
    site.html("/a.html")
    project.add_urds(urd("u1", "alice", site.url("/"), depth=1))
    job = run_urd(base, project)
    assert sorted(site.paths()) == ["/", "/a.html"]
    summary = json.loads((project.data / "last-crawl.json").read_text())
    assert summary["pages"] == 2 and summary["reason"] == "finished"
    log = next((home / "logs" / "webrace" / "urd").glob(f"{job}.log")).read_text()
    assert "URL Stats: discovered = 2" in log
    assert os.path.exists(home / "eggs" / "webrace" / "r1.egg")
    assert f"Process finished: project='webrace' spider='urd' job='{job}'" in (home / "scrapyd.out").read_text()


def test_an_unknown_urd_id_ends_the_scrapyd_job_with_exit_status_1_and_says_why_in_its_log(
        scrapyd, site, project, tmp_path):
    """As `scrapy crawl urd -a urd=nosuch` exits 1, so does the job scrapyd runs: scrapyd logs
    "Process died: exitstatus=1", and the job's log (its log_url) says why."""
    base, home = scrapyd
    deploy(base, tmp_path)
    site.html("/")
    project.add_urds(urd("u1", "alice", site.url("/")))
    job = run_urd(base, project, ("urd", "nosuch"))
    assert f"Process died: exitstatus=1 project='webrace' spider='urd' job='{job}'" \
           in (home / "scrapyd.out").read_text()
    log = next((home / "logs" / "webrace" / "urd").glob(f"{job}.log")).read_text()
    assert "ERROR: no URD with id nosuch (see `scrapy urd list`)" in log and "ERROR: Nothing was crawled." in log
    assert site.paths() == []
