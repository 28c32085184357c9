"""Nothing written outside the data directory, the named outputs and temporary directories that
are removed (issue 45). Each kind of run the suite makes (a crawl and the commands around it, the
DynaBot services and a browser-mode crawl, the browser the web app's tests drive, a real
application served by gunicorn) runs here as a subprocess with HOME, TMPDIR and the working
directory empty directories of their own: afterwards HOME and TMPDIR are empty again, the
working directory holds only what the test named, and the checkout is as it was."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import CHECKOUT, CHOSEN, TESTS

# what tools write in a checkout while the suite runs there (pytest's and its plugins',
# hypothesis', Python's own)
TOOL_CACHES = {".git", "__pycache__", ".pytest_cache", ".benchmarks", ".hypothesis", ".ruff_cache"}


def tree(root: Path, skip: set[str] = frozenset()) -> set[str]:
    """Every file and directory under ``root``, as paths relative to it. Paths, not contents: a
    file left behind is what is looked for, and a person may edit the checkout while the suite runs."""
    found = set()
    for directory, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d not in skip]
        found.update(str(Path(directory, name).relative_to(root)) for name in [*dirs, *files])
    return found


class Sealed:
    """A user's shell whose HOME, TMPDIR and working directory are empty directories."""

    def __init__(self, root: Path) -> None:
        self.home, self.tmp, self.work = root / "home", root / "tmp", root / "work"
        for directory in (self.home, self.tmp, self.work):
            directory.mkdir()
        self.env = {k: v for k, v in os.environ.items() if k not in CHOSEN}
        self.env.update(HOME=str(self.home), TMPDIR=str(self.tmp),
                        PYTHONPATH=os.pathsep.join([str(CHECKOUT), str(TESTS)]))

    def run(self, *args: str, cwd: Path | None = None, timeout: float = 300,
            **env: str) -> subprocess.CompletedProcess:
        done = subprocess.run(args, cwd=cwd or self.work, env={**self.env, **env}, capture_output=True, text=True,
                              timeout=timeout)
        assert done.returncode == 0, f"{args}: {done.stderr[-3000:]}"
        return done

    def start(self, *args: str, **env: str) -> subprocess.Popen:
        return subprocess.Popen(args, cwd=self.work, env={**self.env, **env}, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, text=True)


@pytest.fixture
def sealed() -> Iterator[Sealed]:
    """In a short directory of /tmp: Chromium's singleton socket lives in TMPDIR, and a socket's
    path has at most 107 characters (pytest's directories are deep)."""
    checkout = tree(CHECKOUT, TOOL_CACHES)
    root = Path(tempfile.mkdtemp(prefix="sealed-"))
    try:
        shell = Sealed(root)
        yield shell
        assert tree(shell.home) == set(), "written in HOME"
        assert tree(shell.tmp) == set(), "temporary files not removed"
        assert tree(CHECKOUT, TOOL_CACHES) ^ checkout == set(), "files appeared in the checkout, or went"
    finally:
        shutil.rmtree(root)


def stop(process: subprocess.Popen) -> None:
    process.send_signal(signal.SIGTERM)
    process.wait(timeout=60)


def test_the_demo_a_crawl_and_the_commands_it_suggests(sealed):
    sealed.run(sys.executable, "-m", "webrace.demo", "--keep", "kept")
    kept = sealed.work / "kept"
    for command in (["urd", "list"], ["aci", "list", "--owner", "alice"], ["ipmicra", "samples", "ipmicra"]):
        sealed.run(sys.executable, "-m", "scrapy", *command, cwd=kept)
    assert sorted(p.name for p in sealed.work.iterdir()) == ["kept"]


@pytest.mark.usefixtures("needs_browser")
def test_the_dynabot_services_and_a_browser_mode_crawl(sealed):
    services = sealed.start(sys.executable, "-m", "webrace.demo.services")
    try:
        base = services.stdout.readline().split()[0].rstrip("/")
        line = ""
        for _ in range(100):  # the start pages, then the seeds file
            line = services.stdout.readline()
            if not line or line.startswith("seeds: "):
                break
        seeds = sealed.work / "dynabot-seeds.txt"
        assert line.startswith(f"seeds: {seeds}") and seeds.exists()
        (sealed.work / "scripted.txt").write_text(f"{base}/scripted-blastn/\n")
        sealed.run(sys.executable, "-m", "scrapy", "crawl", "dynabot", "-a",
                   f"scd={CHECKOUT / 'serviceclasses' / 'nucleotide_blast.xml'}", "-a", "seeds=scripted.txt",
                   "-O", "services.jsonl", "-s", "TELNETCONSOLE_ENABLED=False", "-s", "DOWNLOAD_DELAY=0",
                   "-s", "WEBRACE_DELAY_FACTOR=0", SCRAPY_SETTINGS_MODULE="webrace.settings")
    finally:
        stop(services)
    assert '"kind": "profile"' in (sealed.work / "services.jsonl").read_text()  # the browser found the form
    assert not seeds.exists()  # its addresses went with the services
    assert sorted(p.name for p in sealed.work.iterdir()) == [".webrace", "scripted.txt", "services.jsonl"]


LAUNCH = """\
import sys
from playwright.sync_api import sync_playwright
from webrace.dynabot import browser
with sync_playwright() as playwright:
    chromium = playwright.chromium.launch(**browser.launch_options(None), env=browser.browser_env(sys.argv[1]))
    page = chromium.new_page()
    page.set_content("<p>shown</p>")
    assert page.inner_text("p") == "shown"
    chromium.close()
"""


@pytest.mark.usefixtures("needs_browser")
def test_the_browser_the_web_app_tests_drive(sealed):
    """As tests/test_web_browser.py and test_web_proxy.py launch it: its home a directory of the test's."""
    (sealed.work / "chromium-home").mkdir()
    sealed.run(sys.executable, "-c", LAUNCH, str(sealed.work / "chromium-home"))


def test_a_real_application_served_by_gunicorn(sealed):
    sys.path.insert(0, str(CHECKOUT / "holdout"))
    try:
        from realapps.common import cache_dir
        from realapps.serve import installed
    finally:
        sys.path.remove(str(CHECKOUT / "holdout"))
    if not installed("django"):
        pytest.skip("the real applications are not installed (python holdout/realapps/install.py)")
    apps = sealed.start(sys.executable, str(CHECKOUT / "holdout" / "realapps" / "serve.py"), "--apps", "django",
                        WEBRACE_REALAPPS_DIR=str(cache_dir()))
    try:
        assert apps.stdout.readline().startswith("django")  # started and answering
    finally:
        stop(apps)
    assert apps.returncode == 0
