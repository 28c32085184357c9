"""The web app as docs/deploy-nginx.md deploys it, end to end, in real components: Debian's
nginx with a self-signed certificate (made here with ``cryptography``) in front of `scrapy web
serve`, both configured with THE TEXT OF THAT PAGE (its ``nginx`` block and its `scrapy web
serve` line, read from the file: only ports and file paths are put in), and Debian's Chromium
logging in over https to the name of the recipe (mapped to 127.0.0.1 by Chromium's resolver
rules: nothing leaves the machine). Then plain http to a non-loopback address of this
machine's own network namespace (its eth0), allowed by ``WEBRACE_WEB_PLAIN_HTTP``, in
Chromium and with a Python ``requests`` session; refused (403) when not allowed.

Skipped, saying why, without nginx, without the browser, or (the second part) when the
namespace has no address but loopback."""

from __future__ import annotations

import datetime
import ipaddress
import json
import re
import shlex
import socket
import ssl
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import requests
from conftest import Project
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from playwright.sync_api import Browser, sync_playwright
from scrapy.settings import Settings
from web_client import CSRF

from webrace.dynabot import browser as dynabot_browser
from webrace.web.accounts import open_accounts
from webrace.web.server import start

DOC = Path(__file__).parent.parent / "docs" / "deploy-nginx.md"
NAME = "webrace.example.org"  # the recipe's server name
PASSWORD = "correct horse battery staple"
pytestmark = pytest.mark.usefixtures("needs_browser")  # decided when the first test runs, before its set-up


def _blocks(language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```", DOC.read_text(encoding="utf-8"), re.S | re.M)


def _put_in(text: str, replacements: dict[str, str]) -> str:
    """``text`` with each key replaced by its value; each key must be there once, so that the
    page cannot change under the test without the test saying so."""
    for old, new in replacements.items():
        assert text.count(old) == 1, f"{DOC.name} no longer has {old!r} once"
        text = text.replace(old, new)
    return text


def recipe_nginx(ports: list[int], certificate: Path, key: Path, app_port: int) -> str:
    (block,) = _blocks("nginx")
    return _put_in(block, {
        "listen 443 ssl;": f"listen 127.0.0.1:{ports[0]} ssl;",
        "listen 80;": f"listen 127.0.0.1:{ports[1]};",
        f"/etc/ssl/certs/{NAME}.pem": str(certificate),
        f"/etc/ssl/private/{NAME}.key": str(key),
        "proxy_pass http://127.0.0.1:8080;": f"proxy_pass http://127.0.0.1:{app_port};",
    })


def recipe_command() -> list[str]:
    """The page's `scrapy web serve` line behind the proxy, listening on any free port."""
    (line,) = [line for block in _blocks("console") for line in block.splitlines()
               if line.startswith("$ scrapy web serve") and "WEBRACE_WEB_TRUSTED_PROXY" in line]
    return shlex.split(_put_in(line.removeprefix("$ "), {"--port 8080": "--port 0"}))


def _certificate(directory: Path) -> tuple[Path, Path]:
    """A self-signed certificate for the recipe's name, and its key (PEM files)."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, NAME)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(NAME)]), critical=False)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    key_path.chmod(0o600)
    return cert_path, key_path


@pytest.fixture(scope="module")
def chromium(tmp_path_factory) -> Iterator[Browser]:
    """The system's headless Chromium, resolving the recipe's name to 127.0.0.1, with a home
    directory of its own (nothing written in the user's)."""
    options = dynabot_browser.launch_options(None)
    options["args"] = [f"--host-resolver-rules=MAP {NAME} 127.0.0.1"]
    options["env"] = dynabot_browser.browser_env(tmp_path_factory.mktemp("chromium-home"))
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(**options)
        yield browser
        browser.close()


@contextmanager
def served_by_the_recipe_command(project: Project) -> Iterator[int]:
    """`scrapy web serve` as the page runs it; yields its port."""
    command = recipe_command()
    assert command[:3] == ["scrapy", "web", "serve"], command
    process = subprocess.Popen([sys.executable, "-m", *command], cwd=project.root, env=project.env,
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        line = process.stdout.readline()
        found = re.search(r" on http://127\.0\.0\.1:(\d+)/", line)
        assert found, line
        yield int(found.group(1))
    finally:
        process.terminate()
        process.wait(timeout=30)


def _log_in(page, base: str, name: str, password: str) -> None:
    page.goto(f"{base}/login")
    page.fill("#login-form input[name=username]", name)
    page.fill("#login-form input[name=password]", password)
    with page.expect_navigation():
        page.click("#login-form [type=submit]")


def _get(port: int, path: str, host: str, tls: bool) -> tuple[int, dict[str, str], str]:
    """A request to nginx on 127.0.0.1 with the Host header given (TLS: the certificate is not
    checked; it is our own)."""
    import http.client

    if tls:
        context = ssl.create_default_context()
        context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
        connection = http.client.HTTPSConnection("127.0.0.1", port, timeout=20, context=context)
    else:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
    try:
        connection.request("GET", path, headers={"Host": host})
        response = connection.getresponse()
        return response.status, dict(response.getheaders()), response.read().decode("utf-8", "replace")
    finally:
        connection.close()


def test_the_documented_nginx_recipe_serves_a_chromium_login_over_https_with_a_secure_cookie(
        nginx, tmp_path, chromium):
    project = Project(tmp_path / "project")
    with open_accounts(project.settings()) as accounts:
        accounts.add("alice", PASSWORD)
    certificate, key = _certificate(tmp_path)
    with served_by_the_recipe_command(project) as app_port:
        nginx.extra_ports = 2
        nginx.servers = lambda: recipe_nginx(nginx.ports, certificate, key, app_port)
        nginx.start()
        tls, plain = nginx.ports
        base = f"https://{NAME}:{tls}"
        context = chromium.new_context(ignore_https_errors=True)
        try:
            page = context.new_page()
            _log_in(page, base, "alice", PASSWORD)
            assert page.url == f"{base}/owner/alice/", page.url
            assert page.locator("h1").first.inner_text()  # alice's page, through nginx
            (cookie,) = [c for c in context.cookies() if c["name"] == "webrace_session"]
            assert cookie["secure"] and cookie["httpOnly"] and cookie["sameSite"] == "Lax", cookie
            assert page.goto(f"{base}/api/v1/me").json() == {"name": "alice", "admin": False}  # the session
        finally:
            context.close()
        status, headers, _ = _get(plain, "/login", NAME, tls=False)  # the recipe's port 80 only redirects
        assert status == 301 and headers["Location"] == f"https://{NAME}/login"
        status, _, body = _get(tls, "/login", "evil.example", tls=True)  # a name not allowed: 400 from the app
        assert status == 400 and "password" not in body


def _own_address() -> tuple[str, str] | None:
    """(an IPv4 address of this network namespace that is not loopback, its network), from
    `ip -j addr` (iproute2), else from the source address of a UDP socket connected towards a
    private address (connecting a UDP socket sends nothing); None when there is only loopback."""
    try:
        shown = subprocess.run(["ip", "-j", "-4", "addr", "show", "scope", "global"], capture_output=True,
                               text=True, timeout=10, check=True).stdout
        for interface in json.loads(shown):
            for address in interface.get("addr_info", []):
                network = ipaddress.ip_network(f"{address['local']}/{address['prefixlen']}", strict=False)
                return address["local"], str(network)
    except (OSError, subprocess.SubprocessError, ValueError, KeyError):
        pass
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("10.255.255.254", 9))
            local = probe.getsockname()[0]
        except OSError:
            return None
    return None if ipaddress.ip_address(local).is_loopback else (local, f"{local}/32")


@contextmanager
def serving(settings: Settings, host: str) -> Iterator[str]:
    server = start(settings, host=host)
    try:
        yield server.base_url
    finally:
        server.stop()


def test_a_login_over_plain_http_to_a_non_loopback_address_works_where_the_admin_allows_it(tmp_path, chromium):
    own = _own_address()
    if own is None:
        pytest.skip("this network namespace has only loopback: no non-loopback address to serve plain http on")
    address, network = own
    settings = Settings({"WEBRACE_DATA_DIR": str(tmp_path), "WEBRACE_WEB_PLAIN_HTTP": [network]})
    with open_accounts(settings) as accounts:
        accounts.add("alice", PASSWORD)
    with serving(settings, address) as base:
        context = chromium.new_context()
        try:
            page = context.new_page()
            _log_in(page, base, "alice", PASSWORD)
            assert page.url == f"{base}/owner/alice/", page.url
            (cookie,) = [c for c in context.cookies() if c["name"] == "webrace_session"]
            assert not cookie["secure"] and cookie["httpOnly"]
        finally:
            context.close()
        with requests.Session() as script:
            script.trust_env = False  # straight to the address, no proxy from the environment
            token = CSRF.search(script.get(f"{base}/login", timeout=20).text).group(1)
            answer = script.post(f"{base}/login", data={"csrf_token": token, "username": "alice",
                                                        "password": PASSWORD}, timeout=20)
            assert answer.status_code == 200 and answer.url == f"{base}/owner/alice/"
            assert script.get(f"{base}/api/v1/me", timeout=20).json()["name"] == "alice"
    refusing = Settings({"WEBRACE_DATA_DIR": str(tmp_path)})  # the admin has not allowed it
    with serving(refusing, address) as base, requests.Session() as script:
        script.trust_env = False
        answer = script.get(f"{base}/login", timeout=20)
        assert answer.status_code == 403 and "WEBRACE_WEB_PLAIN_HTTP" in answer.text and not script.cookies
