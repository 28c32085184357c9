"""The demos as the docs show them: `python -m webrace.demo --keep DIR` leaves a project
directory where the commands its closing tips print work as printed, and the DynaBot example
of docs/how-to/dynabot.md runs as written on `python -m webrace.demo.services`."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from webrace.demo.services import SERVICES
from webrace.dynabot import browser

# one worker runs this module (setup.cfg: --dist loadgroup): its module-wide set-up is paid once
pytestmark = pytest.mark.xdist_group("demo")

ROOT = Path(__file__).resolve().parent.parent

# A user's shell: no settings module nor data directory chosen for them.
USER_ENV = {k: v for k, v in os.environ.items() if k not in ("SCRAPY_SETTINGS_MODULE", "WEBRACE_DATA_DIR")}


def as_typed(line: str) -> str:
    """A printed command as this interpreter runs it (``scrapy`` and ``python`` may not be the
    ones on PATH)."""
    line = re.sub(r"(^|&& )scrapy ", rf"\1{sys.executable} -m scrapy ", line)
    return re.sub(r"^python ", f"{sys.executable} ", line)


@pytest.fixture(scope="module")
def kept(tmp_path_factory) -> tuple[Path, list[str], str]:
    root = tmp_path_factory.mktemp("demo") / "kept"
    done = subprocess.run([sys.executable, "-m", "webrace.demo", "--keep", str(root)], env=USER_ENV,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    tips = done.stdout.split("\nLook around", 1)[1]
    return root, [line.strip() for line in tips.splitlines() if line.startswith("  ")], done.stdout


def test_the_demo_counts_every_request_the_server_saw(kept):
    printed = kept[2]
    assert "Demo server: 18 page request(s) and 1 for robots.txt" in printed
    assert "Warning" not in printed  # robots.txt fetches are counted (robotstxt/request_count)


def test_kept_directory_is_a_project_directory_with_the_default_data_directory(kept):
    root, tips, _ = kept
    assert (root / "scrapy.cfg").exists() and (root / ".webrace" / "urd.sqlite").exists()
    assert tips[0] == f"cd {root}"


def test_the_closing_tips_work_as_printed_in_the_kept_directory(kept):
    root, tips, _ = kept
    listed = subprocess.run(as_typed(tips[1]), shell=True, cwd=root, env=USER_ENV, capture_output=True, text=True,
                            timeout=120)
    assert tips[1] == "scrapy urd list" and listed.returncode == 0, listed.stdout + listed.stderr
    assert "Unknown command" not in listed.stdout and "alice" in listed.stdout and "bob" in listed.stdout
    for tip in tips[2:4]:  # aci list, store versions
        done = subprocess.run(as_typed(tip), shell=True, cwd=root, env=USER_ENV, capture_output=True, text=True,
                              timeout=120)
        assert done.returncode == 0 and done.stdout.strip(), f"{tip}: {done.stderr[-2000:]}"


def test_the_site_served_again_as_the_tips_say_is_recrawled_with_conditional_gets(kept):
    root, tips, _ = kept
    serve, crawl = tips[4], tips[5]
    assert serve.startswith("python -m webrace.demo.server --port ") and serve.endswith(" &")
    server = subprocess.Popen(as_typed(serve.removesuffix(" &")).split(), cwd=root, env=USER_ENV,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout.readline().startswith("Serving ")
        done = subprocess.run(as_typed(crawl), shell=True, cwd=root, env=USER_ENV, capture_output=True, text=True,
                              timeout=300)
    finally:
        server.terminate()
        server.wait(timeout=10)
    assert done.returncode == 0, done.stderr[-3000:]
    pages = [json.loads(line) for line in (root / "round2.jsonl").read_text().splitlines()]
    assert pages and any(p.get("not_modified") for p in pages)


def page_commands(page: str, section: str) -> list[str]:
    """The ``$ `` lines of the first console block of a docs page's section ("On local services")."""
    text = (ROOT / "docs" / page).read_text(encoding="utf-8").split(f"\n## {section}\n", 1)[1].split("\n## ", 1)[0]
    block = text.split("```console\n", 1)[1].split("```", 1)[0]
    return [line[2:] for line in block.splitlines() if line.startswith("$ ")]


LISTED = [s for s in SERVICES if s.listed]


def test_the_docs_dynabot_example_runs_as_written_on_the_local_services(tmp_path):
    serve, *crawls = page_commands("how-to/dynabot.md", "On local services")
    assert serve == "python -m webrace.demo.services &" and len(crawls) == 2
    (tmp_path / "serviceclasses").symlink_to(ROOT / "serviceclasses")  # "from this repository"
    env = {**USER_ENV, "SCRAPY_SETTINGS_MODULE": "webrace.settings", "WEBRACE_DATA_DIR": str(tmp_path / "data")}
    with_browser = browser.available() is None  # as the crawls about to run decide it (the page's, as written)
    server = subprocess.Popen(as_typed(serve.removesuffix(" &")).split(), cwd=tmp_path, env=env,
                              stdout=subprocess.PIPE, text=True)
    try:
        printed = [server.stdout.readline() for _ in range(len(LISTED) + 2)]  # address, start pages, seeds
        assert printed[-1].startswith(f"seeds: {tmp_path / 'dynabot-seeds.txt'} ({len(LISTED)} start pages)")
        for crawl in crawls:
            done = subprocess.run(as_typed(crawl), shell=True, cwd=tmp_path, env=env, capture_output=True, text=True,
                                  timeout=300)
            assert done.returncode == 0, done.stderr[-3000:]
            if crawl == crawls[0]:
                items = [json.loads(line) for line in (tmp_path / "services.jsonl").read_text().splitlines()]
    finally:
        server.terminate()
        server.wait(timeout=10)
    members = sorted(i["source"].rsplit("/", 2)[1] for i in items if i["kind"] == "profile")
    assert members == sorted(s.name for s in LISTED if s.member_of == "nucleotide_blast"
                             and (with_browser or not s.name.startswith("scripted-")))
    assert len([i for i in items if i["kind"] == "trace"]) == len(LISTED)
