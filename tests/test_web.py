"""The web app (webrace/web/) over HTTP on 127.0.0.1: the real waitress server of
``webrace.web.server.start``, real stores in a data directory of the module's own, filled
in-process (ACIs with stored bodies, a notification made by evaluating a real sentinel on
two real versions). Accounts, ``scrapy user`` (run in-process), sessions, CSRF, the Host
check, owners' rights, the profile (URDs and sentinels), the JSON API and the bounds."""

from __future__ import annotations

import argparse
import io
import re
import socket
import sqlite3
from dataclasses import replace

import pytest
from argon2 import PasswordHasher
from lxml import etree
from scrapy.settings import Settings
from web_client import Client

from webrace.backends import open_aci_store, open_delivery_store, open_object_cache, open_sentinel_store, open_urd_store
from webrace.commands.user import Command as UserCommand
from webrace.records.aci import Aci
from webrace.records.sentinel import make
from webrace.sentinels.baseline import of_version
from webrace.sentinels.evaluate import evaluate
from webrace.web import owners
from webrace.web.accounts import AccountError, Accounts, open_accounts
from webrace.web.config import WebConfig
from webrace.web.server import start

PASSWORDS = {"alice": "alice-secret", "bob": "bob-secret", "root": "root-secret"}
ATOM = "{http://www.w3.org/2005/Atom}"
NEWS = "http://news.test/"
# Argon2id with small costs for the tests of the account logic (the app uses argon2-cffi's defaults)
CHEAP = PasswordHasher(time_cost=1, memory_cost=1024, parallelism=1)


def _page(title: str, text: str, head: str = "") -> bytes:
    return (f"<html><head><title>{title}</title>{head}</head>"
            f"<body><div id='news'><p>{text}</p></div></body></html>").encode()


def _store_aci(settings: Settings, owner: str, url: str, body: bytes, at: int, title: str) -> Aci:
    with open_object_cache(settings) as cache:
        recorded = cache.record_fetch(url, 200, body, fetched=at, header="Content-Type: text/html; charset=utf-8",
                                      links=[])
    aci = Aci(owner, url, 3.0, at, len(body), recorded.version, recorded.meta.digest, f"summary of {title}",
              title=title)
    with open_aci_store(settings) as store:
        store.add([aci])
    return aci


def _notify(settings: Settings, owner: str, before: bytes, after: bytes, at: int) -> dict:
    """A notification as the crawl makes it: a real sentinel evaluated on two real versions."""
    sentinel = make(owner, NEWS, "content", where="css:#news")
    old, new = of_version(before, "text/html"), of_version(after, "text/html")
    with open_sentinel_store(settings) as store:
        store.add([sentinel])
        for version in (old, new):
            store.put_digest(version.sha, version.data)
        notes = [replace(n, before_digest=old.sha, after_digest=new.sha)
                 for n in evaluate([sentinel], old.digest, new.digest, at=at)]
        store.add_notifications(notes)
        return next(n for n in store.notifications(owner) if n["id"] == notes[0].id)


@pytest.fixture(scope="module")
def web(tmp_path_factory):
    """One data directory and one server for the module: alice and bob (owners), root (admin),
    three ACIs of alice's (one page with a script), one of bob's, a notification each."""
    data = tmp_path_factory.mktemp("web")
    settings = Settings({"WEBRACE_DATA_DIR": str(data), "WEBRACE_WEB_MAX_BODY": 64 * 1024})
    with open_accounts(settings) as accounts:
        for name, password in PASSWORDS.items():
            accounts.add(name, password, admin=name == "root")
    acis = {
        "old": _store_aci(settings, "alice", "http://a.test/old", _page("Old news", "old java"), 1_000_000, "Old news"),
        "script": _store_aci(settings, "alice", "http://a.test/jobs",
                             _page("Jobs", "java jobs", "<script>document.title='owned'</script>"), 2_000_000, "Jobs"),
        "fresh": _store_aci(settings, "alice", "http://a.test/fresh", _page("Fresh news", "fresh java"), 3_000_000,
                            "Fresh news"),
        "bob": _store_aci(settings, "bob", "http://b.test/", _page("Bob's", "python"), 1_500_000, "Bob's page"),
    }
    notes = {"alice": _notify(settings, "alice", _page("N", "Exams start on Monday"),
                              _page("N", "Exams start on Friday at noon"), 4_000_000),
             "bob": _notify(settings, "bob", _page("N", "one two"), _page("N", "one three"), 4_000_000)}
    server = start(settings)
    yield type("Web", (), {"settings": settings, "base": server.base_url, "acis": acis, "notes": notes,
                           "data": data})
    server.stop()


_SESSIONS: dict[tuple[str, str], Client] = {}


def logged_in(web, name: str) -> Client:
    """A client logged in as ``name``, one per module (Argon2 makes each login cost ~50 ms
    of two busy cores): tests that log out or change a password make their own."""
    key = (web.base, name)
    if key not in _SESSIONS:
        client = Client(web.base)
        answer = client.login(name, PASSWORDS[name])
        assert answer.status == 302, answer.text
        _SESSIONS[key] = client
    return _SESSIONS[key]


def run_user(settings: Settings, *args: str, stdin: str = "", monkeypatch=None) -> tuple[int, str, str]:
    """``scrapy user ARGS`` in-process: (exit code, stdout, stderr)."""
    command = UserCommand()
    command.settings = Settings()  # WebRACE's settings, as in a project, with the test's on top
    command.settings.setmodule("webrace.settings", priority="project")
    command.settings.update(settings.copy_to_dict(), priority="cmdline")
    parser = argparse.ArgumentParser()
    command.add_options(parser)
    opts, rest = parser.parse_known_args(list(args))
    out, err = io.StringIO(), io.StringIO()
    monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    monkeypatch.setattr("sys.stdout", out)
    monkeypatch.setattr("sys.stderr", err)
    command.run(rest, opts)
    monkeypatch.undo()
    return command.exitcode, out.getvalue(), err.getvalue()


# -- accounts -------------------------------------------------------------------------------------

def test_passwords_are_stored_as_argon2id_hashes_and_tokens_as_sha256_only(tmp_path):
    with Accounts(tmp_path / "a.sqlite", CHEAP) as accounts:
        accounts.add("carol", "carol-pw")
        token = accounts.new_token("carol")
        assert accounts.check("carol", "carol-pw") and not accounts.check("carol", "wrong")
        assert not accounts.check("nobody", "carol-pw")
        assert accounts.owner_for_token(token) == "carol" and accounts.owner_for_token(token + "x") is None
    raw = (tmp_path / "a.sqlite").read_bytes() + b"".join(p.read_bytes() for p in tmp_path.glob("a.sqlite-*"))
    assert b"carol-pw" not in raw and token.encode() not in raw
    stored = sqlite3.connect(tmp_path / "a.sqlite").execute("SELECT password FROM account").fetchone()[0]
    assert stored.startswith("$argon2id$")


@pytest.mark.parametrize(("name", "password", "problem"), [
    ("", "pw", "not a valid owner name"),
    ("has space", "pw", "not a valid owner name"),
    ("x" * 129, "pw", "not a valid owner name"),
    ("dave", "", "the password is empty"),
    ("dave", "p" * 1025, "longer than 1024"),
])
def test_bad_names_and_passwords_are_refused_with_one_line(tmp_path, name, password, problem):
    with Accounts(tmp_path / "a.sqlite", CHEAP) as accounts, pytest.raises(AccountError, match=problem) as caught:
        accounts.add(name, password)
    assert "\n" not in str(caught.value)


def test_removing_an_account_removes_its_tokens_and_logins(tmp_path):
    with Accounts(tmp_path / "a.sqlite", CHEAP) as accounts:
        accounts.add("erin", "erin-pw")
        token, login = accounts.new_token("erin"), accounts.open_login("erin", 60)
        accounts.remove("erin")
        assert accounts.owner_for_token(token) is None and accounts.login_owner(login) is None
        with pytest.raises(AccountError, match="no account named 'erin'"):
            accounts.remove("erin")


def test_names_that_differ_in_case_or_width_are_one_account_stored_in_its_canonical_form(tmp_path):
    with Accounts(tmp_path / "a.sqlite", CHEAP) as accounts:
        assert accounts.add("Alice", "alice-pw") == "alice"
        for other in ("alice", "ALICE", "ａｌｉｃｅ"):
            with pytest.raises(AccountError, match="there is already an account named 'alice'"):
                accounts.add(other, "other-pw")
        assert accounts.names() == ["alice"]
        assert accounts.check("ALICE", "alice-pw") and accounts.check("ａｌｉｃｅ", "alice-pw")
        assert accounts.owner_for_token(accounts.new_token("Alice")) == "alice"
        accounts.passwd("ALICE", "new-pw")
        assert accounts.check("alice", "new-pw")
        accounts.remove("ａｌｉｃｅ")
        assert accounts.names() == []


def test_accounts_made_before_names_were_case_folded_are_renamed_once_with_their_tokens(tmp_path):
    """A data directory from before: ``Bob`` becomes ``bob``, his token and login with him;
    ``Carol`` beside an older ``carol`` keeps her name (one cannot take the other's), and
    ``remove Carol`` removes her, not carol."""
    path = tmp_path / "a.sqlite"
    with Accounts(path, CHEAP) as accounts:
        for name in ("bob", "carol", "dora"):
            accounts.add(name, f"{name}-pw")
        token, login = accounts.new_token("bob"), accounts.open_login("bob", 60)
    old = sqlite3.connect(path)  # as the store was: names as given, foreign keys not enforced
    old.execute("UPDATE account SET name = 'Bob' WHERE name = 'bob'")
    old.execute("UPDATE token SET name = 'Bob' WHERE name = 'bob'")
    old.execute("UPDATE login SET name = 'Bob' WHERE name = 'bob'")
    old.execute("UPDATE account SET name = 'Carol' WHERE name = 'dora'")
    old.execute("PRAGMA user_version = 0")
    old.commit()
    old.close()
    with Accounts(path, CHEAP) as accounts:
        assert accounts.names() == ["Carol", "bob", "carol"]
        assert accounts.owner_for_token(token) == "bob" and accounts.login_owner(login) == "bob"
        assert accounts.check("BOB", "bob-pw") and accounts.check("Carol", "dora-pw") is False
        accounts.remove("Carol")
        assert accounts.names() == ["bob", "carol"] and accounts.check("carol", "carol-pw")
    with sqlite3.connect(path) as again:
        assert again.execute("PRAGMA user_version").fetchone()[0] == 1


def test_user_command_adds_lists_changes_password_makes_tokens_and_removes(tmp_path, monkeypatch):
    settings = Settings({"WEBRACE_DATA_DIR": str(tmp_path)})
    assert run_user(settings, "add", "frank", "--admin", "--password-stdin", stdin="frank-pw\n",
                    monkeypatch=monkeypatch)[:2] == (0, "Added admin account frank\n")
    code, out, _ = run_user(settings, "list", monkeypatch=monkeypatch)
    assert code == 0 and re.search(r"^frank\s+admin\s+0\s+\d{4}-", out, re.M)
    code, token, _ = run_user(settings, "token", "frank", monkeypatch=monkeypatch)
    assert code == 0 and token.startswith("wr_")
    assert run_user(settings, "passwd", "frank", "--password-stdin", stdin="new-pw\n", monkeypatch=monkeypatch)[0] == 0
    with open_accounts(settings) as accounts:
        assert accounts.check("frank", "new-pw") and accounts.is_admin("frank")
        assert accounts.owner_for_token(token.strip()) == "frank"
    assert run_user(settings, "remove", "frank", monkeypatch=monkeypatch)[0] == 0
    with open_accounts(settings) as accounts:
        assert accounts.names() == []


@pytest.mark.parametrize(("args", "stdin", "message"), [
    (("remove", "ghost"), "", "error: no account named 'ghost'"),
    (("passwd", "ghost", "--password-stdin"), "pw\n", "error: no account named 'ghost'"),
    (("token", "ghost"), "", "error: no account named 'ghost'"),
    (("add", "bad name", "--password-stdin"), "pw\n", "error: not a valid owner name"),
    (("add", "gina", "--password-stdin"), "\n", "error: the password is empty"),
    (("add", "gina"), "", "error: no terminal to ask the password at: use --password-stdin"),
])
def test_user_command_bad_input_is_one_error_line_and_exit_2(tmp_path, monkeypatch, args, stdin, message):
    code, out, err = run_user(Settings({"WEBRACE_DATA_DIR": str(tmp_path)}), *args, stdin=stdin,
                              monkeypatch=monkeypatch)
    assert code == 2 and err.startswith(message) and err.count("\n") == 1 and out == ""


# -- login, sessions, CSRF, Host ------------------------------------------------------------------

def test_logged_out_pages_redirect_to_login_and_the_api_answers_401_json(web):
    client = Client(web.base)
    for path in ("/", "/owner/alice/", "/owner/alice/profile", f"/stored/{web.acis['old'].id}", "/owners/"):
        answer = client.get(path)
        assert answer.status == 302 and answer.location.startswith("/login?next="), path
    login = client.get("/login")
    form = etree.HTML(login.text).xpath("//form[@id='login-form']")[0]
    assert form.xpath(".//input[@name='username']") and form.xpath(".//input[@name='password']")
    assert form.xpath(".//button[@type='submit']")
    api = client.get("/api/v1/me")
    assert api.status == 401 and api.headers["Content-Type"] == "application/json" and "error" in api.json()
    assert api.headers["WWW-Authenticate"].startswith("Bearer")


def test_a_wrong_password_and_an_unknown_name_get_the_same_answer(web):
    wrong = Client(web.base).login("alice", "not-her-password")
    unknown = Client(web.base).login("nobody", "alice-secret")
    assert wrong.status == unknown.status == 401
    assert "Wrong name or password." in wrong.text and "Wrong name or password." in unknown.text
    assert "login" not in Client(web.base).cookies


def test_failed_logins_past_the_limit_are_refused_with_429_even_with_the_right_password(tmp_path):
    """WEBRACE_WEB_LOGIN_LIMIT failures for one name from one address: the next attempt, even
    with the right password, answers 429 with Retry-After; another name is not held back."""
    settings = Settings({"WEBRACE_DATA_DIR": str(tmp_path), "WEBRACE_WEB_LOGIN_LIMIT": "3/hour"})
    with open_accounts(settings) as accounts:
        accounts.add("kim", "kim-pw")
        accounts.add("lee", "lee-pw")
    server = start(settings)
    try:
        assert [Client(server.base_url).login("kim", "guess").status for _ in range(3)] == [401] * 3
        held = Client(server.base_url).login("kim", "kim-pw")
        assert held.status == 429 and int(held.headers["Retry-After"]) > 0 and "Too many failed logins" in held.text
        assert Client(server.base_url).login("lee", "lee-pw").status == 302
    finally:
        server.stop()


def test_a_bad_login_limit_setting_is_one_clear_error():
    with pytest.raises(ValueError, match="WEBRACE_WEB_LOGIN_LIMIT must be a rate"):
        WebConfig.from_settings(Settings({"WEBRACE_WEB_LOGIN_LIMIT": "lots", "WEBRACE_WEB_SECRET_KEY": "k"}))


def test_login_sets_an_httponly_samesite_session_and_lands_on_the_owners_page(web):
    """Over plain http on loopback the cookie is not ``Secure`` (a script's cookie jar would not
    send it back); over https it is: tests/test_web_sessions.py."""
    client = Client(web.base)
    answer = client.login("alice", PASSWORDS["alice"])
    assert answer.status == 302 and answer.location == "/"
    cookie = next(c for c in answer.cookies if c.startswith("webrace_session="))
    attributes = {p.strip() for p in cookie.split(";")}
    assert {"HttpOnly", "SameSite=Lax"} <= attributes and "Secure" not in attributes
    home = client.get("/")
    assert home.status == 302 and home.location == "/owner/alice/"
    assert client.get("/owner/alice/").status == 200


def test_login_returns_to_the_page_asked_for_but_never_to_another_site(web):
    client = Client(web.base)
    token = client.token("/login")
    answer = client.post("/login", {"csrf_token": token, "username": "alice", "password": PASSWORDS["alice"],
                                    "next": "/owner/alice/profile"})
    assert answer.location == "/owner/alice/profile"
    other = Client(web.base)
    token = other.token("/login")
    answer = other.post("/login", {"csrf_token": token, "username": "alice", "password": PASSWORDS["alice"],
                                   "next": "//evil.example/"})
    assert answer.location == "/"


def test_a_post_without_the_csrf_token_is_refused(web):
    client = logged_in(web, "alice")
    answer = client.post("/owner/alice/urds", {"urd_xml": "<urd/>"})
    assert answer.status == 400 and "CSRF" in answer.text
    assert Client(web.base).post("/login", {"username": "alice", "password": PASSWORDS["alice"]}).status == 400


def test_logging_out_ends_the_login_on_the_server_too(web):
    client = Client(web.base)
    assert client.login("alice", PASSWORDS["alice"]).status == 302
    copied = dict(client.cookies)
    assert client.submit("/owner/alice/", "/logout", {}).status == 302
    assert client.get("/owner/alice/").status == 302
    thief = Client(web.base)
    thief.cookies = copied  # the cookie as it was before logging out
    assert thief.get("/owner/alice/").location.startswith("/login")


def test_a_new_password_ends_every_login_of_the_account(web, tmp_path):
    with open_accounts(web.settings) as accounts:
        accounts.add("hank", "hank-pw")
    client = Client(web.base)
    assert client.login("hank", "hank-pw").status == 302
    with open_accounts(web.settings) as accounts:
        accounts.passwd("hank", "hank-new")
    assert client.get("/owner/hank/").location.startswith("/login")


@pytest.mark.parametrize("path", ["/login", "/owner/alice/", "/api/v1/me"])
def test_a_host_header_not_allowed_answers_400(web, path):
    """DNS rebinding: a page on evil.example resolved to 127.0.0.1 sends Host: evil.example."""
    client = logged_in(web, "alice")
    answer = client.get(path, host="evil.example")
    assert answer.status == 400 and "not trusted" in answer.text
    assert client.get(path, host=f"localhost:{client.port}").status in (200, 302)


# -- an owner's pages ----------------------------------------------------------------------------------

def test_the_owners_page_lists_their_acis_newest_first_and_their_notifications(web):
    page = logged_in(web, "alice").get("/owner/alice/")
    tree = etree.HTML(page.text)
    acis = tree.xpath("//*[contains(@class, 'aci')]")
    assert [a.xpath("string(.//a[@class='live'])") for a in acis] == ["Fresh news", "Jobs", "Old news"]
    assert {a.xpath("string(.//a[@class='stored']/@href)") for a in acis} == {
        f"/stored/{web.acis[k].id}" for k in ("old", "script", "fresh")}
    notes = tree.xpath("//*[contains(@class, 'notification')]//a/@href")
    assert notes == [f"/owner/alice/notifications/{web.notes['alice']['id']}"]
    assert "Bob's page" not in page.text


def test_another_owners_pages_answer_403(web):
    """(Another owner's stored version answers 404, as a missing one: tests/test_web_sessions.py.)"""
    client = logged_in(web, "alice")
    bob_note = web.notes["bob"]["id"]
    for path in ("/owner/bob/", "/owner/bob/profile", f"/owner/bob/notifications/{bob_note}",
                 "/owner/bob/feed.atom", "/owners/"):
        assert client.get(path).status == 403, path
    assert client.get(f"/owner/alice/notifications/{bob_note}").status == 404  # not hers under her name either
    assert client.submit("/owner/alice/profile", "/owner/bob/urds", {"urd_xml": "<urd/>"}).status == 403


def _main(answer, *ids: str) -> tuple[int, str]:
    """(status, the page's main text with ``ids`` written ID): what tells one answer from another."""
    text = etree.HTML(answer.text).xpath("string(//main)") if answer.text.lstrip().startswith("<") else answer.text
    for an_id in ids:
        text = text.replace(an_id, "ID")
    return answer.status, text


def test_another_owners_stored_version_answers_exactly_as_one_that_does_not_exist(web):
    """ACI ids are computable (owner, URL, version): a 403 would tell alice that bob's keywords
    matched that page."""
    client = logged_in(web, "alice")
    theirs, missing = web.acis["bob"].id, "f" * len(web.acis["bob"].id)
    assert _main(client.get(f"/stored/{theirs}"), theirs) == _main(client.get(f"/stored/{missing}"), missing)
    assert client.get(f"/stored/{theirs}").status == 404
    note = web.notes["bob"]["id"]
    for template in ("/owner/alice/notifications/{}", "/owner/bob/notifications/{}",
                     "/api/v1/owners/bob/notifications/{}", "/api/v1/owners/alice/notifications/{}"):
        assert _main(client.get(template.format(note)), note) == _main(client.get(template.format("nope")), "nope"), \
            template
    assert logged_in(web, "root").get(f"/stored/{theirs}").status == 200  # the admin sees it


def test_the_admin_lists_every_owner_and_opens_their_pages(web):
    client = logged_in(web, "root")
    owners = etree.HTML(client.get("/owners/").text).xpath("//tr[@class='owner']/td[1]/a/text()")
    assert {"alice", "bob", "root"} <= set(owners)
    assert "Bob&#39;s page" in client.get("/owner/bob/").text or "Bob's page" in client.get("/owner/bob/").text
    assert client.get(f"/stored/{web.acis['bob'].id}").status == 200


def test_a_stored_version_is_served_sandboxed_with_its_base_and_no_script_can_run(web):
    answer = logged_in(web, "alice").get(f"/stored/{web.acis['script'].id}")
    assert answer.status == 200 and answer.headers["Content-Type"].startswith("text/html")
    csp = answer.headers["Content-Security-Policy"]
    assert csp.startswith("sandbox;") and "script-src 'none'" in csp and "default-src 'none'" in csp
    assert '<base href="http://a.test/jobs">' in answer.text
    assert answer.headers["X-Content-Type-Options"] == "nosniff"


def test_a_stored_version_gc_removed_answers_410(web):
    aci = _store_aci(web.settings, "alice", "http://a.test/gone", _page("Gone", "gone"), 500_000, "Gone")
    with open_object_cache(web.settings) as cache:
        cache.objects.delete(aci.docbase)
    answer = logged_in(web, "alice").get(f"/stored/{aci.id}")
    assert answer.status == 410 and "no longer stored" in answer.text


def test_a_notifications_page_shows_the_change_highlighted_in_its_region(web):
    note = web.notes["alice"]
    page = logged_in(web, "alice").get(f"/owner/alice/notifications/{note['id']}")
    assert page.status == 200
    diff = etree.HTML(page.text).xpath("//div[@class='diff']")[0]
    assert diff.xpath("string(.//del)") == "Monday" and diff.xpath("string(.//ins)") == "Friday at noon"


def test_the_atom_feed_needs_the_login_and_lists_the_owners_acis(web):
    assert Client(web.base).get("/owner/alice/feed.atom").status == 302
    feed = logged_in(web, "alice").get("/owner/alice/feed.atom")
    entries = etree.fromstring(feed.text.encode()).findall("{http://www.w3.org/2005/Atom}entry")
    assert len(entries) >= 3 and feed.headers["Content-Type"].startswith("application/atom+xml")


def test_the_atom_feed_is_read_with_an_api_bearer_token_and_a_bad_one_answers_401(web):
    """A feed reader or a script: `scrapy user token NAME` works on the feed as on the API."""
    with open_accounts(web.settings) as accounts:
        token = accounts.new_token("alice")
    feed = Client(web.base).get("/owner/alice/feed.atom", headers={"Authorization": f"Bearer {token}"})
    assert feed.status == 200 and feed.headers["Content-Type"].startswith("application/atom+xml")
    assert len(etree.fromstring(feed.text.encode()).findall(f"{ATOM}entry")) >= 3
    assert Client(web.base).get("/owner/bob/feed.atom", headers={"Authorization": f"Bearer {token}"}).status == 403
    bad = Client(web.base).get("/owner/alice/feed.atom", headers={"Authorization": "Bearer wr_not-a-token"})
    assert bad.status == 401 and bad.headers["WWW-Authenticate"].startswith("Bearer")
    # the bearer token is read on the API and the feed only: a page still wants the login
    assert Client(web.base).get("/owner/alice/", headers={"Authorization": f"Bearer {token}"}).status == 302


def _new_feed_url(client: Client, owner: str) -> str:
    made = client.submit(f"/owner/{owner}/profile", f"/owner/{owner}/feed-url", {})
    assert made.status == 200, made.text
    return etree.HTML(made.text).xpath("string(//code[@id='feed-url-value'])")


def test_a_secret_feed_url_made_in_the_profile_reads_only_that_feed_until_replaced_or_revoked(web):
    client = logged_in(web, "alice")
    url = _new_feed_url(client, "alice")
    assert url.startswith(f"{web.base}/feed/wrf_") and url.endswith(".atom")
    path = url.removeprefix(web.base)
    reader = Client(web.base)  # a feed reader: no login, no cookie
    feed = reader.get(path)
    assert feed.status == 200 and feed.headers["Content-Type"].startswith("application/atom+xml")
    titles = [e.findtext(f"{ATOM}title") for e in etree.fromstring(feed.text.encode()).findall(f"{ATOM}entry")]
    assert {"Fresh news", "Jobs", "Old news"} <= set(titles) and "Bob's page" not in titles
    token = path.removeprefix("/feed/").removesuffix(".atom")
    as_bearer = {"Authorization": f"Bearer {token}"}  # read-only, that feed only: no API, no page
    assert reader.get("/api/v1/me", headers=as_bearer).status == 401
    assert reader.get("/api/v1/owners/alice/acis", headers=as_bearer).status == 401
    assert reader.get("/owner/alice/feed.atom", headers=as_bearer).status == 401
    assert reader.get("/owner/alice/profile", headers=as_bearer).status == 302
    assert reader.post(path, {}).status in (400, 405)  # nothing to change there
    stored = b"".join(p.read_bytes() for p in web.data.glob("accounts.sqlite*"))
    assert token.encode() not in stored  # only its hash is kept
    assert etree.HTML(client.get("/owner/alice/profile").text).xpath("//*[@id='feed-url-made']")
    newer = _new_feed_url(client, "alice").removeprefix(web.base)
    assert reader.get(path).status == 404 and reader.get(newer).status == 200  # the new one replaces it
    assert client.submit("/owner/alice/profile", "/owner/alice/feed-url/remove", {}).status == 302
    assert reader.get(newer).status == 404
    assert etree.HTML(client.get("/owner/alice/profile").text).xpath("//*[@id='no-feed-url']")


def test_another_owner_can_neither_make_nor_revoke_an_owners_feed_url(web):
    bob = logged_in(web, "bob")
    assert bob.submit("/owner/bob/profile", "/owner/alice/feed-url", {}).status == 403
    assert bob.submit("/owner/bob/profile", "/owner/alice/feed-url/remove", {}).status == 403
    assert Client(web.base).get("/feed/wrf_made-up.atom").status == 404


def test_pages_carry_a_strict_csp_and_are_not_cached(web):
    answer = logged_in(web, "alice").get("/owner/alice/")
    assert "default-src 'none'" in answer.headers["Content-Security-Policy"]
    assert answer.headers["Cache-Control"] == "no-store" and answer.headers["X-Frame-Options"] == "DENY"


def test_acis_are_paged_newest_first(tmp_path):
    settings = Settings({"WEBRACE_DATA_DIR": str(tmp_path)})
    for n in range(5):
        _store_aci(settings, "ivy", f"http://i.test/{n}", _page(f"P{n}", "x"), 1000 * (n + 1), f"P{n}")
    pages = [owners.acis(settings, "ivy", n, 2) for n in (1, 2, 3)]
    assert [[a.title for a in p.items] for p in pages] == [["P4", "P3"], ["P2", "P1"], ["P0"]]
    assert [p.more for p in pages] == [True, True, False]


# -- the profile: URDs and sentinels ------------------------------------------------------------------

def _urd(urd_id: str, owner: str, url: str = "http://a.test/", extra: str = "") -> str:
    return (f'<urd id="{urd_id}" owner="{owner}">\n  <uri timing="3600000">{url}</uri>\n'
            f'  <depth level="1"/>{extra}\n</urd>')


def _urd_ids(client: Client, owner: str) -> list[str]:
    page = client.get(f"/owner/{owner}/profile").text
    return etree.HTML(page).xpath("//li[@class='urd']//*[@class='urd-id']/text()")


def test_a_urd_added_through_the_profile_is_listed_edited_and_removed(web):
    client = logged_in(web, "alice")
    added = client.submit("/owner/alice/profile", "/owner/alice/urds", {"urd_xml": _urd("a-news", "alice")})
    assert added.status == 302
    assert "a-news" in _urd_ids(client, "alice")
    edit = client.get("/owner/alice/urds/a-news/edit")
    assert "http://a.test/" in edit.text
    saved = client.submit("/owner/alice/urds/a-news/edit", "/owner/alice/urds/a-news/edit",
                          {"urd_xml": _urd("a-news", "alice", "http://a.test/changed")})
    assert saved.status == 302
    with open_urd_store(web.settings) as store:
        assert store.get("a-news").url == "http://a.test/changed"
    removed = client.submit("/owner/alice/profile", "/owner/alice/urds/a-news/remove", {})
    assert removed.status == 302 and "a-news" not in _urd_ids(client, "alice")


def test_a_login_in_another_case_and_a_urd_or_sentinel_naming_the_owner_so_are_the_owners(web):
    client = Client(web.base)
    assert client.login("ALICE", PASSWORDS["alice"]).status == 302
    assert client.get("/").location == "/owner/alice/"
    assert client.get("/owner/Alice/").status == 200 and client.get("/api/v1/me").json()["name"] == "alice"
    added = client.submit("/owner/alice/profile", "/owner/alice/urds", {"urd_xml": _urd("a-cased", "Alice")})
    assert added.status == 302, added.text
    with open_urd_store(web.settings) as store:
        assert store.get("a-cased").owner == "alice"
    assert "a-cased" in _urd_ids(client, "alice")
    assert client.submit("/owner/alice/profile", "/owner/alice/urds/a-cased/remove", {}).status == 302
    assert make("ALICE", NEWS, "content").owner == "alice" == make("ａｌｉｃｅ", NEWS, "content").owner


def test_a_bad_urd_is_refused_with_its_line_and_nothing_is_stored(web):
    client = logged_in(web, "alice")
    xml = "<urds>\n" + _urd("a-good", "alice") + "\n" + _urd("a-bad", "alice", "gopher://x/") + "\n</urds>"
    answer = client.submit("/owner/alice/profile", "/owner/alice/urds", {"urd_xml": xml})
    assert answer.status == 400
    errors = etree.HTML(answer.text).xpath("string(//*[@class='error'])")
    assert "line 7:" in errors and "gopher://x/" in errors
    assert xml.replace("<", "&lt;").replace(">", "&gt;") in answer.text.replace("&#34;", '"')  # the paste is kept
    assert not {"a-good", "a-bad"} & set(_urd_ids(client, "alice"))


@pytest.mark.parametrize(("xml", "problem"), [
    ("<urd id='x'", "not well-formed XML"),
    ("  ", "nothing to add: paste one &lt;urd&gt; or a &lt;urds&gt; list"),
    ('<urd id="b-urd" owner="bob"><uri timing="1000">http://b.test/</uri><depth level="0"/></urd>',
     "names owner &#39;bob&#39;"),
])
def test_a_urd_not_well_formed_empty_or_for_another_owner_is_refused(web, xml, problem):
    answer = logged_in(web, "alice").submit("/owner/alice/profile", "/owner/alice/urds", {"urd_xml": xml})
    assert answer.status == 400 and problem in answer.text


def test_an_id_another_owner_uses_cannot_be_taken(web):
    bob = logged_in(web, "bob")
    assert bob.submit("/owner/bob/profile", "/owner/bob/urds", {"urd_xml": _urd("shared-id", "bob")}).status == 302
    alice = logged_in(web, "alice")
    answer = alice.submit("/owner/alice/profile", "/owner/alice/urds", {"urd_xml": _urd("shared-id", "alice")})
    assert answer.status == 400 and "is taken" in answer.text and "bob" not in answer.text.split("<main>")[1]
    with open_urd_store(web.settings) as store:
        assert store.get("shared-id").owner == "bob"


def test_a_request_body_over_the_limit_answers_413_and_stores_nothing(web):
    client = logged_in(web, "alice")
    answer = client.submit("/owner/alice/profile", "/owner/alice/urds",
                           {"urd_xml": _urd("a-huge", "alice", extra="<!--" + "x" * 70_000 + "-->")})
    assert answer.status == 413
    assert "a-huge" not in _urd_ids(client, "alice")


def test_a_sentinel_added_through_the_profile_is_listed_edited_and_removed(web):
    client = logged_in(web, "alice")
    form = {"url": "http://watch.test/", "type": "links", "where": "css:#news", "every": "1h", "on": "any"}
    assert client.submit("/owner/alice/profile", "/owner/alice/sentinels", form).status == 302
    with open_sentinel_store(web.settings) as store:
        added = [s for s, _, _ in store.all("alice") if s.url == "http://watch.test/"]
    assert len(added) == 1 and added[0].type == "links" and added[0].every == 3_600_000
    page = etree.HTML(client.get("/owner/alice/profile").text)
    assert page.xpath(f"//li[@class='sentinel' and @id='sentinel-{added[0].id}']")
    edited = client.submit(f"/owner/alice/sentinels/{added[0].id}/edit", f"/owner/alice/sentinels/{added[0].id}/edit",
                           {**form, "type": "content"})
    assert edited.status == 302
    with open_sentinel_store(web.settings) as store:
        now = [s for s, _, _ in store.all("alice") if s.url == "http://watch.test/"]
    assert [s.type for s in now] == ["content"]
    assert client.submit("/owner/alice/profile", f"/owner/alice/sentinels/{now[0].id}/remove", {}).status == 302
    with open_sentinel_store(web.settings) as store:
        assert not [s for s, _, _ in store.all("alice") if s.url == "http://watch.test/"]


@pytest.mark.parametrize(("form", "problem"), [
    ({"url": "gopher://x/", "type": "any"}, "url: not a URL WebRACE can fetch"),
    ({"url": "http://w.test/", "type": "nonsense"}, "unknown sentinel type"),
    ({"url": "http://w.test/", "type": "keyword"}, "a keyword sentinel needs --pattern"),
    ({"url": "http://w.test/", "type": "any", "where": "css:[[["}, "not a CSS selector"),
    ({"url": "http://w.test/", "type": "any", "every": "soon"}, "not a duration"),
])
def test_a_bad_sentinel_is_refused_with_the_reason_and_nothing_is_added(web, form, problem):
    client = logged_in(web, "alice")
    answer = client.submit("/owner/alice/profile", "/owner/alice/sentinels", form)
    assert answer.status == 400
    assert problem in etree.HTML(answer.text).xpath("string(//*[@class='error'])")
    with open_sentinel_store(web.settings) as store:
        assert not [s for s, _, _ in store.all("alice") if s.url == "http://w.test/"]


def test_another_owners_urd_or_sentinel_cannot_be_removed(web):
    with open_sentinel_store(web.settings) as store:
        bob_sentinel = next(s.id for s, _, _ in store.all("bob"))
    bob = logged_in(web, "bob")
    bob.submit("/owner/bob/profile", "/owner/bob/urds", {"urd_xml": _urd("bob-keep", "bob")})
    alice = logged_in(web, "alice")
    assert alice.submit("/owner/alice/profile", "/owner/alice/urds/bob-keep/remove", {}).status == 404
    assert alice.submit("/owner/alice/profile", f"/owner/alice/sentinels/{bob_sentinel}/remove", {}).status == 404
    with open_urd_store(web.settings) as store:
        assert store.get("bob-keep") is not None


# -- the JSON API ----------------------------------------------------------------------------------

def test_the_api_with_a_bearer_token_has_the_owners_rights(web):
    with open_accounts(web.settings) as accounts:
        token = accounts.new_token("alice")
    client = Client(web.base)
    auth = {"Authorization": f"Bearer {token}"}
    assert client.get("/api/v1/me", headers=auth).json() == {"name": "alice", "admin": False}
    acis = client.get("/api/v1/owners/alice/acis", headers=auth).json()
    assert [a["title"] for a in acis["acis"]][:3] == ["Fresh news", "Jobs", "Old news"]
    note = client.get(f"/api/v1/owners/alice/notifications/{web.notes['alice']['id']}", headers=auth).json()
    assert ["+", "Friday at noon"] in note["diff"] and "<ins>Friday at noon</ins>" in note["diff_html"]
    assert client.get("/api/v1/owners/bob/acis", headers=auth).status == 403
    assert client.get("/api/v1/owners", headers=auth).status == 403
    bad = client.get("/api/v1/me", headers={"Authorization": "Bearer wr_forged"})
    assert bad.status == 401 and bad.json()["error"] == "the bearer token is not valid"


def test_the_api_adds_and_removes_urds_and_sentinels_and_refuses_bad_ones_with_their_line(web):
    with open_accounts(web.settings) as accounts:
        token = accounts.new_token("alice")
    client = Client(web.base)
    auth = {"Authorization": f"Bearer {token}"}
    added = client.request("POST", "/api/v1/owners/alice/urds", body=_urd("api-urd", "alice").encode(),
                           headers={**auth, "Content-Type": "application/xml"})
    assert added.status == 201 and added.json() == {"added": ["api-urd"]}
    assert "api-urd" in [u["id"] for u in client.get("/api/v1/owners/alice/urds", headers=auth).json()["urds"]]
    bad = client.request("POST", "/api/v1/owners/alice/urds", body=_urd("api-bad", "alice", "ftp://x/").encode(),
                         headers=auth)
    assert bad.status == 400 and bad.json()["problems"][0].startswith("line 2:")
    assert client.request("DELETE", "/api/v1/owners/alice/urds/api-urd", headers=auth).status == 200
    json_auth = {**auth, "Content-Type": "application/json"}
    sentinel = client.request("POST", "/api/v1/owners/alice/sentinels", headers=json_auth,
                              body=b'{"url": "http://api.test/", "type": "content", "ignore": ["\\\\d+"]}')
    assert sentinel.status == 201
    listed = client.get("/api/v1/owners/alice/sentinels", headers=auth).json()["sentinels"]
    assert [s["ignore"] for s in listed if s["url"] == "http://api.test/"] == [["\\d+"]]
    assert client.request("DELETE", f"/api/v1/owners/alice/sentinels/{sentinel.json()['added']}",
                          headers=auth).status == 200


def test_the_api_by_session_needs_the_csrf_header_to_change_anything(web):
    client = logged_in(web, "alice")
    assert client.get("/api/v1/me").json()["name"] == "alice"
    body = _urd("api-session", "alice").encode()
    assert client.request("POST", "/api/v1/owners/alice/urds", body=body).status == 400
    token = client.token("/owner/alice/profile")
    assert client.request("POST", "/api/v1/owners/alice/urds", body=body, headers={"X-CSRFToken": token}).status == 201


def test_the_admin_api_lists_every_owner(web):
    with open_accounts(web.settings) as accounts:
        token = accounts.new_token("root")
    owners = Client(web.base).get("/api/v1/owners", headers={"Authorization": f"Bearer {token}"}).json()["owners"]
    assert {"alice", "bob", "root"} <= {o["name"] for o in owners}


# -- the server -----------------------------------------------------------------------------------

def test_many_half_open_connections_hold_no_thread_and_the_app_still_answers(web):
    """60 connections that sent half a request line, against 4 request threads."""
    sockets = []
    try:
        for _ in range(60):
            s = socket.create_connection((Client(web.base).host, Client(web.base).port), timeout=10)
            s.sendall(b"GET /login HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # and never the blank line
            sockets.append(s)
        assert Client(web.base).get("/login").status == 200
    finally:
        for s in sockets:
            s.close()


def test_the_server_binds_127_0_0_1_by_default(web):
    assert web.base.startswith("http://127.0.0.1:")


def test_an_owner_adds_and_removes_a_delivery_channel_shown_without_its_password(web):
    pytest.importorskip("webrace.delivery.channels")
    client = logged_in(web, "alice")
    url = "json://hook:s3cret@93.184.215.14/alice"  # a public address (nothing is sent here)
    added = client.submit("/owner/alice/profile", "/owner/alice/channels",
                          {"channel_url": url, "events": "notification"})
    assert added.status == 302
    page = client.get("/owner/alice/profile").text
    channels = etree.HTML(page).xpath("//li[@class='channel']")
    assert len(channels) == 1 and "s3cret" not in page and "notification" in channels[0].xpath("string(.)")
    assert client.get("/owner/bob/profile", host=None).status == 403
    for bad_url, says in (("nope://x", "unknown scheme"), ("json://127.0.0.1:6379/", "not a public address"),
                          ("json://93.184.215.14/x?method=DELETE", "may not set the request's method=DELETE"),
                          ("ntfy://ntfy.sh/alice", "scheme ntfy:// is not allowed here")):
        bad = client.submit("/owner/alice/profile", "/owner/alice/channels", {"channel_url": bad_url, "events": "aci"})
        assert bad.status == 400 and says in etree.HTML(bad.text).xpath("string(//*[@id='channel-errors'])")
    channel_id = channels[0].get("id").removeprefix("channel-")
    with open_delivery_store(web.settings) as store:  # its sends failed: the owner sees no remote detail
        for _ in range(3):
            store.failed(channel_id, 1_000, "A Connection error occurred: [Errno 111] Connection refused", 2_000)
    shown = etree.HTML(client.get("/owner/alice/profile").text).xpath("string(//li[@class='channel'])")
    assert "3 failures in a row" in shown and "Connection" not in shown and "refused" not in shown
    assert client.submit("/owner/alice/profile", f"/owner/alice/channels/{channel_id}/remove", {}).status == 302
    assert not etree.HTML(client.get("/owner/alice/profile").text).xpath("//li[@class='channel']")


def test_in_the_distributed_mode_the_pages_read_the_redis_stores(tmp_path, redis_url, redis_prefix):
    settings = Settings({"WEBRACE_DATA_DIR": str(tmp_path), "REDIS_URL": redis_url,
                         "WEBRACE_REDIS_PREFIX": redis_prefix})
    with open_accounts(settings) as accounts:
        accounts.add("judy", "judy-pw")
    aci = _store_aci(settings, "judy", "http://j.test/", _page("Shared", "in redis"), 1000, "Shared page")
    server = start(settings)
    try:
        client = Client(server.base_url)
        assert client.login("judy", "judy-pw").status == 302
        assert "Shared page" in client.get("/owner/judy/").text
        stored = client.get(f"/stored/{aci.id}")
        assert stored.status == 200 and "in redis" in stored.text
    finally:
        server.stop()


def test_an_unreachable_redis_answers_503_saying_so_without_the_password(tmp_path):
    settings = Settings({"WEBRACE_DATA_DIR": str(tmp_path), "REDIS_URL": "redis://u:s3cret@127.0.0.1:1/0"})
    with open_accounts(settings) as accounts:
        accounts.add("kim", "kim-pw")
    server = start(settings)
    try:
        client = Client(server.base_url)
        assert client.login("kim", "kim-pw").status == 302
        answer = client.get("/owner/kim/")
        assert answer.status == 503 and "unreachable" in answer.text and "s3cret" not in answer.text
        api = client.get("/api/v1/owners/kim/acis")
        assert api.status == 503 and "unreachable" in api.json()["error"]
    finally:
        server.stop()


@pytest.mark.parametrize("target", ["/\t/evil.example", "/\n/evil.example", "/\r\nSet-Cookie: x=1", "/\\evil.example",
                                    "/ /evil.example", "/\x7f/x", "//evil.example", "http://evil.example/"])
def test_a_next_with_a_control_character_a_space_or_a_backslash_is_no_local_path(target):
    from webrace.web.auth import local_path

    assert local_path(target) is None
    assert local_path("/owner/alice/profile?page=2") == "/owner/alice/profile?page=2"


def test_login_with_a_next_a_browser_would_read_as_another_site_lands_home_and_never_500s(web):
    for target in ("/\t/evil.example", "/%0a/x\n"):
        client = Client(web.base)
        token = client.token("/login")
        answer = client.post("/login", {"csrf_token": token, "username": "alice", "password": PASSWORDS["alice"],
                                        "next": target})
        assert answer.status == 302 and answer.location == "/", target
