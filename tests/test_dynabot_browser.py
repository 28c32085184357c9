"""DynaBot's browser mode (webrace.dynabot.browser): script-built forms rendered, filled and
submitted in Debian's Chromium through scrapy-playwright, within the crawl's manners.

The crawl tests run a small spider of their own (the functions the DynaBot spider calls) with
`scrapy runspider` against the local services (webrace.demo.services and .scripted) and a
page of the tests' own server; they are skipped, saying why, when the browser cannot run."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace

import pytest
from conftest import Project, Site, _Handler
from scrapy.settings import Settings

from webrace.demo.services import Services
from webrace.dynabot import browser
from webrace.dynabot.forms import analyze_forms

needs_chromium = pytest.mark.usefixtures("needs_browser")  # decided when the first such test runs
# one worker runs this module (setup.cfg: --dist loadgroup): its module-wide set-up is paid once
pytestmark = pytest.mark.xdist_group("dynabot_browser")

# -- without a browser ---------------------------------------------------------------------------


def test_needs_browser_only_for_pages_with_scripts_and_no_usable_form():
    scripted = b'<html><body><div id="app"></div><script src="app.js"></script></body></html>'
    assert browser.needs_browser(scripted, [])
    assert browser.needs_browser("<p>x</p><script>\n build()\n</script>", [])
    assert not browser.needs_browser(scripted, analyze_forms('<form><input name="q"></form>', "http://127.0.0.1/"))
    assert not browser.needs_browser("<p>no scripts at all</p>", [])
    assert not browser.needs_browser("<script>   </script><script type='application/ld+json'>{}</script>", [])
    assert browser.needs_browser('<script type="module">import "./a.js"</script>', [])
    assert not browser.needs_browser(b"", [])


def test_an_answer_is_built_by_scripts_when_it_has_scripts_and_does_not_reflect_the_query():
    form_page = '<p>Theme: <select><option>dark</option></select></p><form action="search.html"><input name="q">'
    sphinx = ('<p>Theme: <select><option>dark</option></select></p><div id="search-results"></div>'
              '<script src="searchindex.js" defer></script><script>Search.init()</script>')
    assert browser.built_by_scripts(sphinx, ["socket"], form_page) == 2
    assert browser.built_by_scripts(sphinx, ["theme"], form_page) == 2  # a word of the site's own menus
    echoed = '<input name="q" value="socket"><p>0 rows where search matches "socket"</p><script src="a.js"></script>'
    assert browser.built_by_scripts(echoed, ["socket"], form_page) == 0
    assert browser.built_by_scripts(echoed.replace('"socket"', '"a &lt;b&gt;"'), ["a <b>"], form_page) == 0
    assert browser.built_by_scripts("<p>nothing found</p>", ["socket"], form_page) == 0  # no scripts
    assert browser.built_by_scripts(sphinx, [None, ""], form_page) == 0  # nothing sent to look for
    assert browser.scripts('<script type="application/ld+json">{}</script><script src="a.js"></script>') == 1


def test_browser_settings_keep_other_handlers_and_use_the_configured_chromium():
    settings = Settings({"DOWNLOAD_HANDLERS": {"ftp": None}, "WEBRACE_BROWSER_EXECUTABLE": "/opt/chromium",
                         "WEBRACE_BROWSER_TIMEOUT": 12})
    found = browser.browser_settings(settings)
    assert found["DOWNLOAD_HANDLERS"] == {"ftp": None, "http": browser.HANDLER, "https": browser.HANDLER}
    assert found["TWISTED_REACTOR"] == "twisted.internet.asyncioreactor.AsyncioSelectorReactor"
    assert found["PLAYWRIGHT_BROWSER_TYPE"] == "chromium"
    options = found["PLAYWRIGHT_LAUNCH_OPTIONS"]
    assert options["executable_path"] == "/opt/chromium" and options["headless"] is True
    assert "--disable-popup-blocking" in options["ignore_default_args"]
    assert found["PLAYWRIGHT_DEFAULT_NAVIGATION_TIMEOUT"] == 6000
    assert found["PLAYWRIGHT_ABORT_REQUEST"] == "webrace.dynabot.browser.abort_request"
    assert browser.launch_options(Settings({"WEBRACE_BROWSER_SANDBOX": "false"}))["chromium_sandbox"] is False
    assert browser.available(Settings({"WEBRACE_BROWSER_EXECUTABLE": "/nonexistent/chromium"})) in (
        browser.available(), "no Chromium at /nonexistent/chromium (WEBRACE_BROWSER_EXECUTABLE; on Debian: "
                     "apt-get install chromium)")


def _request(url: str, page_url: str, kind: str = "script", navigation: bool = False, top: bool = True):
    frame = SimpleNamespace(page=SimpleNamespace(url=page_url), parent_frame=None if top else object())
    return SimpleNamespace(url=url, resource_type=kind, frame=frame, is_navigation_request=lambda: navigation)


def test_the_abort_rule_keeps_pages_on_their_own_host():
    page = "http://127.0.0.1:8000/blast/"
    assert not browser.abort_request(_request("http://127.0.0.1:8000/blast/api", page, "fetch"))
    assert browser.abort_request(_request("http://127.0.0.2:9/blast", page, "document", navigation=True))
    assert browser.abort_request(_request("http://127.0.0.1:8000/logo.png", page, "image"))
    assert browser.abort_request(_request("http://127.0.0.1:8000/f.woff2", page, "font"))
    # the page's own first navigation (from about:blank) goes; nothing else from a blank page
    assert not browser.abort_request(_request(page, "about:blank", "document", navigation=True))
    assert browser.abort_request(_request("http://127.0.0.1:8000/x.js", "about:blank", "script"))


@needs_chromium
def test_requests_are_gets_through_the_browser_never_filtered_as_duplicates():
    request = browser.probe_request("http://127.0.0.1:1/p/", 0, {"seq": "ACGT", "db": ("nt",)}, "go",
                                    meta={"dynabot": "probe"}, priority=3)
    assert request.method == "GET" and request.dont_filter and request.priority == 3
    assert request.meta["playwright"] and request.meta["dynabot"] == "probe"
    assert request.meta["webrace_browser"]["mode"] == "probe"
    with pytest.raises(ValueError):
        browser.render_request("http://127.0.0.1:1/", method="POST")


# -- a crawl -------------------------------------------------------------------------------------

DNA = ">probe\nTGGCAGGCGTCCTGCTTTAACGGTTACGATCGATCGGGCTAGCTAGCATCGACTAGC\nTACGACTGACTGACGATCGTAGCTAGCGGGCGA"

SPIDER = '''
import json

import scrapy

from webrace.dynabot import browser
from webrace.dynabot.analyzer import submit_button
from webrace.dynabot.forms import analyze_forms
from webrace.middlewares.exclusion import IGNORED

DNA = DNA_HERE
# what a probe fills in (the default: the sequence in every text input)
ASSIGNMENTS = {("scripted-blastn", 0): {"seq": DNA, "db": "refseq_rna"},
               ("blastn-post", 0): {"QUERY_DATA": DNA, "PROGRAM": "blastn", "DATABASE": "est"},
               ("site", 2): {"word": "hello", "one": "b", "many": ["x", "z"], "r": "r2", "c": ["c1"]},
               ("live", 0): {"#live-query": "crawler"}}


class BrowserTestSpider(scrapy.Spider):
    """What the DynaBot spider does with browser pages, without its analysis."""

    name = "browser-test"

    @classmethod
    def update_settings(cls, settings):
        super().update_settings(settings)
        settings.setdict(browser.browser_settings(settings), priority="spider")

    def __init__(self, services, site, stats, **kwargs):
        super().__init__(**kwargs)
        self.services, self.site, self.stats_file = services, site, stats

    async def start(self):
        for name in ("scripted-blastn", "scripted-news", "scripted-offsite", "blastn-get", "blastn-post",
                     "blastn-multipart"):
            yield scrapy.Request(f"{self.services}/{name}/", callback=self.plain, cb_kwargs={"name": name})
        yield scrapy.Request(self.site + "page", callback=self.plain, cb_kwargs={"name": "site"})
        yield scrapy.Request(self.site + "live", callback=self.plain, cb_kwargs={"name": "live"})
        yield browser.render_request(f"{self.services}/private/", callback=self.rendered, errback=self.failed,
                                     cb_kwargs={"name": "private"})

    def plain(self, response, name):
        forms = [f for f in analyze_forms(response.body, response.url, response.encoding)
                 if any(p.name for p in f.parameters)]
        needs = browser.needs_browser(response.body, forms)
        yield {"kind": "plain", "name": name, "flags": response.flags, "forms": len(forms), "needs_browser": needs}
        if needs:
            yield browser.render_request(response.url, callback=self.rendered, errback=self.failed,
                                         cb_kwargs={"name": name})
        elif name in ("blastn-post", "blastn-multipart"):  # forms the browser sends itself (navigating)
            form = forms[0]
            assignment = ASSIGNMENTS.get((name, 0)) or {p.name: DNA for p in form.text_inputs()}
            yield browser.probe_request(response.url, 0, assignment, submit_button(form), callback=self.probed,
                                        errback=self.failed, cb_kwargs={"name": name, "form": 0})

    def rendered(self, response, name):
        forms = analyze_forms(response.body, response.url, response.encoding)
        yield {"kind": "rendered", "name": name, "flags": response.flags, "url": response.url,
               "status": response.status, "state": response.meta["webrace_browser"],
               "ua": response.css("#ua::text").get(),
               "forms": [{"action": f.action, "method": f.method, "parameters": {p.name: p.kind for p in f.parameters},
                          "options": {p.name: [o.value for o in p.options] for p in f.parameters if p.options}}
                         for f in forms]}
        for form in forms:
            assignment = ASSIGNMENTS.get((name, form.index)) or {p.name: DNA for p in form.text_inputs()}
            yield browser.probe_request(response.url, form.index, assignment, submit_button(form),
                                        callback=self.probed, errback=self.failed,
                                        cb_kwargs={"name": name, "form": form.index})
        if name == "scripted-blastn":  # what a probe of a form the page does not have gives
            yield browser.probe_request(response.url, 7, {"seq": DNA}, None, callback=self.probed,
                                        errback=self.failed, cb_kwargs={"name": name, "form": 7})

    def probed(self, response, name, form):
        yield {"kind": "probe", "name": name, "form": form, "flags": response.flags, "url": response.url,
               "status": response.status, "state": response.meta["webrace_browser"],
               "report": "Sequences producing significant alignments" in response.text,
               "echoed": response.css("#echoed::text").get(), "results": response.css("#results").get(),
               "text": " ".join(response.css("body *::text").getall())[:3000]}

    def failed(self, failure):
        request = failure.request
        yield {"kind": "failed", "name": request.cb_kwargs.get("name"), "form": request.cb_kwargs.get("form"),
               "error": failure.type.__name__, "message": str(failure.value), "ignored": request.meta.get(IGNORED),
               "state": request.meta.get("webrace_browser")}

    def closed(self, reason):
        with open(self.stats_file, "w") as out:
            json.dump(self.crawler.stats.get_stats(), out, default=str)
'''.replace("DNA_HERE", repr(DNA))


def site_page(elsewhere: str, stun: str) -> str:
    """A page built by its script: three forms (one the browser sends to another host, one
    whose handler fetches another host, one whose handler shows what it would send), and
    sub-requests to another host (a frame, a WebSocket, preconnect hints, WebRTC), to a path
    robots.txt disallows, and an image."""
    return f"""<!DOCTYPE html>
<html><head><title>Scripted</title><link rel="preconnect" href="{elsewhere}">
<link rel="dns-prefetch" href="{elsewhere}"></head>
<body><p id="ua"></p><div id="app"></div><p id="out"></p><p id="echoed"></p><img src="/logo.png" alt="">
<iframe src="{elsewhere}/frame"></iframe>
<script>
document.getElementById('ua').textContent = navigator.userAgent;
fetch('/secret/data').catch(() => {{}});
fetch('/data.json').then(answer => answer.text()).then(text => {{ document.getElementById('out').title = text; }});
try {{ new WebSocket('{elsewhere.replace("http:", "ws:")}/socket'); }} catch (e) {{}}
try {{
  const peer = new RTCPeerConnection({{iceServers: [{{urls: '{stun}'}}]}});
  peer.createDataChannel('x');
  peer.createOffer().then(offer => peer.setLocalDescription(offer));
}} catch (e) {{}}
const away = document.createElement('form');
away.method = 'post'; away.action = '{elsewhere}/blast';
away.innerHTML = '<textarea name="sequence"></textarea><input type="submit" value="BLAST">';
const mixed = document.createElement('form');
mixed.innerHTML = '<textarea name="query"></textarea><button type="submit">Search</button>';
mixed.addEventListener('submit', event => {{
  event.preventDefault();
  fetch('{elsewhere}/api', {{method: 'POST', body: new FormData(mixed)}})
    .catch(() => {{ document.getElementById('out').textContent = 'could not reach the search server'; }});
}});
const echo = document.createElement('form');
echo.innerHTML = '<input name="word"><select name="one"><option>a</option><option>b</option></select>' +
  '<select name="many" multiple><option>x</option><option selected>y</option><option>z</option></select>' +
  '<input type="radio" name="r" value="r1" checked><input type="radio" name="r" value="r2">' +
  '<input type="checkbox" name="c" value="c1"><input type="checkbox" name="c" value="c2" checked>' +
  '<input type="hidden" name="h" value="keep">' +
  '<input type="submit" name="go" value="Clear"><input type="submit" name="go" value="Echo">';
echo.addEventListener('submit', event => {{
  event.preventDefault();
  document.getElementById('echoed').textContent = JSON.stringify([...new FormData(echo, event.submitter)]);
}});
document.getElementById('app').append(away, mixed, echo);
</script></body></html>"""


# A search dialog as MkDocs writes it: a form with no action and no button, whose field has no
# name; its script answers as one types (no request, no submission).
LIVE_PAGE = """<!DOCTYPE html>
<html><head><title>Notes</title></head>
<body><form><input type="search" id="live-query" placeholder="Search the notes"></form>
<div id="results"></div>
<script>
const notes = [["/notes/1", "Web crawler basics"], ["/notes/2", "Crawler politeness"], ["/notes/3", "Gardening"]];
document.getElementById('live-query').addEventListener('keyup', event => {
  const word = event.target.value.toLowerCase();
  document.getElementById('results').innerHTML = notes.filter(([, title]) => title.toLowerCase().includes(word))
    .map(([href, title]) => `<p><a href="${href}">${title}</a></p>`).join('') || '<p>No notes found</p>';
});
</script></body></html>"""


class Listener:
    """Counts the TCP connections made to a port of 127.0.0.2 (another host, on loopback),
    and the UDP datagrams sent to another (a STUN server's)."""

    def __init__(self) -> None:
        self.socket = socket.socket()
        self.socket.bind(("127.0.0.2", 0))
        self.socket.listen(8)
        self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.udp.bind(("127.0.0.2", 0))
        self.connections: list[tuple] = []
        self.datagrams: list[tuple] = []
        threading.Thread(target=self._accept, daemon=True).start()
        threading.Thread(target=self._receive, daemon=True).start()

    @property
    def stun(self) -> str:
        return f"stun:127.0.0.2:{self.udp.getsockname()[1]}"

    def _receive(self) -> None:
        while True:
            try:
                _, peer = self.udp.recvfrom(4096)
            except OSError:
                return
            self.datagrams.append(peer)

    @property
    def base(self) -> str:
        return f"http://127.0.0.2:{self.socket.getsockname()[1]}"

    def _accept(self) -> None:
        while True:
            try:
                connection, peer = self.socket.accept()
            except OSError:
                return
            self.connections.append(peer)
            connection.close()

    def close(self) -> None:
        self.socket.close()
        self.udp.close()


@dataclass
class Crawl:
    returncode: int
    stderr: str
    items: list[dict]
    stats: dict
    service_hits: list[dict]
    site: Site
    elsewhere: Listener
    tmp: Path  # the crawl's TMPDIR

    def one(self, kind: str, name: str, form: int | None = None) -> dict:
        found = [i for i in self.items if i["kind"] == kind and i["name"] == name
                 and (form is None or i.get("form") == form)]
        assert len(found) == 1, (kind, name, form, self.items)
        return found[0]


@pytest.fixture(scope="module")
def crawl(needs_browser, tmp_path_factory) -> Iterator[Crawl]:
    site = Site()
    server = ThreadingHTTPServer(("127.0.0.1", 0), type("Handler", (_Handler,), {"site": site}))
    server.daemon_threads = True
    site.port = server.server_address[1]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    elsewhere = Listener()
    try:
        site.robots("User-agent: *\nDisallow: /secret\n")
        site.add("/page", site_page(elsewhere.base, elsewhere.stun))
        site.add("/live", LIVE_PAGE)
        site.add("/data.json", '{"ok": true}', content_type="application/json")
        site.add("/secret/data", "secret", content_type="text/plain")
        with Services() as services:
            project = Project(tmp_path_factory.mktemp("browser"))
            tmp = project.root / "tmp"
            tmp.mkdir()
            project.env["TMPDIR"] = str(tmp)
            (project.root / "browser_spider.py").write_text(SPIDER, encoding="utf-8")
            out, stats = project.root / "items.jsonl", project.root / "stats.json"
            done = project.scrapy("runspider", "browser_spider.py", "-a", f"services={services.base}",
                                  "-a", f"site={site.url('/')}", "-a", f"stats={stats}", "-O", str(out),
                                  "-s", "DOWNLOAD_DELAY=0", "-s", "WEBRACE_DELAY_FACTOR=0", "-s", "RETRY_TIMES=0",
                                  "-s", "TELNETCONSOLE_ENABLED=False", "-s", "LOG_LEVEL=INFO", timeout=300)
            items = [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []
            figures = json.loads(stats.read_text()) if stats.exists() else {}
            result = Crawl(done.returncode, done.stderr, items, figures, services.hits(), site, elsewhere, tmp)
        yield result
    finally:
        elsewhere.close()
        site.stopping.set()
        server.shutdown()
        server.server_close()


def test_the_crawl_ends_cleanly(crawl):
    assert crawl.returncode == 0, crawl.stderr[-3000:]
    assert "Traceback" not in crawl.stderr, crawl.stderr[-3000:]


def test_the_rendered_dom_shows_the_form_a_script_built(crawl):
    plain = crawl.one("plain", "scripted-blastn")
    assert plain["forms"] == 0 and plain["needs_browser"] and "playwright" not in plain["flags"]
    rendered = crawl.one("rendered", "scripted-blastn")
    assert "playwright" in rendered["flags"] and rendered["status"] == 200
    (form,) = rendered["forms"]
    assert form["parameters"] == {"seq": "textarea", "db": "select"}
    assert form["options"]["db"] == ["nt", "refseq_rna", "est"]  # arrived by fetch before the form was built
    assert rendered["state"]["idle"] and rendered["state"]["aborted"] == []


def test_a_probe_fills_and_submits_the_form_and_answers_the_page_with_the_report(crawl):
    probe = crawl.one("probe", "scripted-blastn", 0)
    state = probe["state"]
    assert probe["report"] and "BLASTN 2.2.26" in probe["text"] and "Query= probe" in probe["text"]
    assert "Database: Reference RNA sequences" in probe["text"]  # the option chosen, not the default
    assert state["submitted"] and state["filled"] == ["seq", "db"] and state["submitter"] == "BLAST"
    assert not state["navigated"] and state["problem"] is None and probe["status"] == 200
    api = [h for h in crawl.service_hits if h["path"] == "/scripted-blastn/api"]
    assert [h["method"] for h in api] == ["POST"] and api[0]["body_size"] > 60
    missing = crawl.one("probe", "scripted-blastn", 7)["state"]
    assert not missing["submitted"] and "no form number 7" in missing["problem"]


def test_forms_the_browser_sends_itself_arrive_as_sent(crawl):
    for name, path in (("blastn-post", "/blastn-post/blast.cgi"), ("blastn-multipart", "/blastn-multipart/run")):
        probe = crawl.one("probe", name, 0)
        assert probe["report"], (name, probe["text"][:500])  # the server read the fields: Content-Type kept
        assert probe["state"]["navigated"] and probe["url"].endswith(path) and probe["status"] == 200
        (sent,) = [h for h in crawl.service_hits if h["path"] == path]
        assert sent["method"] == "POST" and sent["user_agent"].startswith("WebRACE/")
    assert crawl.one("probe", "blastn-post", 0)["state"]["submitter"] == "action"  # "Search", not "Clear"


def test_a_search_box_in_no_form_gets_a_form_of_its_own_and_is_answered_by_enter(crawl):
    """scripted-news' filter box belongs to no form: the rendered DOM gives it one (a GET of
    the page, its one field named after the box's id), which a probe types into and presses
    Enter in; the page does not navigate (the form's own submission is prevented)."""
    assert crawl.one("plain", "scripted-news")["needs_browser"]
    rendered = crawl.one("rendered", "scripted-news")
    assert rendered["forms"] == [{"action": rendered["url"], "method": "GET", "options": {},
                                  "parameters": {"#filter": "search"}}]
    assert rendered["state"]["aborted"] == [{"url": "http://127.0.0.2:9/collect?page=%2Fscripted-news%2F",
                                             "reason": "other host", "type": "fetch"}]
    assert rendered["state"]["named"] == ["#filter"]
    probe = crawl.one("probe", "scripted-news", 0)
    assert probe["state"]["filled"] == ["#filter"] and probe["state"]["submitter"] == "Enter"
    assert probe["state"]["submitted"] and not probe["state"]["navigated"] and probe["url"] == rendered["url"]
    assert not probe["state"]["problem"]


def test_a_form_sent_to_another_host_is_not_sent_and_says_so(crawl):
    (form,) = crawl.one("rendered", "scripted-offsite")["forms"]
    assert form["action"] == "http://127.0.0.2:9/blast" and form["method"] == "POST"
    failed = crawl.one("failed", "scripted-offsite", 0)
    assert failed["error"] == "IgnoreRequest" and failed["ignored"] == "other_host"
    assert "http://127.0.0.2:9/blast" in failed["message"] and failed["state"]["submitted"]
    assert failed["state"]["blocked"] == [{"url": "http://127.0.0.2:9/blast", "reason": "other host",
                                           "type": "document"}]


def test_requests_to_other_hosts_robots_disallowed_paths_and_heavy_types_are_aborted(crawl):
    rendered = crawl.one("rendered", "site")
    base = crawl.elsewhere.base
    aborted = {(a["url"], a["reason"]) for a in rendered["state"]["aborted"]}
    assert aborted == {(f"{base}/frame", "other host"), (f"{base.replace('http:', 'ws:')}/socket", "other host"),
                       (crawl.site.url("/secret/data"), "robots")}
    assert rendered["state"]["heavy"] == 1  # the image
    assert "/secret/data" not in crawl.site.paths() and "/logo.png" not in crawl.site.paths()
    assert "/data.json" in crawl.site.paths()
    # the form the browser itself would send elsewhere, and the one whose script fetches elsewhere
    away = crawl.one("failed", "site", 0)
    assert away["ignored"] == "other_host" and f"{base}/blast" in away["message"]
    mixed = crawl.one("probe", "site", 1)
    assert mixed["state"]["submitted"] and "could not reach the search server" in mixed["text"]
    assert mixed["state"]["blocked"] == [{"url": f"{base}/api", "reason": "other host", "type": "fetch"}]
    # not even a connection: no preconnect, no prefetch, no frame, no socket, no form, no STUN
    assert crawl.elsewhere.connections == [] and crawl.elsewhere.datagrams == []


def test_every_kind_of_control_is_filled_and_the_chosen_button_clicked(crawl):
    echo = crawl.one("probe", "site", 2)
    assert json.loads(echo["echoed"]) == [["word", "hello"], ["one", "b"], ["many", "x"], ["many", "z"], ["r", "r2"],
                                          ["c", "c1"], ["h", "keep"], ["go", "Echo"]]
    assert echo["state"]["filled"] == ["word", "one", "many", "r", "c"] and echo["state"]["submitter"] == "go"


def test_a_search_dialog_is_typed_into_and_answered_as_the_page_shows_it_not_submitted(crawl):
    assert crawl.one("plain", "live")["needs_browser"]  # its one form has no named field
    rendered = crawl.one("rendered", "live")
    (form,) = rendered["forms"]  # the field is named after its id
    assert list(form["parameters"]) == ["#live-query"] and rendered["state"]["named"] == ["#live-query"]
    probe = crawl.one("probe", "live", 0)
    state = probe["state"]
    assert state["typed"] and state["submitter"] == "typed" and not state["submitted"] and not state["navigated"]
    assert "Web crawler basics" in probe["results"] and "Crawler politeness" in probe["results"]
    assert "Gardening" not in probe["results"]
    assert [h.path for h in crawl.site.hits if h.path.startswith("/live")] == ["/live"] * 3  # nothing submitted


def test_robots_txt_and_the_user_agent_hold_for_browser_requests(crawl):
    private = crawl.one("failed", "private")
    assert private["error"] == "IgnoreRequest" and private["ignored"] == "robots"
    assert not [h for h in crawl.service_hits if h["path"].startswith("/private/")]
    assert crawl.service_hits and all(h["user_agent"].startswith("WebRACE/") for h in crawl.service_hits)
    assert all(header(h, "User-Agent").startswith("WebRACE/") for h in crawl.site.hits)
    assert crawl.one("rendered", "site")["ua"].startswith("WebRACE/")  # navigator.userAgent too


def test_ordinary_requests_of_the_same_crawl_use_scrapys_handler(crawl):
    plain = [i for i in crawl.items if i["kind"] == "plain"]
    assert len(plain) == 8 and not [i for i in plain if "playwright" in i["flags"]]
    assert not crawl.one("plain", "blastn-get")["needs_browser"]  # a form in its HTML: no browser
    # the browser sends Sec-Fetch-* headers, Scrapy's handler does not
    page_hits = [h for h in crawl.site.hits if h.path == "/page"]
    assert [bool(header(h, "Sec-Fetch-Mode")) for h in page_hits] == [False, True, True, True, True]
    assert not [h for h in crawl.site.hits if h.path == "/robots.txt" and header(h, "Sec-Fetch-Mode")]
    # renders (blastn, news, offsite, site, live), probes (2 + 1 + 1 + 3 + 1 + blastn-post, -multipart)
    browser_requests = 5 + 10
    assert crawl.stats["playwright/page_count"] == crawl.stats["webrace/browser/pages"] == browser_requests
    assert crawl.stats["downloader/request_count"] > browser_requests + len(plain)  # robots.txt too


def test_no_browser_profile_is_left_behind(crawl):
    assert crawl.stats["webrace/browser/pages"] and not list(crawl.tmp.glob("webrace-chromium-*"))


def header(hit, name: str) -> str:
    return next((value for key, value in hit.headers.items() if key.lower() == name.lower()), "")
