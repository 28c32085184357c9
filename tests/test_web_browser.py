"""The user tier in a real browser: Debian's Chromium driven by Playwright (launched from
/usr/bin/chromium, nothing downloaded) against the web app (webrace.web) served by its
production server (waitress) on 127.0.0.1.

One module-wide set-up, shared by every test: a site of the tests' own; two owners' URDs
and a sentinel put in the stores in-process, the sentinel's baseline being an earlier
version of its page; one real `scrapy crawl urd`, which makes the ACIs and, the page having
changed since that baseline, a notification; accounts made with ``open_accounts``; one
server; one browser. The run takes the screenshots docs/how-to/web-app.md shows (web-owner.png, web-diff.png)
and, with WEBRACE_SCREENSHOTS=1 in the environment, writes them to docs/img/ (otherwise to
a temporary directory, so that a test run leaves the checkout as it was). Skipped, saying
why, when the browser cannot run."""

from __future__ import annotations

import html
import http.client
import os
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from conftest import Project, Site, _Handler, urd
from playwright.sync_api import Browser, BrowserContext, Page, sync_playwright
from scrapy.settings import Settings

from webrace.backends import open_aci_store, open_sentinel_store, open_urd_store
from webrace.dynabot import browser as dynabot_browser
from webrace.records.sentinel import make
from webrace.sentinels.baseline import of_version
from webrace.settings import WEBRACE_SENTINEL_TICK as TICK
from webrace.urd import now_millis
from webrace.urd import parse as parse_urds
from webrace.web import server as web_server
from webrace.web.accounts import open_accounts

# The module's tests share one crawl and one browser: kept on one xdist worker under
# `--dist loadgroup` (under the default `load`, each worker that gets some builds its own).
# Whether the browser can run is decided when the first test runs, before the module's set-up.
pytestmark = [pytest.mark.usefixtures("needs_browser"), pytest.mark.xdist_group("web_browser")]

VIEWPORT = {"width": 1000, "height": 400}  # the screenshots grow to the page's height
DOCS_IMAGES = Path(__file__).parent.parent / "docs" / "img"  # where docs/how-to/web-app.md shows them from
PASSWORDS = {"alice": "correct horse battery staple", "bob": "tr0ub4dor&3 but longer"}

# Alice's page: her URD's keyword ("crawler") is in it and in the page it links to, so she
# gets two ACIs; her sentinel watches #news. Its script would retitle the page and write into
# it if it ever ran.
SCRIPT = ('<script>document.title = "script ran"; '
          'document.body.insertAdjacentHTML("beforeend", "<p id=injected>injected</p>")</script>')
NEWS = f"""<html><head><title>Crawler news</title></head><body>
<div id="news"><h2>Releases</h2><p>The crawler release ships on Monday with faster rounds.</p></div>
<div id="clock"><p>Updated 10:01</p></div>
<a href="/news/archive.html">archive</a>
{SCRIPT}
</body></html>"""
CHANGED = NEWS.replace("on Monday with faster", "on Tuesday with much faster")
ARCHIVE = """<html><head><title>Crawler archive</title></head><body>
<p>Older crawler releases, one per season.</p></body></html>"""
BOB = """<html><head><title>Gardening notes</title></head><body><p>Tomatoes and gardening tips.</p></body></html>"""


@dataclass
class World:
    """Everything the tests share: the app's address, the stores' settings, the site, the
    owners' ACIs and notification as the stores hold them."""

    base_url: str
    settings: Settings
    site: Site
    acis: dict[str, list]  # owner -> ACIs
    note: dict  # alice's notification


def _settings(data: Path) -> Settings:
    settings = Settings()
    settings.setmodule("webrace.settings", priority="project")
    settings.set("WEBRACE_DATA_DIR", str(data), priority="cmdline")
    return settings


@pytest.fixture(scope="module")
def news_site() -> Iterator[Site]:
    """The tests' own site on 127.0.0.1, for the whole module (conftest's is per test)."""
    site = Site(validators=True)
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), type("Handler", (_Handler,), {"site": site}))
    httpd.daemon_threads = True
    site.port = httpd.server_address[1]
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield site
    site.stopping.set()
    httpd.shutdown()
    httpd.server_close()


def _crawled(project: Project, settings: Settings, site: Site) -> tuple[dict[str, list], dict]:
    """URDs and a sentinel into the stores in-process, then one crawl: ACIs and a notification.

    The sentinel's baseline is the page's earlier version (``NEWS``), put in its store as
    `scrapy sentinel add` puts a stored version's (``of_version``); the site serves the
    changed page, so the one crawl makes the ACIs and the notification."""
    site.add("/news", CHANGED)
    site.add("/news/archive.html", ARCHIVE)
    site.add("/bob.html", BOB)
    news = site.url("/news")
    document = "<urds>" + urd("alice-news", "alice", news, depth=1, keywords={"crawler": 1}) + urd(
        "bob-garden", "bob", site.url("/bob.html"), keywords={"gardening": 1}) + "</urds>"
    with open_urd_store(settings) as store:
        store.put_many(parse_urds(document.encode()))
    now = now_millis()
    baseline = of_version(NEWS.encode(), "text/html")
    with open_sentinel_store(settings) as store:
        ids = store.add([make("alice", news, "content", "css:#news", tick_ms=int(TICK * 1000), now_ms=now)])
        store.put_digest(baseline.sha, baseline.data)
        store.checked(ids, now, seen=baseline.sha)
        store.make_due(ids, now)
    crawl = project.crawl(WEBRACE_DELIVERY=False)  # no channels here: delivery is test_delivery.py's
    assert crawl.returncode == 0, crawl.stderr[-3000:]
    with open_aci_store(settings) as store:
        acis = {owner: store.list(owner) for owner in ("alice", "bob")}
    with open_sentinel_store(settings) as store:
        (note,) = store.notifications("alice")
    assert len(acis["alice"]) == 2 and len(acis["bob"]) == 1, acis
    return acis, note


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory, news_site: Site) -> Iterator[World]:
    project = Project(tmp_path_factory.mktemp("web-browser"))
    settings = _settings(project.data)
    acis, note = _crawled(project, settings, news_site)
    with open_accounts(settings) as accounts:
        for name, password in PASSWORDS.items():
            accounts.add(name, password)
    handle = web_server.start(settings)
    try:
        yield World(handle.base_url, settings, news_site, acis, note)
    finally:
        handle.stop()


@pytest.fixture(scope="module")
def chromium(tmp_path_factory) -> Iterator[Browser]:
    """One headless Chromium for the module: the system's, launched by its path, with a home
    directory of its own (nothing written in the user's)."""
    home = tmp_path_factory.mktemp("chromium-home")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(**dynabot_browser.launch_options(None),
                                             env=dynabot_browser.browser_env(home))
        yield browser
        browser.close()


def _follow(page: Page, selector: str) -> None:
    """Click a link or a submit button and wait for the page it leads to."""
    with page.expect_navigation():
        page.click(selector)


def _log_in(page: Page, base_url: str, name: str, password: str) -> None:
    page.goto(f"{base_url}/login")
    page.fill("#login-form input[name=username]", name)
    page.fill("#login-form input[name=password]", password)
    _follow(page, "#login-form [type=submit]")


@pytest.fixture(scope="module")
def alice(world: World, chromium: Browser) -> Iterator[BrowserContext]:
    """A browser context logged in as alice, shared by the tests that look at her pages."""
    context = chromium.new_context(viewport=VIEWPORT)
    page = context.new_page()
    _log_in(page, world.base_url, "alice", PASSWORDS["alice"])
    assert _path(page) == "/owner/alice/", page.url
    page.close()
    yield context
    context.close()


@pytest.fixture
def page(alice: BrowserContext) -> Iterator[Page]:
    """A new page of alice's logged-in context."""
    page = alice.new_page()
    yield page
    page.close()


@pytest.fixture
def fresh(chromium: Browser) -> Iterator[Page]:
    """A page in a browser context of its own: logged out, no cookies."""
    context = chromium.new_context(viewport=VIEWPORT)
    yield context.new_page()
    context.close()


def _path(page: Page) -> str:
    return urlsplit(page.url).path


def _screenshot(page: Page, name: str) -> None:
    """One of the docs' pictures, as this run's page shows it: into docs/img/ with
    WEBRACE_SCREENSHOTS=1, else into a temporary directory (the picture is taken either way)."""
    keep = os.environ.get("WEBRACE_SCREENSHOTS") == "1"
    images = DOCS_IMAGES if keep else Path(tempfile.gettempdir()) / "webrace-img"
    images.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=images / name, full_page=True)
    assert (images / name).stat().st_size > 0


# -- signing in ----------------------------------------------------------------------------------


def test_a_logged_out_visit_is_sent_to_the_login_page(world: World, fresh: Page):
    for path in ("/", "/owner/alice/", "/owner/alice/profile", f"/stored/{world.acis['alice'][0].id}"):
        fresh.goto(world.base_url + path)
        assert _path(fresh) == "/login", (path, fresh.url)
        assert fresh.locator("input[name=password]").is_visible()
        assert "Crawler news" not in fresh.content()
    answer = fresh.request.get(world.base_url + "/api/v1/owners/alice/acis")
    assert answer.status == 401 and "Crawler news" not in answer.text()


def test_a_wrong_password_shows_an_error_and_opens_no_session(world: World, fresh: Page):
    _log_in(fresh, world.base_url, "alice", "not her password")
    assert _path(fresh) == "/login"
    assert "Wrong name or password" in fresh.locator(".error").inner_text()  # not which of the two
    fresh.goto(world.base_url + "/owner/alice/")
    assert _path(fresh) == "/login"


def test_logging_in_opens_the_owners_page_and_logging_out_ends_it(world: World, fresh: Page):
    _log_in(fresh, world.base_url, "bob", PASSWORDS["bob"])
    assert _path(fresh) == "/owner/bob/"
    fresh.goto(world.base_url + "/")
    assert _path(fresh) == "/owner/bob/"  # / is the owner's own page
    (session,) = [c for c in fresh.context.cookies() if "session" in c["name"]]
    # plain http on loopback: not Secure (over https it is: tests/test_web_proxy.py, through nginx)
    assert session["httpOnly"] and not session["secure"] and session["sameSite"] == "Lax"
    _follow(fresh, "#logout [type=submit]")
    assert _path(fresh) == "/login"
    fresh.goto(world.base_url + "/owner/bob/")
    assert _path(fresh) == "/login"


# -- what an owner sees --------------------------------------------------------------------------


def test_the_acis_of_the_crawl_are_listed_on_the_owners_page(world: World, page: Page):
    page.goto(world.base_url + "/owner/alice/")
    acis = page.locator(".aci")
    assert acis.count() == 2
    text = " ".join(acis.all_inner_texts())
    assert "Crawler news" in text and "Crawler archive" in text and "Gardening" not in text
    links = [a.get_attribute("href") for a in page.locator(".aci a").all()]
    assert {f"/stored/{aci.id}" for aci in world.acis["alice"]} <= {urlsplit(h).path for h in links}
    assert page.locator(".notification").count() == 1
    _screenshot(page, "web-owner.png")


def test_a_notification_shows_the_change_with_insertions_and_deletions_highlighted(world: World, page: Page):
    page.goto(world.base_url + "/owner/alice/")
    _follow(page, ".notification a")
    assert _path(page) == f"/owner/alice/notifications/{world.note['id']}"
    inserted, deleted = page.locator(".diff ins"), page.locator(".diff del")
    assert inserted.first.is_visible() and deleted.first.is_visible()
    assert "Tuesday" in " ".join(inserted.all_inner_texts())
    assert "Monday" in " ".join(deleted.all_inner_texts())
    assert "Updated" not in page.locator(".diff").inner_text()  # outside the sentinel's region (#news)
    style = "e => { const s = getComputedStyle(e); return [s.textDecorationLine, s.backgroundColor]; }"
    plain = page.locator(".diff").evaluate(style)
    assert inserted.first.evaluate(style) != plain and deleted.first.evaluate(style) != plain
    assert "line-through" in deleted.first.evaluate(style)[0]
    _screenshot(page, "web-diff.png")


def test_a_stored_page_is_shown_without_running_its_scripts(world: World, page: Page):
    (news,) = [aci for aci in world.acis["alice"] if aci.uri.endswith("/news")]
    response = page.goto(f"{world.base_url}/stored/{news.id}")
    assert response.status == 200
    assert "sandbox" in response.headers["content-security-policy"]
    assert page.title() == "Crawler news"  # the script would have made it "script ran"
    assert page.locator("#injected").count() == 0
    assert "Tuesday" in page.locator("#news").inner_text()  # the stored version itself


# -- the profile: URDs ---------------------------------------------------------------------------

GOOD_URD = """<urds>
  <urd id="alice-docs" owner="alice">
    <uri timing="3600000">{url}</uri>
    <depth level="0"/>
  </urd>
</urds>"""
BAD_URD = """<urds>
  <urd id="alice-broken" owner="alice">
    <uri timing="3600000">{url}</uri>
    <depth level="deep"/>
  </urd>
</urds>"""


def _submit_urd(page: Page, world: World, xml: str) -> None:
    page.goto(world.base_url + "/owner/alice/profile")
    page.fill("#add-urd textarea[name=urd_xml]", xml)
    _follow(page, "#add-urd [type=submit]")


def _urd_ids(world: World) -> set[str]:
    with open_urd_store(world.settings) as store:
        return {u.id for u in store.all()}


def test_a_urd_added_through_the_profile_page_is_listed_and_stored(world: World, page: Page):
    _submit_urd(page, world, GOOD_URD.format(url=world.site.url("/docs")))
    assert _path(page) == "/owner/alice/profile" and page.locator(".error").count() == 0
    listed = " ".join(page.locator(".urd").all_inner_texts())
    assert "alice-docs" in listed and "alice-news" in listed and "bob-garden" not in listed
    assert "alice-docs" in _urd_ids(world)


def test_a_bad_urd_is_refused_with_its_line_and_nothing_is_stored(world: World, page: Page):
    _submit_urd(page, world, BAD_URD.format(url=world.site.url("/broken")))
    error = page.locator(".error")
    assert error.is_visible()
    assert "line 4" in error.inner_text() and "level='deep'" in error.inner_text()  # where, and what is wrong
    assert "alice-broken" not in _urd_ids(world)


# -- what an owner may not see -------------------------------------------------------------------


def test_another_owners_pages_and_api_answer_403(world: World, page: Page):
    bob_aci = world.acis["bob"][0].id
    for path in ("/owner/bob/", "/owner/bob/profile", f"/stored/{bob_aci}", "/owners/"):
        response = page.goto(world.base_url + path)
        # another owner's stored version: 404, as one that does not exist (its id is computable)
        assert response.status == (404 if path.startswith("/stored/") else 403), path
        assert "Gardening" not in page.content()
    for path in ("/api/v1/owners/bob/acis", "/api/v1/owners/bob/urds"):  # the JSON API, with alice's session
        answer = page.request.get(world.base_url + path)
        assert answer.status == 403, path
        assert "Gardening" not in answer.text()
    mine = page.request.get(world.base_url + "/api/v1/owners/alice/acis")
    assert mine.status == 200 and "Crawler news" in mine.text()


def test_a_form_posted_from_another_origin_is_refused(world: World, page: Page):
    """A page of another origin (the test site, another port of 127.0.0.1: same site, so the
    session cookie goes along) posts a URD into alice's profile: the CSRF check refuses it."""
    action = f"{world.base_url}/owner/alice/urds"
    xml = GOOD_URD.format(url=world.site.url("/forged")).replace("alice-docs", "forged")
    world.site.add("/attack.html", f"""<html><body><form id="f" method="post" action="{action}">
<textarea name="urd_xml">{html.escape(xml)}</textarea></form>
<script>document.getElementById("f").submit()</script></body></html>""")
    with page.expect_navigation(url=action) as navigation:
        page.goto(world.site.url("/attack.html"))
    assert navigation.value.status == 400
    assert "forged" not in _urd_ids(world)


def _get_login(base_url: str, host_header: str) -> tuple[int, bytes]:
    address = urlsplit(base_url)
    conn = http.client.HTTPConnection(address.hostname, address.port, timeout=10)
    try:
        conn.request("GET", "/login", headers={"Host": host_header})
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def test_a_forged_host_header_answers_400(world: World):
    """A DNS-rebinding page reaches the server under its own name. A browser cannot forge the
    Host header (it is a forbidden header name in fetch), so these requests are made with
    http.client: the app answers 400 and shows nothing, and still answers its own names."""
    port = urlsplit(world.base_url).port
    for forged in ("evil.example", f"evil.example:{port}", f"127.0.0.1.evil.example:{port}"):
        status, body = _get_login(world.base_url, forged)
        assert status == 400 and b"password" not in body, forged
    for own in (f"127.0.0.1:{port}", f"localhost:{port}"):
        status, body = _get_login(world.base_url, own)
        assert status == 200 and b'name="password"' in body, own
