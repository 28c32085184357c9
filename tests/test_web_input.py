"""Every input of the web app can be wrong: generated values (hypothesis) sent to every route
of the app's ``url_map``, with its methods, every field of the forms its pages render and
every field of the JSON API, by the owner (a session with its CSRF token, a bearer token),
by another owner, by an admin and by nobody. Whatever is sent: no 500, no traceback, an API
error is one JSON line, and a refused request (4xx) leaves every store as it was (URDs,
sentinels and notifications, ACIs, channels, accounts: read through the stores).

The app runs in-process under Flask's test client (no socket: the sweep takes seconds), with
``TESTING`` off, so an exception in a view becomes the 500 waitress would send; the exception
itself is recorded (Flask's ``got_request_exception``) and shown when a case fails. The sweep
is derandomized (the same cases on every run); ``WEBRACE_SWEEP_SCALE=20`` runs twenty times
as many, random ones, to look for more.

A new route fails the sweep until it is given its values here (``BODY``, ``QUERY``,
``PATH_VALUES``); a new form field is read from the page that renders it. Then the cases of
issue 42, each on every path that takes the value.
"""

from __future__ import annotations

import json
import os
import re
import traceback
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode
from xml.sax.saxutils import escape

import pytest
from flask import got_request_exception
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lxml import html
from scrapy.settings import Settings
from test_web import PASSWORDS, _notify, _page, _store_aci

from webrace.backends import open_aci_store, open_delivery_store, open_sentinel_store, open_urd_store
from webrace.digest.sdiff import check_location
from webrace.records.channel import Channel
from webrace.records.sentinel import make
from webrace.urd import parse
from webrace.web.accounts import open_accounts
from webrace.web.app import MAX_JSON_DEPTH, create_app
from webrace.web.owners import MAX_PAGE, page_number
from webrace.web.profile import SENTINEL_FIELDS

try:
    import webrace.delivery  # noqa: F401 - the app runs without it (no channels section)
    DELIVERY = True
except ImportError:
    DELIVERY = False

SCALE = int(os.environ.get("WEBRACE_SWEEP_SCALE", "1"))
MAX_BODY = 256 * 1024  # the app's WEBRACE_WEB_MAX_BODY here: a JSON body 100,000 deep fits


def mostly(usual: st.SearchStrategy, other: st.SearchStrategy, odds: int = 3) -> st.SearchStrategy:
    """``usual`` ``odds`` times in ``odds + 1``, else ``other`` (a sweep that mostly sends a
    wrong token or another owner's name never reaches the checks behind them)."""
    return st.integers(0, odds).flatmap(lambda n: other if n == 0 else usual)


# -- what is sent ---------------------------------------------------------------------------------

# Values for any field: text with control characters and any code point but surrogates,
# numbers (huge, negative, not numbers), long runs of one character, and values that pass the
# first checks, so that the later ones are reached too.
NUMBERS = st.one_of(st.integers().map(str), st.sampled_from([
    "-1", "0", "1.5", "1e400", "nan", "inf", "-inf", "99999999999999999999999d", "1" * 5000, "٣", "²",
    "0x10", "1_000", " 7 ", "-0", "9" * 40 + "w", "1e-400s"]))
RUNS = st.builds(lambda ch, n: ch * n, st.sampled_from(list("a(1é\x00<%{/ [\\:\n")),
                 st.sampled_from([129, 1001, 2049, 5000, MAX_BODY + 1]))
SCHEMES = ("http", "https", "ftp", "file", "javascript", "mailto", "mailtos", "json", "jsons", "xml", "form",
           "ntfy", "slack", "matrix", "tgram", "discord", "nope")
URLS = st.builds("{}://{}".format, st.sampled_from(SCHEMES), st.one_of(
    st.sampled_from(["a.test/", "u:secret@mail.test?to=a@mail.test", "127.0.0.1:6379/", "[::1]:8080/",
                     "2130706433/", "169.254.169.254/latest/", "hooks.test/?method=DELETE&+X-Evil=1", "[zz",
                     "h:99999999999", "%ff", "a.test/%00", "user@/", ""]),
    st.text(st.characters(exclude_categories=("Cs",)), max_size=30)))
PLAUSIBLE = st.sampled_from([
    "http://a.test/", "https://a.test/x?y=1#z", "http://user:pw@a.test/", "//evil.example", "/%09/evil.example",
    "/owner/alice/", "css:#news", "css:p > a", "xpath://p", "xpath:$x", "xpath:foo()", "css:" + ":is(" * 300,
    "css:" + "a " * 600, "xpath:" + "(" * 2000, "(" * 2000, "(a+)+$", "\\d+", "(?P<x>a)(?P=x)", "(?=a)",
    "any", "content", "keyword", "regex", "structure", "links", "images", "attributes", "added", "removed",
    "90s", "15m", "1h", "2d", "1w", "aci", "notification", "aci,notification", "alice", "bob", "root", "Alice",
    "alice\nroot", "../../etc/passwd", "%00", "<script>alert(1)</script>", "{{ 7*7 }}", "' OR 1=1 --",
    "wr_forged", "\u202e\u200b", "\ufeff", "e\u0301", "ﬁ"])
TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=40)
CONTROL = st.text(st.characters(min_codepoint=0, max_codepoint=0x9f), max_size=20)
VALUE = st.one_of(TEXT, CONTROL, NUMBERS, RUNS, URLS, PLAUSIBLE)
# a header value as it arrives: bytes (WSGI reads them as latin-1), anything but a line break
HEADER = VALUE.map(lambda v: v.encode("utf-8", "surrogatepass").decode("latin-1").replace("\r", "").replace("\n", ""))

# JSON: values of every type, nesting, and bodies that are not JSON at all
JSON_LEAF = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), VALUE)
JSON_VALUE = st.recursive(JSON_LEAF, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                              st.dictionaries(TEXT, inner, max_size=4)), max_leaves=12)
JSON_OBJECT = st.one_of(
    st.fixed_dictionaries({}, optional={k: st.one_of(JSON_VALUE, PLAUSIBLE) for k in SENTINEL_FIELDS}),
    st.fixed_dictionaries({"url": st.just("http://a.test/")}, optional={
        "ignore": st.one_of(st.lists(st.one_of(PLAUSIBLE, JSON_VALUE), max_size=30), VALUE),
        "every": JSON_VALUE, "type": st.sampled_from(["regex", "keyword"]), "pattern": st.one_of(PLAUSIBLE, JSON_VALUE),
        "where": st.one_of(PLAUSIBLE, VALUE), "extra": JSON_VALUE}))
DEEP = st.builds(lambda pair, n: (pair[0] * n + pair[1] * n).encode(),
                 st.sampled_from([("[", "]"), ('{"a":', "}"), ("[", ""), ('["', "")]),
                 st.sampled_from([MAX_JSON_DEPTH - 1, MAX_JSON_DEPTH, MAX_JSON_DEPTH + 1, 1000, 100_000]))
JSON_BODY = mostly(JSON_OBJECT.map(lambda d: json.dumps(d).encode()), st.one_of(
    JSON_VALUE.map(lambda v: json.dumps(v).encode()), DEEP,
    st.sampled_from([b"", b"{", b'{"url": "http://a.test/",}', b"\xff\xfe{}", b'{"url": "\\ud800"}', b"NaN",
                     b'{"url": 1e999}', b'{"url": "http://a.test/", "url": "x"}', b"\x00" * 100,
                     b'{"every": ' + b"9" * 5000 + b"}", '{"url": "http://a.test/"}'.encode("utf-16")]),
    st.binary(max_size=200)))


@st.composite
def urd_xml(draw: st.DrawFn) -> bytes:
    """A URD with each value plausible or generated, escaped (now and then not)."""
    def value(good: str) -> str:
        text = draw(mostly(st.just(good), VALUE, 1))
        return text if draw(st.integers(0, 9)) == 0 else escape(text, {'"': "&quot;"})

    keywords = "".join(f'<keyword key="{value("java")}" weight="{value("2")}"/>'
                       for _ in range(draw(st.integers(0, 3))))
    one = (f'<urd id="{value("fuzz-urd")}" owner="{value("alice")}"><uri timing="{value("3600000")}" '
           f'lastcheck="{value("0")}" port="{value("80")}">{value("http://a.test/")}</uri>'
           f'<keywords threshold="{value("1")}">{keywords}</keywords><depth level="{value("1")}"/>'
           f'<scope>{value("host")}</scope><urgency urgent="{value("1")}"/></urd>')
    count = draw(st.sampled_from([1, 1, 2, 300]))
    text = one if count == 1 else "<urds>" + one * count + "</urds>"
    return text.encode(draw(st.sampled_from(["utf-8", "utf-16"])), "surrogatepass")


XML_BODY = st.one_of(urd_xml(), VALUE.map(lambda v: v.encode("utf-8", "surrogatepass")), st.binary(max_size=200),
                     st.sampled_from([
                         b"", b"<", b"<urd/>", b"<urds></urds>", b"\xff\xfe<\x00u\x00",
                         b"<?xml version='1.0' encoding='latin-9'?><urd/>", b"<?xml-stylesheet href='x'?><urd/>",
                         b'<!DOCTYPE urd [<!ENTITY x SYSTEM "file:///etc/passwd">]><urd id="x" owner="alice">&x;</urd>',
                         b'<!DOCTYPE u [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">'
                         b'<!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;"><!ENTITY d "&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;">]>'
                         b"<u>&d;&d;</u>",
                         b"<urds>" * 5000 + b"</urds>" * 5000, b"<a>" * 300 + b"</a>" * 300,
                         b'<urd xmlns:xi="http://www.w3.org/2001/XInclude"><xi:include href="/etc/passwd"/></urd>',
                         b"\x00" * 100]))

# the query parameters each view reads (a made-up one is sent too)
QUERY = {"pages.login": ("next",), "pages.owner_page": ("page",), "api.acis": ("page",)}

# the body each view reads: "form" (the fields of the forms posting there, read from the
# rendered pages), "xml", "json", or None (none: junk is sent now and then)
BODY = {
    "pages.login": "form", "pages.logout": "form", "pages.add_urds": "form", "pages.edit_urd": "form",
    "pages.remove_urd": "form", "pages.add_sentinel": "form", "pages.edit_sentinel": "form",
    "pages.remove_sentinel": "form", "pages.add_channel": "form", "pages.remove_channel": "form",
    "pages.new_feed_url": "form", "pages.revoke_feed_url": "form", "pages.token_feed": None,
    "pages.home": None, "pages.all_owners": None, "pages.owner_page": None, "pages.feed": None,
    "pages.notification": None, "pages.stored": None, "pages.old_stored_link": None, "pages.profile_page": None,
    "api.me": None, "api.all_owners": None, "api.acis": None, "api.notifications": None, "api.notification": None,
    "api.urds": "xml", "api.remove_urd": None, "api.sentinels": "json", "api.remove_sentinel": None,
    "api.openapi_description": None,
    "static": None,
}

# each path parameter: what exists now (the owner's first), or anything
PATH_VALUES = {"name": "owners", "urd_id": "urds", "sentinel_id": "sentinels", "note_id": "notes",
               "aci_id": "acis", "channel_id": "channels", "filename": "static", "token": "feed_tokens"}
RAW_SEGMENTS = ("%ff", "%00", "%2e%2e", "%c0%ae", "%2F", "..", ".", "%", "%zz", "a%0d%0aSet-Cookie:x=1")

ACTORS = ("alice-session", "alice-token", "bob-session", "bob-token", "root-session", "nobody", "forged")
OWNERS = ("alice", "bob")


# -- the app and its stores -----------------------------------------------------------------------

@dataclass
class Actor:
    client: Any  # a Flask test client, keeping the actor's cookies
    name: str | None
    token: str | None = None  # the bearer token
    login: str | None = None  # the login the session cookie names
    csrf: str | None = None


class Sweep:
    """The app over a data directory of its own, the actors, and the forms its pages render."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.app = create_app(settings)
        self.errors: list[BaseException] = []
        got_request_exception.connect(lambda sender, exception, **kw: self.errors.append(exception), self.app,
                                      weak=False)
        with open_accounts(settings) as accounts:
            for name, password in PASSWORDS.items():
                accounts.add(name, password, admin=name == "root")
            tokens = {name: accounts.new_token(name) for name in OWNERS}
            self.feed_tokens = [accounts.new_feed_token(name) for name in OWNERS]  # secret feed URLs
        self.actors = {key: Actor(self.app.test_client(), None if key in ("nobody", "forged") else key.split("-")[0])
                       for key in ACTORS}
        for key in ("alice-token", "bob-token"):
            self.actors[key].token = tokens[self.actors[key].name]
        self.forms: dict[str, list[tuple[str, tuple[str, ...]]]] = {}

    def actor(self, key: str) -> Actor:
        """The actor, its session alive. A sweep's logout ends it: a new login is opened the way
        ``auth.log_in`` opens one, without the password (the sweep's failed logins keep the
        owner's login limit full)."""
        actor = self.actors[key]
        if not key.endswith("-session"):
            return actor
        with open_accounts(self.settings) as accounts:
            if actor.login is not None and accounts.login_owner(actor.login) == actor.name:
                return actor
            actor.login = accounts.open_login(actor.name, 3600)
        with actor.client.session_transaction() as session:
            session.clear()
            session["login"] = actor.login
            session.permanent = True
        page = actor.client.get("/login").get_data(as_text=True)
        actor.csrf = re.search(r'name="csrf_token" value="([^"]+)"', page).group(1)
        return actor

    def ensure_state(self) -> None:
        """Each owner keeps a URD, a sentinel and a channel to aim at (the sweep removes some)."""
        with open_urd_store(self.settings) as store:
            have = {u.owner for u in store.all()}
            store.put_many([u for owner in OWNERS if owner not in have for u in parse(
                f'<urd id="{owner}-urd" owner="{owner}"><uri timing="3600000">http://{owner}.test/</uri>'
                '<depth level="1"/></urd>'.encode())])
        with open_sentinel_store(self.settings) as store:
            have = {s.owner for s, _, _ in store.all()}
            store.add([make(owner, f"http://{owner}.test/", "content", where="css:#news", ignore=("\\d+",))
                       for owner in OWNERS if owner not in have])
        with open_delivery_store(self.settings) as store:
            have = {c.owner for c in store.channels()}
            for owner in OWNERS:
                if owner not in have:
                    store.put_channel(Channel(f"{owner}-mail", owner, f"mailto://{owner}:secret@mail.test",
                                              ("aci", "notification"), 0))

    def state(self) -> dict:
        """Everything a request may change, read through the stores."""
        with open_urd_store(self.settings) as store:
            urds = sorted(store.all(), key=lambda u: u.id)
        with open_sentinel_store(self.settings) as store:
            sentinels = sorted(store.all(), key=lambda row: row[0].id)
            notes = {o: store.notifications(o) for o in sorted({s.owner for s, _, _ in sentinels} | set(PASSWORDS))}
        with open_aci_store(self.settings) as store:
            acis = {o: store.list(o) for o in store.owners()}
        with open_delivery_store(self.settings) as store:
            channels = sorted(store.channels(), key=lambda c: c.id)
        with open_accounts(self.settings) as accounts:
            accounts_rows = accounts.rows()
        return {"urds": urds, "sentinels": sentinels, "notes": notes, "acis": acis, "channels": channels,
                "accounts": accounts_rows}

    def ids(self, kind: str, state: dict, owner: str | None) -> list[str]:
        """The ids of ``kind`` that exist now, ``owner``'s first."""
        if kind == "owners":
            return [owner or "alice", "alice", "bob", "root", "carol"]
        if kind == "static":
            return ["style.css"]
        if kind == "feed_tokens":  # shown once, kept hashed: the ones made at the start (maybe revoked since)
            return self.feed_tokens
        found = {"urds": [(u.owner, u.id) for u in state["urds"]],
                 "sentinels": [(s.owner, s.id) for s, _, _ in state["sentinels"]],
                 "notes": [(o, n["id"]) for o, notes in state["notes"].items() for n in notes],
                 "acis": [(o, a.id) for o, acis in state["acis"].items() for a in acis],
                 "channels": [(c.owner, c.id) for c in state["channels"]]}[kind]
        return [i for o, i in found if o == owner] + [i for o, i in found if o != owner] or ["none"]

    def read_forms(self) -> None:
        """The forms of the pages a visitor, alice and the admin are shown (reached by links
        from where they start): endpoint -> [(field, values the page suggests)]."""
        adapter = self.app.url_map.bind("localhost")
        for key, start in (("nobody", "/login"), ("alice-session", "/owner/alice/profile"), ("root-session", "/")):
            client, seen, todo = self.actor(key).client, set(), [start]
            while todo and len(seen) < 40:
                path = todo.pop()
                if path in seen or path.startswith(("/stored/", "/static/")) or path.endswith(".atom"):
                    continue
                seen.add(path)
                answer = client.get(path, follow_redirects=True)
                if "html" not in answer.content_type:
                    continue
                page = html.fromstring(answer.get_data(as_text=True))
                todo.extend(a for a in page.xpath("//a/@href") if a.startswith("/"))
                for form in page.xpath("//form[@method='post']"):
                    endpoint, _ = adapter.match(form.get("action").split("?")[0], method="POST")
                    fields: dict[str, list[str]] = {}
                    for field in form.xpath(".//input[@name] | .//textarea[@name] | .//select[@name]"):
                        suggested = field.xpath("./option/@value") or [field.get("value") or field.text or ""]
                        fields.setdefault(field.get("name"), []).extend(suggested)
                    self.forms[endpoint] = [(k, tuple(v)) for k, v in fields.items()]


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    settings = Settings({"WEBRACE_DATA_DIR": str(tmp_path_factory.mktemp("web-input")),
                         "WEBRACE_WEB_MAX_BODY": MAX_BODY})
    for owner in OWNERS:
        _store_aci(settings, owner, f"http://{owner}.test/", _page(owner, "java"), 1_000_000, owner)
        _notify(settings, owner, _page("N", "Exams on Monday"), _page("N", "Exams on Friday"), 2_000_000)
    sweep = Sweep(settings)
    sweep.ensure_state()
    sweep.read_forms()
    return sweep


# -- the sweep ------------------------------------------------------------------------------------

def _routes() -> list[tuple[str, str]]:
    """(endpoint, method) of every route (HEAD and OPTIONS are sent with the others)."""
    app = create_app(Settings({"WEBRACE_WEB_SECRET_KEY": "k" * 64}))
    return sorted({(rule.endpoint, method) for rule in app.url_map.iter_rules()
                   for method in rule.methods - {"HEAD", "OPTIONS"}})


def _path(sweep: Sweep, endpoint: str, data: st.DataObject, state: dict, actor: Actor) -> str:
    rule = next(r for r in sweep.app.url_map.iter_rules() if r.endpoint == endpoint)
    missing = set(rule.arguments) - set(PATH_VALUES)
    assert not missing, f"no values for the path parameter(s) {missing} of {endpoint}: add them to PATH_VALUES"

    def segment(match: re.Match) -> str:
        name = match.group(1)
        ids = [quote(i, safe="") for i in sweep.ids(PATH_VALUES[name], state, actor.name)]
        # an index into ids, not sampled_from(ids): what a case draws must not depend on what
        # exists (hypothesis replays a case against the stores as they are by then)
        other = st.one_of(st.integers(0, 7).map(lambda n: ids[n % len(ids)]),
                          VALUE.map(lambda v: quote(v[:3000], safe="")), st.sampled_from(RAW_SEGMENTS))
        return data.draw(mostly(st.just(ids[0]), other), label=name)

    return re.sub(r"<(?:[^:<>]+:)?([^<>]+)>", segment, rule.rule)


def _form(sweep: Sweep, endpoint: str, data: st.DataObject, actor: Actor) -> dict:
    """The fields of the form posting to ``endpoint``, each the page's value, anything, several
    values, or none; sent url-encoded, as multipart, or url-encoded with broken escapes."""
    assert endpoint in sweep.forms, f"no page renders a form posting to {endpoint}: give it one, or its fields here"
    form: dict[str, Any] = {}
    for name, suggested in sweep.forms[endpoint]:
        if name == "csrf_token":
            form[name] = data.draw(mostly(st.just(actor.csrf or ""), VALUE), label=name)
            continue
        one = st.one_of(st.sampled_from(suggested), VALUE)
        value = data.draw(st.one_of(st.none(), one, st.lists(one, max_size=3)), label=name)
        if value is not None:
            form[name] = value
    form.update(data.draw(mostly(st.just({}), st.dictionaries(TEXT, VALUE, max_size=2)), label="extra fields"))
    encoding = data.draw(mostly(st.just("urlencoded"), st.sampled_from(["multipart", "broken", "nameless part"])),
                         label="encoding")
    if encoding == "multipart":
        return {"data": form, "content_type": "multipart/form-data"}
    if encoding == "nameless part":  # as a script may send it; werkzeug keys it None
        fields = [(k, v) for k, values in form.items() for v in (values if isinstance(values, list) else [values])]
        parts = [f'--B\r\nContent-Disposition: form-data; name="{quote(k)}"\r\n\r\n{v}\r\n' for k, v in fields]
        body = "".join(parts) + "--B\r\nContent-Disposition: form-data\r\n\r\nx\r\n--B--\r\n"
        return {"data": body.encode("utf-8", "surrogatepass"), "content_type": "multipart/form-data; boundary=B"}
    body = urlencode(form, doseq=True)
    if encoding == "broken":
        body += data.draw(st.sampled_from(["&%ff=%fe", "&urd_xml=%", "&url=%zz", "&&==&", "&csrf_token=%00"]))
    return {"data": body, "content_type": "application/x-www-form-urlencoded"}


def _request(sweep: Sweep, endpoint: str, method: str, data: st.DataObject) -> tuple[Actor, dict, dict]:
    """The actor, the state before, and the arguments of one generated request."""
    actor = sweep.actor(data.draw(mostly(st.sampled_from(ACTORS[:2]), st.sampled_from(ACTORS[2:])), label="actor"))
    before = sweep.state()
    method = data.draw(mostly(st.just(method), st.sampled_from(["HEAD", "OPTIONS", "PUT", "PATCH"]), 7), label="method")
    path = _path(sweep, endpoint, data, before, actor)
    # a path or query of at most a few KB: a longer request line is refused by waitress itself
    query = {k: data.draw(VALUE, label=k)[:8000] for k in (*QUERY.get(endpoint, ()), "x") if data.draw(st.booleans())}
    headers = {}
    if actor.token or actor.name is None:
        token = actor.token or data.draw(st.one_of(st.just(""), HEADER, st.just("wr_" + "a" * 43)), label="bearer")
        scheme = data.draw(mostly(st.just("Bearer "), st.sampled_from(["bearer ", "Basic ", ""])))
        headers["Authorization"] = scheme + token
    if actor.csrf and endpoint.startswith("api."):
        headers["X-CSRFToken"] = data.draw(mostly(st.just(actor.csrf), HEADER), label="X-CSRFToken")
    kind = BODY[endpoint] if method not in ("GET", "HEAD", "OPTIONS") else None
    body: dict = {}
    if kind == "form":
        body = _form(sweep, endpoint, data, actor)
    elif kind in ("xml", "json"):
        content_type = data.draw(mostly(st.just(f"application/{kind}"), st.sampled_from(["text/plain", None])))
        body = {"data": data.draw(XML_BODY if kind == "xml" else JSON_BODY, label="body"), "content_type": content_type}
    elif data.draw(mostly(st.just(False), st.just(True)), label="junk body"):
        body = {"data": data.draw(st.binary(max_size=100)), "content_type": "application/octet-stream"}
    if actor is sweep.actors["forged"]:  # a session cookie not signed by the app
        cookie = data.draw(st.one_of(VALUE.map(lambda v: quote(v[:2000])), st.just("eyJsb2dpbiI6IngifQ.x.y")))
        actor.client.set_cookie("webrace_session", cookie)
    return actor, before, {"path": path, "method": method, "query_string": query, "headers": headers, **body}


@pytest.mark.parametrize(("endpoint", "method"), _routes())
def test_every_route_and_method_survives_generated_input(sweep, endpoint, method):
    assert endpoint in BODY, f"the sweep has no values for {endpoint}: add it to BODY (and QUERY if it reads any)"
    takes_input = BODY[endpoint] is not None or endpoint in QUERY

    @settings(max_examples=(60 if takes_input else 20) * SCALE, deadline=None, derandomize=SCALE == 1,
              database=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(data=st.data())
    def case(data: st.DataObject) -> None:
        sweep.ensure_state()
        actor, before, request = _request(sweep, endpoint, method, data)
        sweep.errors.clear()
        answer = actor.client.open(**request)
        text = answer.get_data(as_text=True)
        where = f"{str(request)[:1000]} -> {answer.status}"
        assert not sweep.errors, where + "\n" + "".join(traceback.format_exception(sweep.errors[0]))
        assert answer.status_code < 500, where + "\n" + text[:1000]
        assert "Traceback (most recent call last)" not in text, where
        if answer.status_code >= 400 and endpoint.startswith("api.") and request["method"] != "HEAD":
            error = answer.get_json(silent=True)
            assert isinstance(error, dict) and "\n" not in error.get("error", "\n"), where + "\n" + text[:1000]
        if answer.status_code >= 400:
            assert sweep.state() == before, f"a refused request changed the stores: {where}"

    case()


def test_every_form_of_the_pages_is_read_by_the_sweep(sweep):
    """The sweep's form fields come from the rendered pages: a POST view no page posts to would
    be swept with no fields."""
    posted = {r.endpoint for r in sweep.app.url_map.iter_rules() if "POST" in r.methods}
    assert set(sweep.forms) == {e for e in posted if BODY[e] == "form"}
    assert set(dict(sweep.forms["pages.add_sentinel"])) == {"csrf_token", *SENTINEL_FIELDS}
    if DELIVERY:
        assert set(dict(sweep.forms["pages.add_channel"])) == {"csrf_token", "channel_url", "events"}


# -- the cases of issue 42 ----------------------------------------------------------------------------

def _api(sweep: Sweep, method: str, path: str, **kwargs: Any) -> Any:
    actor = sweep.actor("alice-token")
    return actor.client.open(path, method=method, headers={"Authorization": f"Bearer {actor.token}"}, **kwargs)


def _page_form(sweep: Sweep, path: str, form: dict) -> Any:
    actor = sweep.actor("alice-session")
    return actor.client.post(path, data={"csrf_token": actor.csrf, **form})


@pytest.mark.parametrize("path", ["/owner/alice/", "/api/v1/owners/alice/acis"])
@pytest.mark.parametrize("page", ["1" * 5000, "0", "-1", "²", "1e3", "x", str(MAX_PAGE + 1)])
def test_a_page_number_that_is_none_answers_400_on_the_page_and_the_api(sweep, path, page):
    sweep.errors.clear()
    actor = sweep.actor("alice-session")
    answer = actor.client.get(path, query_string={"page": page})
    assert answer.status_code == 400 and not sweep.errors
    assert "page: expected a number from 1 to 1,000,000" in answer.get_data(as_text=True)


def test_page_numbers_are_read_from_1_to_the_bound():
    assert [page_number(t) for t in (None, "", "1", "2", "0002", str(MAX_PAGE))] == [1, 1, 1, 2, 2, MAX_PAGE]


@pytest.mark.parametrize("body", [
    b"[" * 100_000 + b"]" * 100_000,
    b'{"url": ' * 20_000,
    b'{"url": "http://a.test/", "ignore": ' + b"[" * (MAX_JSON_DEPTH + 1) + b"]" * (MAX_JSON_DEPTH + 1) + b"}",
], ids=["arrays 100,000 deep", "objects 20,000 deep, unclosed", "one level too many"])
def test_a_json_body_nested_too_deep_answers_400_in_one_line_and_adds_nothing(sweep, body):
    before = sweep.state()
    sweep.errors.clear()
    answer = _api(sweep, "POST", "/api/v1/owners/alice/sentinels", data=body, content_type="application/json")
    assert answer.status_code == 400 and not sweep.errors
    assert answer.get_json() == {"error": f"the body is not JSON: nested deeper than {MAX_JSON_DEPTH} levels"}
    assert sweep.state() == before


def test_brackets_inside_json_strings_do_not_count_as_nesting(sweep):
    ignore = ["[" * 200 + "\\\\\"{" * 50]  # a regex of brackets and escaped quotes: text, not nesting
    answer = _api(sweep, "POST", "/api/v1/owners/alice/sentinels", json={"url": "http://deep.test/", "ignore": ignore})
    assert answer.status_code == 400 and "--ignore" in answer.get_json()["error"]  # RE2 refuses it: the JSON was read


@pytest.mark.parametrize(("sentinel", "problem"), [
    ({"url": "http://a.test/", "ignore": [1, 2, {}]}, "ignore: expected a list of strings"),
    ({"url": "http://a.test/", "ignore": ["a\nb"]}, "ignore: expected a list of strings"),
    ({"url": "http://a.test/", "where": ["css:p"]}, "where: expected a string, not list"),
    ({"url": {"a": 1}}, "url: expected a string, not dict"),
    ({"url": "http://a.test/", "every": True}, "every: expected a string or a number of seconds, not bool"),
    ({"url": "http://a.test/", "evry": "1h"}, "unknown field 'evry'"),
    (["http://a.test/"], "expected a JSON object"),
])
def test_a_sentinel_of_wrong_json_types_answers_400_naming_the_field_and_adds_nothing(sweep, sentinel, problem):
    before = sweep.state()
    sweep.errors.clear()
    answer = _api(sweep, "POST", "/api/v1/owners/alice/sentinels", json=sentinel)
    assert answer.status_code == 400 and not sweep.errors
    assert answer.get_json()["error"].startswith(problem)
    assert sweep.state() == before


def test_a_sentinel_in_json_takes_a_number_of_seconds_and_a_list_of_ignore_rules(sweep):
    sentinel = {"url": "http://json.test/", "type": "content", "every": 7200, "ignore": ["\\d+", "css:.ad"]}
    answer = _api(sweep, "POST", "/api/v1/owners/alice/sentinels", json=sentinel)
    assert answer.status_code == 201
    listed = _api(sweep, "GET", "/api/v1/owners/alice/sentinels").get_json()["sentinels"]
    added = next(s for s in listed if s["id"] == answer.get_json()["added"])
    assert (added["every"], added["ignore"]) == (7_200_000, ["\\d+", "css:.ad"])


PARENS = "(" * 2000


@pytest.mark.parametrize("fields", [
    {"type": "regex", "pattern": PARENS}, {"type": "content", "ignore": PARENS},
    {"type": "content", "where": "css:" + PARENS}, {"type": "content", "where": "xpath:" + PARENS},
    {"type": "content", "where": "css:" + ":is(" * 300 + "p" + ")" * 300},
    {"type": "content", "where": "css:" + "p " * 600}, {"type": "content", "ignore": "css:" + "p " * 600},
])
@pytest.mark.parametrize("path", ["api", "form", "edit"])
def test_a_pattern_or_location_nested_beyond_the_bounds_answers_400_on_every_path(sweep, fields, path):
    sweep.ensure_state()  # the sweep's other tests may have removed alice's sentinel (the edit path's aim)
    before = sweep.state()
    sweep.errors.clear()
    sentinel = {"url": "http://parens.test/", **fields}
    if path == "api":
        answer = _api(sweep, "POST", "/api/v1/owners/alice/sentinels", json=sentinel)
    elif path == "form":
        answer = _page_form(sweep, "/owner/alice/sentinels", sentinel)
    else:
        sentinel_id = next(s.id for s, _, _ in before["sentinels"] if s.owner == "alice")
        answer = _page_form(sweep, f"/owner/alice/sentinels/{sentinel_id}/edit", sentinel)
    assert answer.status_code == 400 and not sweep.errors
    assert sweep.state() == before


@pytest.mark.parametrize("where", ["css:" + ":is(" * 300 + "p" + ")" * 300, "css:" + "p " * 600])
def test_a_css_selector_nested_too_deeply_is_refused_in_one_line(where):
    with pytest.raises(ValueError, match="nested too deeply") as caught:
        check_location(where)
    assert "\n" not in str(caught.value) and len(str(caught.value)) < 200


@pytest.mark.parametrize("path", ["/owner/{}/", "/owner/{}/feed.atom", "/owner/{}/profile", "/api/v1/owners/{}/acis",
                                  "/api/v1/owners/{}/sentinels"])
def test_an_admin_asking_for_an_owner_name_that_is_none_gets_404(sweep, path):
    sweep.errors.clear()
    answer = sweep.actor("root-session").client.get(path.format(quote("\x1f", safe="")))
    assert answer.status_code == 404 and not sweep.errors


def test_a_missing_id_is_named_in_one_line(sweep):
    answer = _api(sweep, "DELETE", "/api/v1/owners/alice/sentinels/" + quote("a\r\nSet-Cookie: x=1", safe=""))
    assert answer.status_code == 404
    assert answer.get_json() == {"error": "alice has no sentinel 'a\\r\\nSet-Cookie: x=1'"}


NAMELESS = b'--B\r\nContent-Disposition: form-data\r\n\r\nx\r\n--B--\r\n'


@pytest.mark.parametrize("actor", ["nobody", "alice-session"])
@pytest.mark.parametrize("path", ["/login", "/logout", "/owner/alice/sentinels", "/owner/alice/urds"])
def test_a_multipart_form_part_without_a_name_answers_400(sweep, actor, path):
    before = sweep.state()
    sweep.errors.clear()
    answer = sweep.actor(actor).client.post(path, data=NAMELESS, content_type="multipart/form-data; boundary=B")
    assert answer.status_code == 400 and not sweep.errors
    assert "a form field without a name" in answer.get_data(as_text=True)
    assert sweep.state() == before
