"""Sessions of the web app over each transport, and the login limit, against the real waitress
server on 127.0.0.1 (tests/test_web_proxy.py puts a real nginx with TLS in front, and reaches
it on a non-loopback address).

The session cookie is ``Secure`` when the request came over https (behind
``WEBRACE_WEB_TRUSTED_PROXY``, which says so in ``X-Forwarded-Proto``) and not over plain
http, which is answered from loopback and from the networks ``WEBRACE_WEB_PLAIN_HTTP`` lists;
from anywhere else, 403 saying so. A client address other than 127.0.0.1 is given here the
way a trusted proxy gives it: ``X-Forwarded-For`` from the proxy's own address.

The login limit counts attempts before the password is checked, in the account store every
server process of the data directory shares."""

from __future__ import annotations

import re
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import requests
from argon2 import PasswordHasher
from conftest import Project
from scrapy.settings import Settings
from web_client import CSRF, Client

from webrace.backends import data_dir
from webrace.web.accounts import Accounts
from webrace.web.config import PlainHttp, WebConfig, plain_http
from webrace.web.server import start

CHEAP = PasswordHasher(time_cost=1, memory_cost=1024, parallelism=1)
OUTSIDE = "8.8.8.8"  # a public address, as a proxy reports a client's (no traffic goes there)
PRIVATE = "192.168.1.20"


def _settings(data, **extra) -> Settings:
    return Settings({"WEBRACE_DATA_DIR": str(data), **extra})


@contextmanager
def serving(settings: Settings) -> Iterator[str]:
    server = start(settings)
    try:
        yield server.base_url
    finally:
        server.stop()


def _accounts(settings: Settings, **passwords: str) -> None:
    with Accounts(data_dir(settings) / "accounts.sqlite", CHEAP) as accounts:
        for name, password in passwords.items():
            accounts.add(name, password)


def _via(client_address: str, scheme: str) -> dict[str, str]:
    """The headers a trusted proxy (nginx: tests/test_web_proxy.py) adds."""
    return {"X-Forwarded-For": client_address, "X-Forwarded-Proto": scheme}


def _login(client: Client, name: str, password: str, headers: dict[str, str] | None = None):
    page = client.get("/login", headers=headers)
    assert page.status == 200, page.text
    token = CSRF.search(page.text).group(1)
    return client.post("/login", {"csrf_token": token, "username": name, "password": password}, headers=headers)


def _attributes(answer) -> set[str]:
    cookie = next(c for c in answer.cookies if c.startswith("webrace_session="))
    return {part.strip() for part in cookie.split(";")}


# -- the transport: Secure over https, plain http from loopback and allowed networks -----------

def test_the_session_cookie_is_secure_over_https_through_the_trusted_proxy_and_not_over_plain_http(tmp_path):
    settings = _settings(tmp_path, WEBRACE_WEB_TRUSTED_PROXY="127.0.0.1")
    _accounts(settings, alice="alice-pw")
    with serving(settings) as base:
        https = Client(base)
        # over https Flask-WTF also wants a Referer of this origin (browsers send one: Referrer-Policy same-origin)
        answer = _login(https, "alice", "alice-pw", {**_via(OUTSIDE, "https"), "Referer": f"https://{base[7:]}/login"})
        assert answer.status == 302 and {"Secure", "HttpOnly", "SameSite=Lax"} <= _attributes(answer)
        assert https.get("/owner/alice/", headers=_via(OUTSIDE, "https")).status == 200
        plain = Client(base)  # from 127.0.0.1 itself, no proxy in between
        answer = _login(plain, "alice", "alice-pw")
        assert answer.status == 302 and "Secure" not in _attributes(answer)


def test_x_forwarded_proto_from_a_client_that_is_not_the_trusted_proxy_is_ignored(tmp_path):
    settings = _settings(tmp_path)  # no trusted proxy: 127.0.0.1 is a client like any other
    _accounts(settings, alice="alice-pw")
    with serving(settings) as base:
        answer = _login(Client(base), "alice", "alice-pw", _via(OUTSIDE, "https"))
        assert answer.status == 302 and "Secure" not in _attributes(answer)  # plain http from loopback, as it is


def test_a_script_logs_in_over_plain_http_on_loopback_with_a_requests_session(tmp_path):
    """Python's cookie jar sends a ``Secure`` cookie over https only: the app must not set one
    over plain http, or the CSRF token the session carries goes missing."""
    settings = _settings(tmp_path)
    _accounts(settings, alice="alice-pw")
    with serving(settings) as base, requests.Session() as browser:
        browser.trust_env = False  # no proxy from the environment between us and 127.0.0.1
        token = CSRF.search(browser.get(f"{base}/login", timeout=20).text).group(1)
        answer = browser.post(f"{base}/login", data={"csrf_token": token, "username": "alice",
                                                     "password": "alice-pw"}, timeout=20)
        assert answer.status_code == 200 and answer.url == f"{base}/owner/alice/", answer.text[:300]
        assert browser.get(f"{base}/api/v1/me", timeout=20).json() == {"name": "alice", "admin": False}


def test_plain_http_from_an_address_not_allowed_answers_403_saying_so_and_sets_no_cookie(tmp_path):
    settings = _settings(tmp_path, WEBRACE_WEB_TRUSTED_PROXY="127.0.0.1")
    _accounts(settings, alice="alice-pw")
    with serving(settings) as base:
        client = Client(base)
        for method, path in (("GET", "/login"), ("POST", "/login"), ("GET", "/owner/alice/"), ("GET", "/api/v1/me")):
            answer = client.request(method, path, headers=_via(OUTSIDE, "http"))
            assert answer.status == 403, (method, path)
            assert "plain http" in answer.text and "https" in answer.text and "WEBRACE_WEB_PLAIN_HTTP" in answer.text
            assert answer.cookies == []


@pytest.mark.parametrize(("setting", "allowed", "refused"), [
    ("private", [PRIVATE, "10.1.2.3", "fd00::5"], [OUTSIDE, "2001:4860::1"]),
    (["10.1.0.0/16"], ["10.1.2.3"], [PRIVATE, OUTSIDE]),
    ("10.1.0.0/16, private", ["10.1.2.3", PRIVATE], [OUTSIDE]),
])
def test_plain_http_from_a_network_the_admin_allows_logs_in_with_a_cookie_not_secure(tmp_path, setting, allowed,
                                                                                    refused):
    settings = _settings(tmp_path, WEBRACE_WEB_TRUSTED_PROXY="127.0.0.1", WEBRACE_WEB_PLAIN_HTTP=setting)
    _accounts(settings, alice="alice-pw")
    with serving(settings) as base:
        for address in allowed:
            client = Client(base)
            answer = _login(client, "alice", "alice-pw", _via(address, "http"))
            assert answer.status == 302 and "Secure" not in _attributes(answer), address
            assert client.get("/owner/alice/", headers=_via(address, "http")).status == 200, address
        for address in refused:
            assert Client(base).get("/login", headers=_via(address, "http")).status == 403, address


@pytest.mark.parametrize(("address", "rule", "allowed"), [
    ("127.0.0.1", PlainHttp(), True),
    ("127.3.4.5", PlainHttp(), True),
    ("::1", PlainHttp(), True),
    ("::ffff:127.0.0.1", PlainHttp(), True),  # IPv4-mapped
    ("192.168.1.20", PlainHttp(), False),
    ("192.168.1.20", PlainHttp(private=True), True),
    ("::ffff:192.168.1.20", PlainHttp(private=True), True),
    ("fe80::1%eth0", PlainHttp(private=True), True),
    ("8.8.8.8", PlainHttp(private=True), False),
    ("8.8.8.8", plain_http(["8.8.8.0/24"]), True),
    (None, PlainHttp(private=True), False),  # a unix socket: nobody knows where from
    ("localhost", PlainHttp(private=True), False),
])
def test_which_client_addresses_plain_http_allows(address, rule, allowed):
    assert rule.allows(address) is allowed


@pytest.mark.parametrize(("settings", "message"), [
    ({"WEBRACE_WEB_PLAIN_HTTP": "everyone"}, "WEBRACE_WEB_PLAIN_HTTP: 'everyone' is neither \"private\" nor a network"),
    ({"WEBRACE_WEB_PLAIN_HTTP": ["10.0.0.0/33"]}, "'10.0.0.0/33' is neither"),
    ({"WEBRACE_WEB_PLAIN_HTTP": 5}, "must be \"private\" or a list of networks"),
    ({"WEBRACE_WEB_SECURE_COOKIES": False}, "WEBRACE_WEB_SECURE_COOKIES is replaced by WEBRACE_WEB_PLAIN_HTTP"),
    ({"WEBRACE_WEB_SECURE_COOKIES": "false"}, "WEBRACE_WEB_SECURE_COOKIES is replaced by WEBRACE_WEB_PLAIN_HTTP"),
])
def test_a_bad_plain_http_setting_or_the_old_secure_cookies_false_is_one_clear_error(settings, message):
    with pytest.raises(ValueError, match=re.escape(message)) as caught:
        WebConfig.from_settings(Settings({**settings, "WEBRACE_WEB_SECRET_KEY": "k" * 32}))
    assert "\n" not in str(caught.value)


# -- the login limit ------------------------------------------------------------------------------------

def _parallel_logins(bases: list[str], tries: int, name: str, password: str) -> Counter:
    """``tries`` logins at once (each client has its CSRF token first), spread over ``bases``:
    how many answers of each (base, status)."""
    clients = [Client(bases[n % len(bases)]) for n in range(tries)]
    for client, base in zip(clients, [bases[n % len(bases)] for n in range(tries)], strict=True):
        client.base = base
    tokens = [client.token("/login") for client in clients]
    barrier, statuses, lock = threading.Barrier(tries), Counter(), threading.Lock()

    def attempt(client: Client, token: str) -> None:
        barrier.wait(timeout=60)
        status = client.post("/login", {"csrf_token": token, "username": name, "password": password}).status
        with lock:
            statuses[client.base, status] += 1

    threads = [threading.Thread(target=attempt, args=pair) for pair in zip(clients, tokens, strict=True)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    return statuses


def test_thirty_parallel_logins_on_two_servers_of_one_data_directory_get_exactly_the_limit_of_password_checks(
        tmp_path, monkeypatch):
    """Two app instances in this process and a `scrapy web serve` process, one data directory,
    a limit of 5: 5 attempts have their password checked (401), the 25 others answer 429
    without (the in-process servers count the checks)."""
    project = Project(tmp_path)
    limit = {"WEBRACE_WEB_LOGIN_LIMIT": "5/hour"}
    settings = _settings(project.data, **limit)
    _accounts(settings, alice="alice-pw")
    checks, lock, check = [0], threading.Lock(), Accounts.check

    def counted(self: Accounts, name: str, password: str) -> bool:
        with lock:
            checks[0] += 1
        return check(self, name, password)

    monkeypatch.setattr(Accounts, "check", counted)
    other = subprocess.Popen([sys.executable, "-m", "scrapy", "web", "serve", "--port", "0",
                              "-s", "WEBRACE_WEB_LOGIN_LIMIT=5/hour"], cwd=project.root, env=project.env,
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        line = other.stdout.readline()
        assert " on http://127.0.0.1:" in line, line
        process_base = line.split(" on ", 1)[1].split("/ ", 1)[0]
        with serving(settings) as first, serving(settings) as second:
            statuses = _parallel_logins([first, second, process_base], 30, "alice", "wrong")
    finally:
        other.terminate()
        other.wait(timeout=30)
    assert Counter(status for _, status in statuses.elements()) == Counter({401: 5, 429: 25})
    # every password the in-process servers checked was a 401: none behind a 429
    assert checks[0] == statuses[first, 401] + statuses[second, 401]


def test_a_right_password_is_not_counted_against_the_limit(tmp_path):
    settings = _settings(tmp_path, WEBRACE_WEB_LOGIN_LIMIT="3/hour")
    _accounts(settings, kim="kim-pw")
    with serving(settings) as base:
        assert [Client(base).login("kim", "kim-pw").status for _ in range(4)] == [302] * 4
        assert [Client(base).login("kim", "guess").status for _ in range(3)] == [401] * 3
        assert Client(base).login("kim", "kim-pw").status == 429


def test_the_login_limit_is_kept_on_the_canonical_name(tmp_path):
    """``kim``, ``KIM`` and fullwidth ``ｋｉｍ`` are one account, so one limit."""
    settings = _settings(tmp_path, WEBRACE_WEB_LOGIN_LIMIT="3/hour")
    _accounts(settings, kim="kim-pw")
    with serving(settings) as base:
        assert [Client(base).login(name, "guess").status for name in ("kim", "KIM", "ｋｉｍ")] == [401] * 3
        held = Client(base).login("Kim", "kim-pw")
        assert held.status == 429 and int(held.headers["Retry-After"]) > 0


def test_the_limit_is_per_client_address(tmp_path):
    settings = _settings(tmp_path, WEBRACE_WEB_LOGIN_LIMIT="2/hour", WEBRACE_WEB_TRUSTED_PROXY="127.0.0.1",
                         WEBRACE_WEB_PLAIN_HTTP="private")
    _accounts(settings, kim="kim-pw")
    with serving(settings) as base:
        here, there = _via("10.0.0.1", "http"), _via("10.0.0.2", "http")
        assert [_login(Client(base), "kim", "guess", here).status for _ in range(2)] == [401, 401]
        assert _login(Client(base), "kim", "kim-pw", here).status == 429
        assert _login(Client(base), "kim", "kim-pw", there).status == 302
