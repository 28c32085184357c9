"""DynaBot on documentation sites whose search runs in JavaScript, as real software built them:
Python's documentation (Sphinx: ``search.html?q=`` is empty as served, searchtools.js writes the
results) and MkDocs' (a search dialog with an unnamed field, answered as one types), from
Debian's ``python3.11-doc`` and ``mkdocs-doc`` (``python holdout/realapps/install.py --apps
pythondocs,mkdocs`` installs them), each served as static files on 127.0.0.1."""

from __future__ import annotations

import functools
import json
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

pytestmark = pytest.mark.xdist_group("dynabot_browser")  # one worker drives Chromium at a time

ROOT = Path(__file__).resolve().parent.parent
SPHINX = Path("/usr/share/doc/python3.11-doc/html")
MKDOCS = Path("/usr/share/doc/mkdocs/html")
needs_chromium = pytest.mark.usefixtures("needs_browser")  # decided when the first such test runs
needs_docs = pytest.mark.skipif(not (SPHINX / "search.html").exists() or not (MKDOCS / "index.html").exists(),
                                reason="needs Debian's python3.11-doc and mkdocs-doc (apt-get install python3.11-doc "
                                       "mkdocs-doc, or python holdout/realapps/install.py --apps pythondocs,mkdocs)")


class Docs:
    """A directory served on a free port of 127.0.0.1, every request path kept."""

    def __init__(self, root: Path) -> None:
        self.requests: list[str] = []
        self.methods: list[str] = []  # each request's method (a POST is answered 501)
        docs = self

        class Handler(SimpleHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:
                docs.requests.append(self.path)
                docs.methods.append(self.command)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=str(root)))
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def docs() -> Iterator[dict[str, Docs]]:
    served = {"sphinx": Docs(SPHINX), "mkdocs": Docs(MKDOCS)}
    try:
        yield served
    finally:
        for site in served.values():
            site.close()


def crawl(project, docs: dict[str, Docs], *settings: str, word: str = "theme",
          names: tuple[str, ...] = ("sphinx", "mkdocs")) -> tuple[object, dict[str, dict]]:
    """The shipped keyword-search class, probing with a word both sites hold ("theme")."""
    scd = (ROOT / "serviceclasses" / "keyword_search.xml").read_text(encoding="utf-8")
    project.write("theme.xml", scd.replace("<value>crawler</value>", f"<value>{word}</value>"))
    project.write("seeds.txt", "".join(docs[name].url + "\n" for name in names))
    out = project.root / "out.jsonl"
    done = project.scrapy("crawl", "dynabot", "-a", "scd=theme.xml", "-a", "seeds=seeds.txt", "-O", str(out),
                          "-s", "DOWNLOAD_DELAY=0", "-s", "WEBRACE_DELAY_FACTOR=0", "-s", "TELNETCONSOLE_ENABLED=False",
                          "-s", "LOG_LEVEL=INFO", *settings, timeout=300)
    found: dict[str, dict] = {}
    for line in out.read_text().splitlines() if out.exists() else []:
        item = json.loads(line)
        name = next(name for name in docs if item["source"] == docs[name].url)
        found.setdefault(name, {})[item["kind"]] = item
    return done, found


@needs_docs
@needs_chromium
def test_a_sphinx_search_page_and_a_mkdocs_search_dialog_are_found_in_browser_mode(docs, project):
    done, found = crawl(project, docs)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    # Sphinx: the form is plain, its answer written by searchtools.js: shown in the browser
    sphinx = found["sphinx"]
    assert sphinx["trace"]["outcome"] == "match", sphinx["trace"]
    assert "the answer is built by scripts" in sphinx["trace"]["steps"][0]["answer"]
    assert sphinx["profile"]["states"][-1] == {"vertex": "results", "url": docs["sphinx"].url + "search.html?q=theme",
                                               "browser": True}
    assert any("data-score" in r["text"] for r in sphinx["profile"]["extracted"])  # written by searchtools.js
    assert "/searchindex.js" in docs["sphinx"].requests
    # MkDocs: the dialog's field has no name; typed into, answered without a submission
    mkdocs = found["mkdocs"]
    assert mkdocs["trace"]["outcome"] == "match", mkdocs["trace"]
    assert mkdocs["profile"]["fields"] == [["#mkdocs-search-query", "theme"]]
    assert "typed into, not submitted" in mkdocs["trace"]["steps"][-1]["answer"]
    assert mkdocs["profile"]["states"][-1]["url"] == docs["mkdocs"].url
    assert any('href="./user-guide/configuration.html#theme"' in r["text"] for r in mkdocs["profile"]["extracted"])
    assert not [path for path in docs["mkdocs"].requests if "?" in path]  # nothing was submitted


@needs_docs
def test_without_the_browser_the_reason_says_the_answer_is_built_by_scripts(docs, project):
    done, found = crawl(project, docs, "-s", "WEBRACE_DYNABOT_BROWSER=False")
    assert done.returncode == 0, done.stderr[-3000:]
    trace = found["sphinx"]["trace"]
    assert trace["outcome"] == "no-match" and "profile" not in found["sphinx"]
    assert "the answer is built by scripts (" in trace["reason"]
    assert "<script> elements, no results in its HTML); browser mode off (-s WEBRACE_DYNABOT_BROWSER=auto" \
        in trace["reason"]
    assert "browser mode off" in found["mkdocs"]["trace"]["reason"]


@needs_docs
@needs_chromium
def test_a_word_of_the_sites_own_menus_sent_to_sphinx_is_answered_by_what_its_scripts_write(docs, project):
    """Sent "python", search.html holds links followed by the word before any script runs (the
    header's "Python 3.11 Documentation"): those are the menus, not the answer, which is read in
    the browser; the nonsense probe's answer backs it."""
    done, found = crawl(project, docs, word="python", names=("sphinx",))
    assert done.returncode == 0, done.stderr[-3000:]
    trace = found["sphinx"]["trace"]
    assert trace["outcome"] == "match", trace
    assert "its only results are the site's own links): shown in the browser" in trace["steps"][0]["answer"]
    assert found["sphinx"]["profile"]["states"][-1]["browser"] is True
    assert all("data-score" in r["text"] for r in found["sphinx"]["profile"]["extracted"])  # searchtools.js' results


SLOW_SEARCH = """<!doctype html><html><head><title>Finder</title></head><body><div id="results"></div>
<script>
const word = new URLSearchParams(location.search).get("q") || "";
const box = document.getElementById("results");
const start = Date.now();
while (Date.now() - start < 800) {}  // building an index: the thread is busy, nothing is in flight
let n = 0;
const next = () => {  // then the results, one every 60 ms, as Sphinx writes its own
  if (n++ < 25) { box.insertAdjacentHTML("beforeend", "<p>...</p>"); setTimeout(next, 60); return; }
  box.innerHTML = word === "lantern"
    ? [1, 2, 3].map(i => `<p><a href="/doc${i}.html">Doc ${i}</a> on the lantern, part ${i}</p>`).join("")
    : "<p>Your search did not match any documents.</p>";
};
setTimeout(next, 0);
</script></body></html>"""


@needs_chromium
def test_results_a_script_writes_after_the_network_is_quiet_are_read_once_the_page_settles(project, tmp_path):
    """The answer's script spends 0.8 s of thread and then 1.5 s writing, with no request in
    flight: the network is quiet long before the results are there."""
    root = tmp_path / "finder"
    root.mkdir()
    (root / "index.html").write_text('<form action="search.html"><input name="q"><input type="submit"></form>'
                                     "<p>Lantern notes and lantern parts.</p>")
    (root / "search.html").write_text(SLOW_SEARCH)
    site = Docs(root)
    try:
        done, found = crawl(project, {"finder": site}, word="lantern", names=("finder",))
    finally:
        site.close()
    assert done.returncode == 0, done.stderr[-3000:]
    trace = found["finder"]["trace"]
    assert trace["outcome"] == "match", trace
    assert [r["text"].split('"')[1] for r in found["finder"]["profile"]["extracted"]] == [
        "/doc1.html", "/doc2.html", "/doc3.html"]
    assert "did not match any" in found["finder"]["profile"]["evidence"]["no_results"]


BOX_PAGE = """<!doctype html><html><head><title>Lantern notes</title></head><body>
<h1>Lantern notes</h1><div class="header"><input type="search" id="site-search" placeholder="Search"></div>
<ul id="pages"><li><a href="/a.html">About the lantern club</a></li><li><a href="/b.html">Lantern parts</a></li>
<li><a href="/c.html">Opening hours</a></li></ul>
<script>
document.getElementById("site-search").addEventListener("keydown", event => {
  if (event.key === "Enter") location.href = "search.html?q=" + encodeURIComponent(event.target.value);
});
</script></body></html>"""

BOX_ANSWER = """<!doctype html><html><head><title>Search</title></head><body><div id="results"></div>
<script>
const word = (new URLSearchParams(location.search).get("q") || "").toLowerCase();
document.getElementById("results").innerHTML = word === "lantern"
  ? [1, 2, 3].map(i => `<p><a href="/doc${i}.html">Doc ${i}</a> on the lantern, part ${i}</p>`).join("")
  : "<p>No results found.</p>";
</script></body></html>"""

# what DynaBot must not claim: a box in no form whose script hides or removes the page's own
# links as one types (webrace.demo.scripted's look-alike, without "hidden")
FILTER_PAGE = """<!doctype html><html><head><title>Lantern notes</title></head><body>
<h1>Lantern notes</h1><p><input type="search" id="filter" placeholder="Filter"></p><ul id="pages"></ul>
<script>
const all = [["/a.html", "About the lantern club"], ["/b.html", "Lantern parts and lantern glass"],
             ["/c.html", "Opening hours"], ["/d.html", "The lantern walk"]];
const show = word => { document.getElementById("pages").innerHTML = all
  .filter(([, text]) => text.toLowerCase().includes(word.toLowerCase()))
  .map(([href, text]) => `<li><a href="${href}">${text}</a></li>`).join(""); };
show("");
document.getElementById("filter").addEventListener("input", event => show(event.target.value));
</script></body></html>"""


@needs_chromium
def test_a_search_box_outside_any_form_is_typed_into_and_enter_pressed_in_browser_mode(project, tmp_path):
    """A search box no <form> holds, wired by a script to Enter (it loads search.html?q=...,
    whose script writes the results): typed into in the browser, Enter pressed, its answer
    claimed once the nonsense probe's answer ("No results found.") backs it."""
    root = tmp_path / "box"
    root.mkdir()
    (root / "index.html").write_text(BOX_PAGE)
    (root / "search.html").write_text(BOX_ANSWER)
    site = Docs(root)
    try:
        done, found = crawl(project, {"box": site}, word="lantern", names=("box",))
    finally:
        site.close()
    assert done.returncode == 0, done.stderr[-3000:]
    trace, profile = found["box"]["trace"], found["box"].get("profile")
    assert trace["outcome"] == "match", trace
    assert "a search box outside any form: typed into, Enter pressed" in trace["steps"][1]["answer"]
    assert profile["fields"] == [["#site-search", "lantern"]]
    assert profile["states"][-1]["url"].endswith("/search.html?q=lantern")
    assert [r["text"].split('"')[1] for r in profile["extracted"]] == ["/doc1.html", "/doc2.html", "/doc3.html"]
    assert "No results found" in profile["evidence"]["no_results"]
    assert set(site.methods) == {"GET"}


@needs_chromium
def test_a_box_outside_any_form_that_filters_the_pages_own_links_is_not_claimed(project, tmp_path):
    """Typing "lantern" leaves the page's own links that hold it, the nonsense word none: the
    answer depends on the query, but its results are what the page showed anyway."""
    root = tmp_path / "filter"
    root.mkdir()
    (root / "index.html").write_text(FILTER_PAGE)
    site = Docs(root)
    try:
        done, found = crawl(project, {"filter": site}, word="lantern", names=("filter",))
    finally:
        site.close()
    assert done.returncode == 0, done.stderr[-3000:]
    trace = found["filter"]["trace"]
    assert trace["outcome"] == "no-match" and "profile" not in found["filter"], trace
    assert any("its only results are links the page showed before: a filter of the page" in step["answer"]
               for step in trace["steps"]), trace["steps"]


WIDGET_PAGE = """<!doctype html><html><head><title>Lantern notes</title></head><body>
<h1>Lantern notes</h1><p>Lantern notes, lantern parts and the lantern walk.</p>
<div id="postbox"><p><input type="text" id="search-name" placeholder="Your name"></p>
<textarea id="comment"></textarea><button id="post">Post</button></div>
<script>
const send = () => fetch("/comments", {method: "POST", body: document.getElementById("comment").value});
document.getElementById("search-name").addEventListener("keydown", event => { if (event.key === "Enter") send(); });
document.getElementById("post").addEventListener("click", send);
</script></body></html>"""


@needs_chromium
def test_a_box_in_no_form_beside_a_comment_field_is_never_typed_into(project, tmp_path):
    """A comment widget built without a <form> (its name box says "search" in its id, Enter in
    it posts the comment): a text area beside it says what it is; no request but GETs."""
    root = tmp_path / "widget"
    root.mkdir()
    (root / "index.html").write_text(WIDGET_PAGE)
    site = Docs(root)
    try:
        done, found = crawl(project, {"widget": site}, word="lantern", names=("widget",))
    finally:
        site.close()
    assert done.returncode == 0, done.stderr[-3000:]
    trace = found["widget"]["trace"]
    assert trace["outcome"] == "no-form" and trace["forms"] == [], trace
    assert set(site.methods) == {"GET"} and "/comments" not in site.requests
