"""docs/service-classes.md, followed as written: its complete XML blocks load, and its final
class, run with its own command line against a real ``python -m pydoc`` server on 127.0.0.1,
finds pydoc's module search and nothing that only looks like it."""

from __future__ import annotations

import functools
import json
import re
import shlex
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from conftest import Project

from scd import load_scd

ROOT = Path(__file__).resolve().parent.parent
GUIDE = (ROOT / "docs" / "service-classes.md").read_text(encoding="utf-8")
BLOCK = re.compile(r"(?:<!-- scd: ([\w ]+) -->\n)?```(\w+)\n(.*?)```", re.S)


def blocks(language: str, mark: str | None = None) -> list[str]:
    """The guide's fenced blocks in ``language``; with ``mark``, those whose marker comment
    (``<!-- scd: complete final -->``) names it."""
    return [body for marks, lang, body in BLOCK.findall(GUIDE)
            if lang == language and (mark is None or mark in marks.split())]


@pytest.fixture(scope="module")
def pydoc() -> Iterator[str]:
    """``python -m pydoc -n 127.0.0.1 -p 0``, as the guide starts it; its URL."""
    command = shlex.split(next(b for b in blocks("sh") if "pydoc" in b))
    assert command[:3] == ["python", "-m", "pydoc"]
    server = subprocess.Popen([sys.executable, *command[1:]], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True)
    try:
        line = server.stdout.readline()  # "Server ready at http://127.0.0.1:PORT/"
        url = re.search(r"http://127\.0\.0\.1:\d+/", line)
        assert url, line
        yield url[0]
    finally:
        server.stdin.write("q\n")  # pydoc's own "quit" command
        server.stdin.close()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


@pytest.fixture
def static_copy(tmp_path: Path, pydoc: str) -> Iterator[str]:
    """pydoc's answer to "socket", saved as a static page whose forms point at itself and served
    by http.server: it shows module links holding "socket" whatever is asked."""
    with urllib.request.urlopen(pydoc + "search?key=socket", timeout=60) as answer:
        page = answer.read().decode()
    assert 'href="socket.html"' in page
    root = tmp_path / "copy"
    root.mkdir()
    (root / "index.html").write_text(re.sub(r'action="(?:get|search)"', 'action="index.html"', page))

    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(root)))
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def test_the_guides_complete_class_files_load(tmp_path):
    """Every block the guide calls complete is a valid SCD; the final one is among them."""
    complete = blocks("xml", "complete")
    assert len(complete) >= 2 and len(blocks("xml", "final")) == 1
    for number, text in enumerate(complete):
        path = tmp_path / f"step-{number}.xml"
        path.write_text(text, encoding="utf-8")
        assert load_scd(str(path)).name == "ModuleSearch"


def test_the_guides_type_example_holds(tmp_path):
    """Step 2's Python lines, on the final class: a module link's elements."""
    path = tmp_path / "module_search.xml"
    path.write_text(blocks("xml", "final")[0], encoding="utf-8")
    found = load_scd(str(path)).recognizer().find("ModuleLink", '<a href="socket.html">socket</a>',
                                                    {"keyword": "socket"})
    assert found.elements == {"url": ["socket.html"], "module": ["socket"]}
    assert "{'url': ['socket.html'], 'module': ['socket']}" in blocks("python")[0]


def test_the_guides_class_and_command_find_pydocs_module_search(project: Project, pydoc: str, static_copy: str):
    """The guide's final class and command line: pydoc's start page is a member, its results are
    module links holding the keyword, nothing was posted; the static copy of an answer (which
    does not depend on the query) is no member: its control probe blocks the claim."""
    project.write("module_search.xml", blocks("xml", "final")[0])
    project.write("seeds.txt", f"{pydoc}\n{static_copy}\n")
    command = shlex.split(next(b for b in blocks("sh") if "scrapy crawl dynabot" in b))
    assert command[:3] == ["scrapy", "crawl", "dynabot"] and "scd=module_search.xml" in command
    done = project.scrapy(*command[1:], "-s", "DOWNLOAD_DELAY=0", "-s", "WEBRACE_DELAY_FACTOR=0",
                          "-s", "TELNETCONSOLE_ENABLED=False", timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    items = [json.loads(line) for line in (project.root / "out.jsonl").read_text().splitlines()]
    profiles = {i["source"]: i for i in items if i["kind"] == "profile"}
    traces = {i["source"]: i for i in items if i["kind"] == "trace"}

    assert set(profiles) == {pydoc}
    profile = profiles[pydoc]
    assert traces[pydoc]["outcome"] == "match"
    assert profile["service_class"] == "ModuleSearch" and profile["arguments"] == {"keyword": "key"}
    assert profile["form"]["action"] == pydoc + "search"
    assert [s["vertex"] for s in profile["states"]] == ["start", "results"]
    modules = [e["elements"]["module"][0] for e in profile["extracted"]]
    assert "socket" in modules and all("socket" in m.lower() for m in modules)
    assert all(e["elements"]["url"][0].endswith(".html") for e in profile["extracted"])
    assert profile["evidence"]["control"]["keyword"] != "socket"

    # no POST: every form DynaBot read is a GET form, and so is the one the profile queries
    assert profile["form"]["method"] == "GET"
    assert all(f["method"] == "GET" for t in traces.values() for f in t["forms"])

    copy = traces[static_copy]
    assert copy["outcome"] == "no-match"
    assert "no control probe backed" in copy["reason"]
    assert any(s["why"].startswith("control:") and "blocks the claim" in s["answer"] for s in copy["steps"])
