"""DynaBot's browser mode (issue 19): pages whose forms exist only once their scripts ran.

A source whose page has scripts and no usable form (:func:`needs_browser`) is loaded again
in a real browser (:func:`render_request`): the response is the page's DOM after its
scripts ran, so ``analyze_forms(response.body, response.url)`` sees the forms they built.
A probe of such a form (:func:`probe_request`) loads the page in the browser, fills the form
in place with one ``page.evaluate`` (the values are its argument, never JavaScript text),
clicks the chosen button so the page's own submit handler runs (it may ``fetch`` and write
the answer into the page, or navigate), waits for the network to go quiet and answers the
final DOM.

The browser is scrapy-playwright driving the system's Chromium (``WEBRACE_BROWSER_EXECUTABLE``,
``/usr/bin/chromium`` by default: nothing is downloaded at run time). :func:`browser_settings`
gives the settings that enable it; its download handler (:class:`BrowserDownloadHandler`)
hands every request without ``meta["playwright"]`` to Scrapy's own HTTP handler. Browser
requests are ordinary Scrapy requests up to the handler: the downloader middlewares
(robots.txt, block lists, pacing) judge the page request as any other.

What a page may do is narrower than in a desktop browser:

- a page shown writes nothing: its scripts' POSTs (and other writes) before DynaBot submits
  a form are aborted (a comment widget's counter, a visit log);
- no request leaves the page's own host, and a request to another origin of that host, one
  robots.txt disallows (the page's origin, checked with the crawl's robots.txt rules) and
  images, fonts and media are aborted before they are sent; so are WebSockets to another
  host, popups (Chromium's popup blocker is on) and service workers;
- Chromium's network prediction (preconnecting to a navigation's or a link's host before
  any request) and WebRTC over UDP (STUN) are off: the browser runs with a profile of its
  own whose preferences say so, and a home directory of its own (:func:`browser_env`), in a
  temporary directory removed when the crawl ends;
- every request carries the crawl's User-Agent (the browser's own headers otherwise);
- each browser request is bounded by ``WEBRACE_BROWSER_TIMEOUT`` seconds in all, and at
  most ``WEBRACE_BROWSER_PAGES`` pages are open at once.

What happened is in ``response.meta["webrace_browser"]`` (also on a failed request's meta):
see :func:`render_request` and :func:`probe_request`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import shutil
import tempfile
import time
import weakref
from collections.abc import Mapping, Sequence
from contextlib import suppress
from html import escape
from typing import Any
from urllib.parse import urlsplit

import lxml.html
from lxml import etree
from scrapy import Request
from scrapy.exceptions import IgnoreRequest

# Playwright and scrapy-playwright are imported on first use (_load), not with this module:
# every `scrapy` command imports the spiders, and most never drive a browser.
PageMethod: Any = None
PlaywrightError: Any = None
_MISSING: ImportError | None = None
_LOADED = False


def _load() -> ImportError | None:
    """Import the optional browser packages once; the ImportError when they are missing."""
    global PageMethod, PlaywrightError, _MISSING, _LOADED
    if not _LOADED:
        _LOADED = True
        try:
            from playwright.async_api import Error
            from scrapy_playwright.page import PageMethod as Method
        except ImportError as exc:  # pragma: no cover - depends on the installation
            _MISSING = exc
        else:
            PageMethod, PlaywrightError = Method, Error
    return _MISSING

logger = logging.getLogger(__name__)

DEFAULT_EXECUTABLE = "/usr/bin/chromium"
DEFAULT_TIMEOUT = 30.0  # seconds a browser request may take in all
DEFAULT_PAGES = 2  # browser pages open at once
ASYNCIO_REACTOR = "twisted.internet.asyncioreactor.AsyncioSelectorReactor"
HANDLER = "webrace.dynabot.browser.BrowserDownloadHandler"
CONTEXT = "webrace-browser"  # the browser context (one profile) of every request made here
STATE = "webrace_browser"  # meta key: what happened in the browser (a dict of plain values)
_SESSION = "_webrace_browser_session"  # meta key: the request's live session (not for the spider)
HEAVY = frozenset({"image", "font", "media"})  # resource types never fetched
LONG_LIVED = frozenset({"eventsource", "websocket"})  # open for good: they do not keep the network busy
QUIET = 0.5  # seconds without a request in flight: the network is idle
IDLE_MAX = 10.0  # seconds a wait for the network to go idle lasts at most
SETTLE_MAX = 5.0  # seconds a wait for the page's scripts to stop writing lasts at most
TYPE_WAIT = 4.0  # seconds a live form is typed into again until the page shows something
KEPT = 20  # entries kept in each list of the state
MAX_FORMLESS = 3  # search boxes outside any form given a form of their own, per page
FORMLESS = "webrace-formless"  # the class of such a form (Form.attributes holds it)
# Chromium's preferences for the browser's profile: no preconnecting or DNS prefetching to
# hosts the page names (a navigation to another host opened a connection to it before any
# request could be aborted), no WebRTC over UDP (STUN requests to any server a page names are
# not requests a route sees), no Safe Browsing lookups, no suggestions on error pages.
PREFERENCES = {"net": {"network_prediction_options": 2},
               "webrtc": {"ip_handling_policy": "disable_non_proxied_udp", "multiple_routes_enabled": False,
                          "nonproxied_udp_enabled": False},
               "safebrowsing": {"enabled": False}, "alternate_error_pages": {"enabled": False},
               "search": {"suggest_enabled": False}}


class BrowserError(Exception):
    """A browser request that could not give the page: the page did not load (the browser's
    error is in the message), took too long, its DOM is over the size limit, it ended on a
    browser error page, or the page's guard could not be installed."""


# ---------------------------------------------------------------------------------------------
# Whether and how to run it
# ---------------------------------------------------------------------------------------------


def executable(settings: Any = None) -> str:
    """The Chromium to drive: ``WEBRACE_BROWSER_EXECUTABLE``, else /usr/bin/chromium."""
    return (settings.get("WEBRACE_BROWSER_EXECUTABLE") if settings is not None else None) or DEFAULT_EXECUTABLE


def available(settings: Any = None) -> str | None:
    """None when the browser mode can run, else why not."""
    missing = _load()
    if missing is not None:
        return f"scrapy-playwright is not importable ({missing}): pip install scrapy-playwright"
    path = executable(settings)
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        return f"no Chromium at {path} (WEBRACE_BROWSER_EXECUTABLE; on Debian: apt-get install chromium)"
    return None


def _timeout(settings: Any) -> float:
    value = settings.getfloat("WEBRACE_BROWSER_TIMEOUT", DEFAULT_TIMEOUT) if settings is not None else DEFAULT_TIMEOUT
    return value if value > 0 else DEFAULT_TIMEOUT


def launch_options(settings: Any) -> dict[str, Any]:
    """Chromium's launch options: the system's browser, headless; without a sandbox only
    as root (Chromium refuses to sandbox itself there; ``WEBRACE_BROWSER_SANDBOX`` decides
    otherwise); Playwright's default of allowing popups dropped."""
    sandbox = settings.get("WEBRACE_BROWSER_SANDBOX") if settings is not None else None
    if sandbox is None:
        sandbox = os.geteuid() != 0
    elif isinstance(sandbox, str):
        sandbox = sandbox.strip().lower() in ("1", "true", "yes", "on")
    return {"executable_path": executable(settings), "headless": True, "chromium_sandbox": bool(sandbox),
            "ignore_default_args": ["--disable-popup-blocking"]}


def browser_env(home: str | os.PathLike[str]) -> dict[str, str]:
    """The browser process's environment: this one, with its home directory (and the XDG
    directories under it) at ``home``, a temporary directory its launcher removes. Chromium
    writes its crash database (``~/.config/chromium``), NSS database (``~/.local/share/pki``)
    and dconf's cache under the home directory whatever its profile directory is."""
    home = os.fspath(home)
    return {**os.environ, "HOME": home, "XDG_CONFIG_HOME": os.path.join(home, ".config"),
            "XDG_CACHE_HOME": os.path.join(home, ".cache"), "XDG_DATA_HOME": os.path.join(home, ".local", "share")}


def browser_settings(settings: Any) -> dict[str, Any]:
    """The settings that enable the browser mode on a crawler whose settings are ``settings``
    (read for ``WEBRACE_BROWSER_*`` and the download handlers already set), e.g. in a
    spider's ``update_settings``: ``settings.setdict(browser_settings(settings), priority="spider")``."""
    timeout = _timeout(settings)
    pages = settings.getint("WEBRACE_BROWSER_PAGES", DEFAULT_PAGES) or DEFAULT_PAGES
    return {
        # only requests with meta["playwright"] use the browser; the others go to Scrapy's HTTP handler
        "DOWNLOAD_HANDLERS": {**settings.getdict("DOWNLOAD_HANDLERS"), "http": HANDLER, "https": HANDLER},
        "TWISTED_REACTOR": ASYNCIO_REACTOR,  # Scrapy's default since 2.13; scrapy-playwright needs it
        "PLAYWRIGHT_BROWSER_TYPE": "chromium",
        "PLAYWRIGHT_LAUNCH_OPTIONS": launch_options(settings),
        "PLAYWRIGHT_ABORT_REQUEST": "webrace.dynabot.browser.abort_request",
        "PLAYWRIGHT_PROCESS_REQUEST_HEADERS": "webrace.dynabot.browser.browser_headers",
        "PLAYWRIGHT_DEFAULT_NAVIGATION_TIMEOUT": timeout * 1000 / 2,  # ms; the rest is for scripts and waits
        # the handler opens WEBRACE_BROWSER_PAGES pages at once; scrapy-playwright's own bound stays
        # above, so that a page a timeout could not close does not hold a place for good
        "PLAYWRIGHT_MAX_PAGES_PER_CONTEXT": 4 * pages,
    }


def scripts(body: bytes | str) -> int:
    """How many ``<script>`` elements of a page a browser would run (with a ``src`` or some
    code, of a JavaScript type; JSON-LD and templates are data)."""
    if not (body.strip() if isinstance(body, (bytes, str)) else body):
        return 0
    try:
        root = lxml.html.document_fromstring(body)
    except (etree.ParserError, ValueError):
        return 0
    count = 0
    for script in root.iter("script"):
        kind = (script.get("type") or "").strip().lower().split(";")[0]
        if kind and kind != "module" and "javascript" not in kind and "ecmascript" not in kind:
            continue
        if (script.get("src") or "").strip() or (script.text or "").strip():
            count += 1
    return count


def needs_browser(body: bytes | str, forms: Sequence[Any]) -> bool:
    """Whether a page should be loaded in the browser: it has scripts (:func:`scripts`) and no
    usable form without them (``forms``: the forms DynaBot could use, after its form filter)."""
    return not forms and scripts(body) > 0


def built_by_scripts(markup: str, values: Sequence[str | None], page_markup: str = "") -> int:
    """Whether an answer without results is one its scripts are still to write, as Sphinx's
    ``search.html?q=...`` (it reads the query from its URL, loads its index and lists the
    pages found): the page has scripts and its HTML does not reflect the values sent, none
    of which it holds more often than ``page_markup`` (the form's page: a word of the site's
    own menus is no echo). The number of its scripts, or 0."""
    answer, page = markup.lower(), page_markup.lower()
    sent = {v.strip().lower() for v in values if isinstance(v, str) and len(v.strip()) >= 2}
    for value in sent:
        for form in {value, escape(value, quote=True)}:
            if answer.count(form) > page.count(form):
                return 0
    return scripts(markup) if sent else 0


# ---------------------------------------------------------------------------------------------
# The requests
# ---------------------------------------------------------------------------------------------


def render_request(url: str, **request_kwargs: Any) -> Request:
    """A GET of ``url`` in the browser whose response is the page's DOM once its scripts ran
    and its network went quiet (bounded). ``request_kwargs`` go to ``scrapy.Request``
    (``dont_filter`` defaults to True: the page was usually fetched without the browser first).

    ``response.meta["webrace_browser"]``: ``mode`` ("render"), ``url`` and ``status`` (the
    document's), ``idle`` (the network went quiet in time), ``requests`` (made by the page),
    ``aborted`` (``{"url", "reason", "type"}``: reason "other host", "other origin",
    "robots" or "scheme"), ``heavy`` (images, fonts, media aborted), ``dialogs``, ``errors``
    (uncaught script errors), ``popups``; ``named``: the fields of live forms that had no
    name and were given one (see ``_NAME_LIVE``)."""
    session = _Session("render")
    _load()
    return _browser_request(url, session, [PageMethod(_render, session)] if PageMethod else [], request_kwargs)


def probe_request(url: str, form_index: int, assignment: Mapping[str, Any], button: Any = None,
                  **request_kwargs: Any) -> Request:
    """Load ``url`` in the browser, fill its form number ``form_index`` (document order, as
    ``analyze_forms`` numbers them) with ``assignment`` (parameter name -> value, list of
    values, or None: unchecked), click ``button`` (a ``Parameter`` of the form's buttons,
    or a button's name; None: ``requestSubmit()`` without a button) and answer the DOM once
    the network went quiet after the submission (bounded).

    The state has, besides :func:`render_request`'s: ``form``, ``filled`` (parameter names),
    ``invalid`` (controls the page would flag: the form is sent regardless, as without the
    browser), ``submitter``, ``submitted``, ``navigated`` (the submission loaded a new
    document), ``blocked`` (the part of ``aborted`` that came after the submission) and
    ``problem`` (why it was not submitted: no such form, parameter, option or button; the
    response is then the page as loaded). A live form (no ``action``, no submit button: a
    search dialog) is typed into (key events fired) and answered as it is when the page
    wrote something outside the form meanwhile (``typed``), else submitted; its fields
    without a name are named first (``named``, as :func:`render_request` names them). A
    search box in no form has a form of its own (its class :data:`FORMLESS`, see
    ``_NAME_LIVE``): typed into as a live form, then Enter pressed in it (``submitter``
    "Enter") rather than a submission. A
    submission whose navigation is aborted (another host, or robots.txt) fails with
    ``IgnoreRequest`` and ``meta["webrace_ignored"]`` = "other_host" or "robots"."""
    session = _Session("probe")
    values = {str(name): _json_value(value) for name, value in assignment.items()}
    _load()
    methods = [PageMethod(_probe, session, int(form_index), values, _button_arg(button))] if PageMethod else []
    return _browser_request(url, session, methods, request_kwargs)


def _browser_request(url: str, session: _Session, methods: list, request_kwargs: dict[str, Any]) -> Request:
    if _load() is not None:
        raise RuntimeError(f"the browser mode cannot run: {available()}")
    if request_kwargs.get("method", "GET").upper() != "GET" or request_kwargs.get("body"):
        raise ValueError("a browser request loads a page: GET, no body")
    meta = dict(request_kwargs.pop("meta", None) or {})
    meta.update({
        "playwright": True,
        "playwright_context": CONTEXT,
        "playwright_page_init_callback": guard_page,
        "playwright_page_methods": methods,
        STATE: session.state,
        _SESSION: session,
    })
    request_kwargs.setdefault("dont_filter", True)
    return Request(url, meta=meta, **request_kwargs)


def _json_value(value: Any) -> str | list[str] | None:
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, Sequence):
        return [str(v) for v in value]
    return str(value)


def _button_arg(button: Any) -> dict[str, Any] | None:
    if button is None:
        return None
    if isinstance(button, str):
        return {"name": button}
    return {"name": button.name or "", "value": button.value, "kind": button.kind, "label": button.label or ""}


# ---------------------------------------------------------------------------------------------
# In the browser: the guard, the waits, the filling
# ---------------------------------------------------------------------------------------------


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    try:
        port = parts.port or {"http": 80, "https": 443, "ws": 80, "wss": 443}.get(parts.scheme)
    except ValueError:
        port = None
    return parts.scheme, (parts.hostname or "").lower(), port


class _Session:
    """One browser request: its page's guard and activity, and its state (``STATE``)."""

    def __init__(self, mode: str) -> None:
        self.state: dict[str, Any] = {"mode": mode, "url": None, "status": None, "idle": None, "requests": 0,
                                      "aborted": [], "heavy": 0, "dialogs": [], "errors": [], "popups": []}
        self.timeout = DEFAULT_TIMEOUT
        self.max_size = 0  # characters of the final DOM at most (0: no limit)
        self.too_big = 0  # the DOM's size when over max_size
        self.allowed = None  # robots.txt: url -> bool, for the page's origin; None: not checked
        self.page = None
        self.origin: tuple[str, str, int | None] = ("", "", None)
        self.inflight: set = set()
        self.last_activity = time.monotonic()
        self.navigations = 0  # documents committed in the main frame
        self.submitted_at: float | None = None
        self.filling = False  # the probe's form is being filled and submitted: its writes may go
        self.blocked_navigation: tuple[str, str] | None = None  # (url, reason) of an aborted main-frame document

    # -- the guard --------------------------------------------------------------------------

    async def attach(self, page: Any, url: str) -> None:
        self.origin = _origin(url)
        self.inflight, self.last_activity = set(), time.monotonic()
        self.navigations, self.submitted_at, self.blocked_navigation, self.too_big = 0, None, None, 0
        self.filling = False
        await page.route("**", self._route)  # after scrapy-playwright's: runs first
        await page.route_web_socket(lambda _url: True, self._websocket)
        await _guard_context(page.context)
        page.on("request", self._request)
        page.on("requestfinished", self._done)
        page.on("requestfailed", self._done)
        page.on("response", self._response)
        page.on("framenavigated", self._navigated)
        page.on("dialog", self._dialog)
        page.on("pageerror", lambda error: self._keep("errors", str(error)[:300]))
        page.on("popup", self._popup)
        self.page = page  # guarded (ready() checks it)

    def detach(self) -> None:
        self.page = None
        self.inflight = set()

    def refusal(self, url: str, resource_type: str, method: str = "GET") -> str | None:
        """Why a request of the page is not sent (None: it is)."""
        if resource_type in HEAVY:
            return "heavy"
        if method.upper() not in ("GET", "HEAD", "OPTIONS") and not self.filling:
            return "write"  # a page shown is no form submitted: its scripts' POSTs (counters, logs) are not sent
        scheme, host, port = _origin(url)
        if scheme in ("data", "blob", "about"):
            return None
        if scheme not in ("http", "https", "ws", "wss"):
            return "scheme"
        if host != self.origin[1]:
            return "other host"
        if (scheme.replace("ws", "http", 1), port) != (self.origin[0], self.origin[2]):
            return "other origin"  # its robots.txt was not read
        if self.allowed is not None and not self.allowed(url.replace("ws", "http", 1) if scheme.startswith("ws")
                                                          else url):
            return "robots"
        return None

    def _abort(self, url: str, reason: str, resource_type: str) -> None:
        if reason == "heavy":
            self.state["heavy"] += 1
            return
        entry = {"url": url[:500], "reason": reason, "type": resource_type}
        self._keep("aborted", entry)
        if self.submitted_at is not None:
            self.state.setdefault("blocked", [])
            if len(self.state["blocked"]) < KEPT:
                self.state["blocked"].append(entry)

    async def _route(self, route: Any, request: Any) -> None:
        reason = self.refusal(request.url, request.resource_type, request.method)
        if reason is None:
            with suppress(PlaywrightError):  # the page closed meanwhile
                await route.fallback()  # scrapy-playwright's handler: headers, then the network
            return
        self._abort(request.url, reason, request.resource_type)
        if request.is_navigation_request() and self.page is not None and request.frame == self.page.main_frame:
            self.blocked_navigation = (request.url, reason)
        with suppress(PlaywrightError):
            await route.abort("blockedbyclient")

    async def _websocket(self, socket: Any) -> None:
        reason = self.refusal(socket.url, "websocket")
        if reason is None:
            socket.connect_to_server()
            return
        self._abort(socket.url, reason, "websocket")
        with suppress(PlaywrightError):
            await socket.close(code=1008, reason="blocked by the crawler")

    # -- activity -----------------------------------------------------------------------------

    def _request(self, request: Any) -> None:
        self.state["requests"] += 1
        if request.resource_type not in LONG_LIVED:
            self.inflight.add(request)
        self.last_activity = time.monotonic()

    def _done(self, request: Any) -> None:
        self.inflight.discard(request)
        self.last_activity = time.monotonic()

    def _response(self, response: Any) -> None:
        request = response.request
        if self.page is not None and request.is_navigation_request() and request.frame == self.page.main_frame:
            self.state["status"] = response.status

    def _navigated(self, frame: Any) -> None:
        if self.page is not None and frame == self.page.main_frame:
            self.navigations += 1
            self.last_activity = time.monotonic()

    async def _dialog(self, dialog: Any) -> None:
        self._keep("dialogs", f"{dialog.type}: {dialog.message[:300]}")
        with suppress(PlaywrightError):
            await dialog.dismiss()

    async def _popup(self, popup: Any) -> None:
        self._keep("popups", popup.url[:500])
        with suppress(PlaywrightError):
            await popup.close()

    def _keep(self, key: str, value: Any) -> None:
        if len(self.state[key]) < KEPT:
            self.state[key].append(value)

    async def idle(self) -> bool:
        """Wait until no request has been in flight for QUIET seconds (at most IDLE_MAX, and
        a quarter of the request's time); whether it happened."""
        limit = time.monotonic() + min(IDLE_MAX, self.timeout / 4)
        while time.monotonic() < limit:
            if not self.inflight and time.monotonic() - self.last_activity >= QUIET:
                return True
            await asyncio.sleep(0.05)
        return False

    def ready(self, page: Any) -> None:
        if self.page is not page:
            raise BrowserError("the page's guard (webrace.dynabot.browser.guard_page) was not installed: "
                               "see the warning scrapy-playwright logged")

    async def settle(self, page: Any) -> bool:
        """Wait until the page's scripts have written nothing for QUIET seconds (at most
        SETTLE_MAX, and an eighth of the request's time); whether it happened. The network going
        quiet is not enough: Sphinx's search loads its index, spends seconds of script on it,
        then writes its results one by one from timers, with no request in flight."""
        limit = min(SETTLE_MAX, self.timeout / 8)
        try:
            return bool(await page.evaluate(_SETTLE, [QUIET * 1000, limit * 1000]))
        except PlaywrightError:  # navigating: the load wait covers it
            return False

    async def finish(self, page: Any) -> None:
        """The final URL once the page's scripts have settled, and the DOM's size: one over the
        limit is emptied here, before it is serialized and sent, and the request fails (in the
        handler)."""
        self.state["settled"] = await self.settle(page)
        self.state["url"] = page.url
        if not self.max_size:
            return
        with suppress(PlaywrightError):  # navigating: the size is checked on the response
            size = await page.evaluate(_SIZE)
            if size > self.max_size:
                self.too_big = size
                await page.evaluate(_EMPTY)


_GUARDED_CONTEXTS: weakref.WeakSet = weakref.WeakSet()


async def _guard_context(context: Any) -> None:
    """Requests of the context's pages that no page guard saw (a popup's) are aborted."""
    if context in _GUARDED_CONTEXTS:
        return
    _GUARDED_CONTEXTS.add(context)

    async def refuse(route: Any, request: Any) -> None:
        with suppress(PlaywrightError):
            await route.abort("blockedbyclient")

    await context.route("**", refuse)


async def guard_page(page: Any, request: Request) -> None:
    """scrapy-playwright's page init callback: the guard and the activity tracking of the
    request's session, installed before the page loads."""
    session = request.meta.get(_SESSION)
    if isinstance(session, _Session):
        await session.attach(page, request.url)


def abort_request(request: Any) -> bool:
    """``PLAYWRIGHT_ABORT_REQUEST``: whether to abort a request a browser page makes. The
    page guard decides first for the requests made here (and records why); this rule holds
    for any page: images, fonts and media, and requests to a host other than the page's."""
    if request.resource_type in HEAVY:
        return True
    try:
        frame = request.frame
        page_url = frame.page.url
    except Exception:  # noqa: BLE001 - a service worker's request has no frame
        return True
    if not page_url.startswith(("http://", "https://")):  # about:blank: the page's own navigation
        return not (request.is_navigation_request() and frame.parent_frame is None)
    return _origin(request.url)[1] != _origin(page_url)[1]


async def browser_headers(*, browser_type_name: str, playwright_request: Any,
                          scrapy_request_data: dict) -> dict[str, str]:
    """``PLAYWRIGHT_PROCESS_REQUEST_HEADERS``: the browser's own headers (a form's POST keeps
    its Content-Type), with the crawl's User-Agent."""
    headers = await playwright_request.all_headers()
    agent = scrapy_request_data["headers"].get("User-Agent")
    if agent:
        headers["user-agent"] = agent.decode("latin-1") if isinstance(agent, bytes) else str(agent)
    return headers


async def _render(page: Any, session: _Session) -> None:
    session.ready(page)
    session.state["idle"] = await session.idle()
    await _name_live_fields(page, session)
    await session.finish(page)


async def _typed(page: Any, session: _Session, fill: dict[str, Any]) -> bool:
    """Whether the page wrote something outside a live form once it was typed into (the
    state's ``typed``). A search dialog listens only once its index is built, which takes no
    request: the form is typed into again while nothing shows, for TYPE_WAIT seconds at most."""
    deadline = time.monotonic() + min(TYPE_WAIT, session.timeout / 4)
    session.state["typed"] = False
    with suppress(PlaywrightError):
        while True:
            session.state["idle"] = await session.idle()
            if await page.evaluate(_TYPED):
                session.state["typed"] = True
                break
            if time.monotonic() >= deadline:
                break
            await page.evaluate(_FILL, fill)
    return session.state["typed"]


async def _name_live_fields(page: Any, session: _Session) -> None:
    with suppress(PlaywrightError):  # the page navigated by itself meanwhile
        named = await page.evaluate(_NAME_LIVE)
        if named:
            session.state["named"] = named[:KEPT]


async def _probe(page: Any, session: _Session, form_index: int, values: dict[str, Any],
                 button: dict[str, Any] | None) -> None:
    session.ready(page)
    state = session.state
    state.update(form=form_index, filled=[], invalid=[], submitter=None, submitted=False, navigated=False,
                 blocked=[], problem=None)
    await session.idle()
    await _name_live_fields(page, session)
    formless = False
    with suppress(PlaywrightError):
        formless = await page.evaluate(_FORMLESS, form_index)
    # set before the evaluation: its submission may reach the route before it returns; a search
    # box in no form sends nothing of its own: the page's writes stay aborted
    session.filling = not formless
    try:
        result = await page.evaluate(_FILL, {"index": form_index, "values": values, "button": button})
    except PlaywrightError as exc:  # the page navigated by itself meanwhile
        result = {"problem": f"the form could not be filled: {exc.message.splitlines()[0][:300]}"}
    state.update(filled=result.get("filled", []), invalid=result.get("invalid", [])[:KEPT],
                 submitter=result.get("submitter"), problem=result.get("problem"))
    if state["problem"]:
        state["idle"] = True
        await session.finish(page)
        return
    if result.get("live") and await _typed(page, session, {"index": form_index, "values": values, "button": button}):
        await session.finish(page)
        return
    if result.get("live"):  # nothing written as one types: the page answers a submission, if anything
        with suppress(PlaywrightError):
            if result.get("formless"):  # a search box in no form: Enter pressed in it (a trusted key press)
                state["submitter"] = "Enter"
                await page.press(result["formless"], "Enter", timeout=session.timeout * 1000 / 4)
            else:
                await page.evaluate(_SUBMIT, form_index)
    state["submitted"] = True
    session.submitted_at = session.last_activity = time.monotonic()
    before = session.navigations
    state["idle"] = await session.idle()  # the submission is sent from a timer: nothing runs yet
    if session.navigations > before:
        state["navigated"] = True
        with suppress(PlaywrightError):
            await page.wait_for_load_state("load", timeout=session.timeout * 1000 / 4)
        state["idle"] = await session.idle()
    await session.finish(page)


# Resolves once no node or text of the document has changed, and the main thread has not been
# busy, for `quiet` ms (true), or after `limit` ms (false). A check that runs late found the
# thread busy with a script (an index being built): that counts as the page still working.
_SETTLE = """([quiet, limit]) => new Promise(resolve => {
  const step = Math.min(50, quiet);
  const start = performance.now();
  let last = start, expected = start + step;
  const observer = new MutationObserver(() => { last = performance.now(); });
  observer.observe(document, {childList: true, subtree: true, characterData: true});
  const check = () => {
    const now = performance.now();
    if (now - expected > 2 * step) last = now;
    if (now - last >= quiet || now - start >= limit) {
      observer.disconnect();
      resolve(now - last >= quiet);
    } else {
      expected = now + step;
      setTimeout(check, step);
    }
  };
  setTimeout(check, step);
})"""
_SIZE = "() => document.documentElement ? document.documentElement.outerHTML.length : 0"
_FORMLESS = ("index => { const form = document.querySelectorAll('form')[index]; "
             f"return !!form && form.classList.contains('{FORMLESS}'); }}")
_TYPED = "() => window.__webraceTyped || 0"  # changes to the page since the live form was typed into
_SUBMIT = """index => {
  const form = document.querySelectorAll('form')[index];
  if (form) setTimeout(() => form.requestSubmit ? form.requestSubmit() : form.submit(), 0);
}"""

# A live form (no action, no submit button: a search dialog whose results the page's scripts
# write as one types, MkDocs') may have fields without a name, which no submission would send
# and no probe could address: each is named after its id ("#mkdocs-search-query") or its
# place ("#form0.field1"), in the DOM the crawler reads and in the page a probe fills. A
# search box in no form (an <input type=search> a script wires to Enter) gets a form of its
# own, in the same way: an empty, hidden <form class="webrace-formless"> just after it, which
# the box joins through its form= attribute (so analyze_forms sees one form with one field,
# the heading above the box its heading) and whose submission is prevented (a probe presses
# Enter in the box, as a person does: the page's own script answers, or nothing happens; the
# page's writes stay aborted meanwhile). Only boxes that say they search (type=search, in a
# role=search element, or an id, name, class, placeholder, label or title naming a search, a
# query or "q"), with no text area, password, e-mail or file field near them (a comment or
# sign-up widget's fields are no search box), visible and enabled, MAX_FORMLESS at most per
# page. A script that filters what the
# page already shows looks the same: its "results" are the page's own links, which the spider
# does not count as an answer (webrace.dynabot.evidence.page_results_only).
_NAME_LIVE = """() => {
  const named = [];
  const typed = el => el.tagName === 'TEXTAREA' || (el.tagName === 'INPUT' && ['text', 'search'].includes(el.type));
  const said = el => ['id', 'name', 'class', 'placeholder', 'aria-label', 'title']
    .map(a => el.getAttribute(a) || '').join(' ');
  const searchLike = el => el.type === 'search' || el.closest('[role="search"]') ||
    /search|query|find|lookup|(^|[^a-z])q([^a-z]|$)/i.test(said(el));
  const writing = 'textarea, [contenteditable=""], [contenteditable="true"], input[type="password"], ' +
    'input[type="email"], input[type="file"]';
  const alone = el => { let box = el.parentElement;  // no comment or sign-up widget around it
    for (let up = 0; box && up < 3; up++, box = box.parentElement) if (box.querySelector(writing)) return false;
    return true; };
  const boxes = Array.from(document.querySelectorAll('input')).filter(el => !el.form && !el.disabled &&
    !el.readOnly && ['text', 'search'].includes(el.type) && el.getClientRects().length > 0 &&
    !el.hasAttribute('form') && searchLike(el) && alone(el)).slice(0, MAX_FORMLESS);
  boxes.forEach((el, k) => {
    const form = document.createElement('form');
    form.id = `webrace-formless-${k}`;
    form.className = 'webrace-formless';
    form.hidden = true;
    form.addEventListener('submit', event => event.preventDefault());
    el.after(form);
    el.setAttribute('form', form.id);
    el.setAttribute('data-webrace-formless', String(k));
    if (!el.name) {
      el.name = '#' + (el.id || `formless${k}`);
      named.push(el.name);
    }
  });
  document.querySelectorAll('form').forEach((form, f) => {
    if (form.classList.contains('webrace-formless')) return;
    const listed = Array.from(form.elements);
    const submits = listed.filter(el => el.type === 'submit' || el.type === 'image');
    if (form.hasAttribute('action') || submits.length) return;
    listed.forEach((el, i) => {
      if (typed(el) && !el.name) {
        el.name = '#' + (el.id || `form${f}.field${i}`);
        named.push(el.name);
      }
    });
  });
  return named;
}""".replace("MAX_FORMLESS", str(MAX_FORMLESS))
_EMPTY = "() => document.documentElement.replaceChildren()"


# One function, the values its argument. It fills the form in place as a person would
# (events fired, React-style value setters honoured), then clicks the button from a timer, so
# that this evaluation has returned before the page's submit handler runs or navigates.
_FILL = """({index, values, button}) => {
  const forms = document.querySelectorAll('form');
  const form = forms[index];
  if (!form) {
    return {problem: `the page has ${forms.length} form(s) after its scripts ran: no form number ${index}`};
  }
  const listed = Array.from(form.elements);
  const isButton = el => el.tagName === 'BUTTON' ||
    (el.tagName === 'INPUT' && ['submit', 'image', 'reset', 'button'].includes(el.type));
  const live = !form.hasAttribute('action') && !listed.some(el => el.type === 'submit' || el.type === 'image');
  if (live) {  // what the page writes as one types, outside the form, is counted
    window.__webraceTyped = 0;
    new MutationObserver(changes => {
      window.__webraceTyped += changes.filter(c => !form.contains(c.target)).length;
    }).observe(document.body || document.documentElement, {childList: true, subtree: true, characterData: true});
  }
  const fire = el => {
    if (live) el.dispatchEvent(new KeyboardEvent('keydown', {bubbles: true, key: 'Unidentified'}));
    el.dispatchEvent(new Event('input', {bubbles: true}));
    if (live) el.dispatchEvent(new KeyboardEvent('keyup', {bubbles: true, key: 'Unidentified'}));
    el.dispatchEvent(new Event('change', {bubbles: true}));
  };
  const caption = el => (el.tagName === 'BUTTON' ? el.textContent : el.value || el.alt || '')
    .replace(/\\s+/g, ' ').trim();
  const setValue = (el, value) => {
    const own = Object.getOwnPropertyDescriptor(Object.getPrototypeOf(el), 'value');
    if (own && own.set) own.set.call(el, value); else el.value = value;
  };
  const problems = [], filled = [];
  for (const [name, raw] of Object.entries(values)) {
    const wanted = raw === null ? [] : Array.isArray(raw) ? raw.map(String) : [String(raw)];
    const controls = listed.filter(el => el.name === name && !isButton(el));
    const enabled = controls.filter(el => !el.disabled);
    if (!enabled.length) {
      problems.push(`parameter ${JSON.stringify(name)} ${controls.length ? 'is disabled' : 'does not exist'}`);
      continue;
    }
    const first = enabled.find(el => el.type !== 'hidden') || enabled[0];
    if (first.type === 'radio' || first.type === 'checkbox') {
      const group = enabled.filter(el => el.type === first.type);
      const chosen = first.type === 'radio' ? wanted.slice(0, 1) : wanted;
      const missing = chosen.filter(v => !group.some(el => el.value === v));
      if (missing.length) { problems.push(`${name}: no choice ${JSON.stringify(missing[0])}`); continue; }
      for (const el of group) {
        const on = chosen.includes(el.value);
        if (el.checked !== on) { el.checked = on; fire(el); }
      }
    } else if (first.tagName === 'SELECT') {
      const options = Array.from(first.options);
      const chosen = first.multiple ? wanted : wanted.slice(0, 1);
      const missing = chosen.filter(v => !options.some(o => o.value === v && !o.disabled));
      if (missing.length) { problems.push(`${name}: no option ${JSON.stringify(missing[0])}`); continue; }
      if (first.multiple) { options.forEach(o => { o.selected = chosen.includes(o.value); }); }
      else if (chosen.length) { setValue(first, chosen[0]); } else { first.selectedIndex = -1; }
      fire(first);
    } else if (first.type === 'file') {
      problems.push(`${name}: a file input cannot be filled in the browser mode`);
      continue;
    } else {
      setValue(first, wanted.length ? wanted[0] : '');
      fire(first);
    }
    filled.push(name);
  }
  let submitter = null;
  if (button) {
    const submits = listed.filter(el => !el.disabled && (el.tagName === 'BUTTON' ? el.type === 'submit'
      : el.tagName === 'INPUT' && (el.type === 'submit' || el.type === 'image')));
    const same = submits.filter(el => el.name === (button.name || '') &&
      (button.value === undefined || button.value === null || el.value === button.value) &&
      (!button.kind || el.type === button.kind));
    submitter = same.find(el => button.label && caption(el) === button.label) || same[0] || null;
    if (!submitter) problems.push(`no enabled submit button ${JSON.stringify(button.name || button.label || '')}`);
  }
  if (problems.length) return {problem: problems.join('; '), filled};
  const invalid = listed.filter(el => el.willValidate && !el.validity.valid).map(el => el.name || el.type);
  form.noValidate = true;  // sent as filled, as DynaBot sends forms without the browser
  if (live) {
    const box = form.classList.contains('webrace-formless')
      ? listed.find(el => el.hasAttribute('data-webrace-formless')) : null;
    return {filled, invalid, submitter: 'typed', live: true,
            formless: box ? `[data-webrace-formless="${box.getAttribute('data-webrace-formless')}"]` : null};
  }
  setTimeout(() => {
    if (submitter) submitter.click();
    else if (form.requestSubmit) form.requestSubmit();
    else form.submit();
  }, 0);
  const described = submitter ? (submitter.name || caption(submitter) || submitter.type) : 'requestSubmit()';
  return {filled, invalid, submitter: described};
}"""


# ---------------------------------------------------------------------------------------------
# The download handler
# ---------------------------------------------------------------------------------------------

_HANDLER_CLASS: Any = None


def __getattr__(name: str) -> Any:
    """``BrowserDownloadHandler`` (what ``DOWNLOAD_HANDLERS`` names) is defined when first
    asked for, so that importing this module does not import scrapy-playwright."""
    if name == "BrowserDownloadHandler":
        return _handler_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _handler_class() -> Any:
    global _HANDLER_CLASS
    if _HANDLER_CLASS is None:
        missing = _load()
        if missing is not None:
            raise missing
        from scrapy_playwright.handler import ScrapyPlaywrightDownloadHandler


        class BrowserDownloadHandler(ScrapyPlaywrightDownloadHandler):
            """scrapy-playwright's handler, for requests made by :func:`render_request` and
            :func:`probe_request`: their browser profile (no network prediction), the page's
            robots.txt rules for its sub-requests, a bound on the whole request and on the pages
            open at once, and the outcome checked. Requests without ``meta["playwright"]`` go to
            Scrapy's HTTP handler (scrapy-playwright's own rule)."""

            def __init__(self, crawler: Any) -> None:
                super().__init__(crawler)
                settings = crawler.settings
                self.webrace_crawler = crawler
                self.webrace_timeout = _timeout(settings)
                self.webrace_pages = asyncio.Semaphore(settings.getint("WEBRACE_BROWSER_PAGES", DEFAULT_PAGES)
                                                       or DEFAULT_PAGES)
                self.webrace_launch = settings.getdict("PLAYWRIGHT_LAUNCH_OPTIONS") or launch_options(settings)
                self.webrace_tmp: str | None = None  # the browser's profile and home directories
                self.webrace_context: dict[str, Any] | None = None
                self.webrace_robots: Any = False  # not looked up yet

            async def download_request(self, request: Request) -> Any:
                session = request.meta.get(_SESSION)
                if not request.meta.get("playwright") or not isinstance(session, _Session):
                    return await super().download_request(request)
                session.timeout = self.webrace_timeout
                session.max_size = self._max_size(request)
                session.allowed = await self._robots(request)
                request.meta["playwright_context"] = CONTEXT
                request.meta["playwright_context_kwargs"] = self._context_kwargs(request)
                async with self.webrace_pages:
                    try:
                        response = await asyncio.wait_for(super().download_request(request), self.webrace_timeout)
                    except TimeoutError:
                        page = session.page
                        if page is not None:
                            with suppress(PlaywrightError, TimeoutError):
                                await asyncio.wait_for(page.close(), 5)
                        self.stats.inc_value("webrace/browser/timeout")
                        raise BrowserError(f"the browser did not finish {request.url} within "
                                           f"{self.webrace_timeout:g} s (WEBRACE_BROWSER_TIMEOUT)") from None
                    except PlaywrightError as exc:  # the page could not load (refused, navigation timeout...)
                        message = (exc.message or type(exc).__name__).strip().splitlines()[0][:300]
                        raise BrowserError(f"the browser could not load {request.url}: {message}") from exc
                    finally:
                        session.detach()
                        self._count(session)
                return self._outcome(request, session, response)

            def _outcome(self, request: Request, session: _Session, response: Any) -> Any:
                state = session.state
                if session.blocked_navigation is not None:
                    url, reason = session.blocked_navigation
                    code = "robots" if reason == "robots" else "other_host"
                    request.meta["webrace_ignored"] = code
                    self.stats.inc_value(f"webrace/browser/submission_blocked/{code}")
                    raise IgnoreRequest(f"the page's navigation to {url} was not sent ({reason})")
                if session.too_big:
                    raise BrowserError(f"the page's DOM is {session.too_big} characters, over the limit of "
                                       f"{session.max_size} (DOWNLOAD_MAXSIZE)")
                if response.url.startswith("chrome-error:"):
                    raise BrowserError(f"the browser ended on an error page after loading {request.url}")
                limit = self._max_size(request)
                if limit and len(response.body) > limit:
                    raise BrowserError(f"the page's DOM is {len(response.body)} bytes, over the limit of {limit}")
                if state.get("navigated") and state.get("status") and state["status"] != response.status:
                    response = response.replace(status=state["status"])
                return response

            def _max_size(self, request: Request) -> int:
                default = self.webrace_crawler.settings.getint("DOWNLOAD_MAXSIZE")
                return int(request.meta.get("download_maxsize", default))

            def _count(self, session: _Session) -> None:
                self.stats.inc_value("webrace/browser/pages")
                for entry in session.state["aborted"]:
                    self.stats.inc_value(f"webrace/browser/aborted/{entry['reason'].replace(' ', '_')}")
                if session.state["heavy"]:
                    self.stats.inc_value("webrace/browser/aborted/heavy", session.state["heavy"])

            async def _robots(self, request: Request) -> Any:
                """url -> allowed, by the robots.txt rules the crawl holds for the page's origin."""
                settings = self.webrace_crawler.settings
                if not settings.getbool("ROBOTSTXT_OBEY") or request.meta.get("dont_obey_robotstxt"):
                    return None
                agent = settings.get("ROBOTSTXT_USER_AGENT") or (request.headers.get("User-Agent") or b"").decode(
                    "latin-1") or settings.get("USER_AGENT")
                source = self._robots_source()
                if source is None:
                    return None
                kind, owner = source
                if kind == "webrace":
                    rules = await owner.rules(request)
                    return lambda url: rules.allowed(url, agent)
                parser = await owner.robot_parser(request)
                return None if parser is None else (lambda url: parser.allowed(url, agent))

            def _robots_source(self) -> tuple[str, Any] | None:
                if self.webrace_robots is False:
                    from scrapy.downloadermiddlewares.robotstxt import RobotsTxtMiddleware

                    from webrace.middlewares.robots import RobotsTxt

                    self.webrace_robots = None
                    for middleware in self.webrace_crawler.engine.downloader.middleware.middlewares:
                        if isinstance(getattr(middleware, "robots", None), RobotsTxt):
                            self.webrace_robots = ("webrace", middleware.robots)
                        elif isinstance(middleware, RobotsTxtMiddleware):
                            self.webrace_robots = ("scrapy", middleware)
                    if self.webrace_robots is None:
                        logger.warning("ROBOTSTXT_OBEY is set but no robots.txt middleware is enabled: "
                                       "the browser pages' own requests are not checked against robots.txt")
                return self.webrace_robots

            def _context_kwargs(self, request: Request) -> dict[str, Any]:
                """The persistent context of the crawl's browser requests (created by the first
                one): its own profile, so that its preferences can turn network prediction off,
                and its own home directory, so that it writes nothing in the user's."""
                if self.webrace_context is None:
                    self.webrace_tmp = tempfile.mkdtemp(prefix="webrace-chromium-")
                    profile, home = os.path.join(self.webrace_tmp, "profile"), os.path.join(self.webrace_tmp, "home")
                    os.makedirs(os.path.join(profile, "Default"))
                    os.makedirs(home)
                    with open(os.path.join(profile, "Default", "Preferences"), "w", encoding="utf-8") as f:
                        json.dump(PREFERENCES, f)
                    agent = (request.headers.get("User-Agent") or b"").decode("latin-1") or \
                        self.webrace_crawler.settings.get("USER_AGENT")
                    self.webrace_context = {**self.webrace_launch, "user_data_dir": profile, "env": browser_env(home),
                                            "user_agent": agent, "service_workers": "block", "accept_downloads": False}
                return self.webrace_context

            async def close(self) -> None:
                try:
                    await super().close()
                finally:
                    if self.webrace_tmp:
                        shutil.rmtree(self.webrace_tmp, ignore_errors=True)

        BrowserDownloadHandler.__qualname__ = "BrowserDownloadHandler"
        _HANDLER_CLASS = BrowserDownloadHandler
    return _HANDLER_CLASS
