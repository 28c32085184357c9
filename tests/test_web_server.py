"""The web app's server (webrace/web/server.py, `scrapy web serve`) against hostile clients
and bad arguments (issue 42): half-open connections that would hold every slot, a host or
port that cannot be listened on."""

from __future__ import annotations

import http.client
import socket
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from scrapy.settings import Settings

from webrace.web.server import Handle, start

HALF_OPEN = 200
CLIENT_TIMEOUT = 20  # a bound for a request that must be answered, far below the channel timeout


@contextmanager
def server(tmp_path, **settings: object) -> Iterator[Handle]:
    handle = start(Settings({"WEBRACE_DATA_DIR": str(tmp_path / "data"), "WEBRACE_WEB_CHANNEL_TIMEOUT": 60,
                             **settings}))
    try:
        yield handle
    finally:
        handle.stop()


@contextmanager
def half_open(handle: Handle, count: int, sent: bytes, source: str = "127.0.0.2") -> Iterator[list[socket.socket]]:
    """``count`` connections (from another loopback address) that sent ``sent`` and nothing more."""
    port = int(handle.base_url.rsplit(":", 1)[1])
    sockets = []
    try:
        for _ in range(count):
            sock = socket.create_connection(("127.0.0.1", port), timeout=CLIENT_TIMEOUT, source_address=(source, 0))
            if sent:
                sock.sendall(sent)
            sockets.append(sock)
        yield sockets
    finally:
        for sock in sockets:
            sock.close()


def get(handle: Handle, path: str = "/login") -> int:
    port = int(handle.base_url.rsplit(":", 1)[1])
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=CLIENT_TIMEOUT)
    try:
        conn.request("GET", path, headers={"Host": "127.0.0.1"})
        return conn.getresponse().status
    finally:
        conn.close()


@pytest.mark.parametrize("sent", [b"", b"GET /login HT"], ids=["nothing", "half a request line"])
def test_200_half_open_connections_do_not_keep_a_normal_request_waiting(tmp_path, sent):
    """The default connection limit holds them (a connection costs a descriptor, no thread):
    the request is answered while they are open, long before the 60 s channel timeout."""
    with server(tmp_path) as handle, half_open(handle, HALF_OPEN, sent):
        assert get(handle) == 200


def test_half_open_connections_filling_the_limit_are_closed_and_a_normal_request_gets_in(tmp_path):
    """100 slots, 200 connections holding them (and the 100 of overflow) with a request that
    never ends: a normal request meanwhile is told at once to come back (503, Retry-After);
    the request timeout closes them all while the channel timeout (60 s) would have kept
    them, and the normal request is then answered."""
    with (server(tmp_path, WEBRACE_WEB_CONNECTION_LIMIT=100, WEBRACE_WEB_REQUEST_TIMEOUT=2) as handle,
          half_open(handle, HALF_OPEN, b"GET /login HTTP/1.1\r\nHost: 127.0.0.1\r\n") as sockets):
        assert get(handle) == 503
        assert all(sock.recv(1) == b"" for sock in sockets)  # closed by the server, not by us
        assert get(handle) == 200


def test_a_connection_trickling_its_request_is_closed_at_the_request_timeout(tmp_path):
    """A byte every so often keeps the channel timeout (silence) from ever firing; the request
    timeout counts from the opening. Each recv waits for the server's next move: the
    connection ends (b"") instead of a byte of answer."""
    with server(tmp_path, WEBRACE_WEB_REQUEST_TIMEOUT=1) as handle, half_open(handle, 1, b"G") as (sock,):
        sock.settimeout(0.2)
        for byte in b"ET /login HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 500:
            try:
                sock.sendall(bytes([byte]))
                answer = sock.recv(1)
            except TimeoutError:
                continue
            except ConnectionResetError:
                answer = b""
            break
        else:
            pytest.fail("the trickling connection was still open after 500 bytes")
        assert answer == b""


def test_a_connection_that_sent_a_whole_request_is_answered_and_kept_alive(tmp_path):
    with server(tmp_path, WEBRACE_WEB_REQUEST_TIMEOUT=1) as handle:
        port = int(handle.base_url.rsplit(":", 1)[1])
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=CLIENT_TIMEOUT)
        for _ in range(3):
            conn.request("GET", "/login", headers={"Host": "127.0.0.1"})
            response = conn.getresponse()
            response.read()
            assert response.status == 200
        conn.close()


# -- a burst beyond what the server can queue: 503 and Retry-After at once (issue 46) ------------


def answer(handle: Handle, path: str = "/login") -> http.client.HTTPResponse:
    port = int(handle.base_url.rsplit(":", 1)[1])
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=CLIENT_TIMEOUT)
    conn.request("GET", path, headers={"Host": "127.0.0.1"})
    response = conn.getresponse()
    response.read()
    conn.close()
    return response


def test_a_connection_past_the_connection_limit_is_answered_503_not_left_in_the_backlog(tmp_path):
    """Two slots held by idle connections (accepted first: the backlog is first in, first out);
    a third connection's request is answered 503 with Retry-After instead of waiting until a
    slot frees."""
    with server(tmp_path, WEBRACE_WEB_CONNECTION_LIMIT=2) as handle, half_open(handle, 2, b"", "127.0.0.1"):
        refused = answer(handle)
        assert refused.status == 503 and refused.getheader("Retry-After") == "1"
        assert "busy" in refused.read().decode() or refused.getheader("Connection") == "close"


# -- `scrapy web serve` with a host or port it cannot listen on -------------------------------


@pytest.mark.parametrize(("args", "says"), [
    (("--host", "A" * 300), "--host must be an IP address or a host name"),
    (("--host", "a b"), "--host must be an IP address or a host name"),
    (("--host", ""), "--host must be an IP address or a host name"),
    (("--host", "::1::"), "--host must be an IP address or a host name"),
    (("--host", "\x1b[31mred"), r"not '\x1b[31mred'"),
    (("--port", "99999"), "--port must be between 0 and 65535"),
    (("--port", "-1"), "--port must be between 0 and 65535"),
    (("--port", "eighty"), "invalid int value"),
    (("--port", "9" * 5000), "invalid int value"),
])
def test_web_serve_with_a_host_or_port_it_cannot_use_is_one_usage_line(project, args, says):
    done = project.scrapy("web", "serve", *args, timeout=60)
    assert done.returncode == 2 and "Traceback" not in done.stderr and says in done.stderr
    assert "\x1b" not in done.stderr


def test_web_serve_on_an_address_this_machine_does_not_have_is_one_error_line(project):
    done = project.scrapy("web", "serve", "--host", "192.0.2.1", "--port", "0", timeout=60)  # TEST-NET-1
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "error: cannot listen on 192.0.2.1:0: Cannot assign requested address" in done.stderr.splitlines()


@pytest.mark.parametrize(("value", "says"), [
    ("0", "must be from 1 to 86400 seconds, not '0'"),
    ("100000", "must be from 1 to 86400 seconds, not '100000'"),
    ("soon", "must be a number, not 'soon'"),
    ("inf", "must be a number, not 'inf'"),
    ("nan", "must be a number, not 'nan'"),
])
def test_web_serve_with_a_bad_request_timeout_is_one_error_line(project, value, says):
    done = project.scrapy("web", "serve", "--port", "0", "-s", f"WEBRACE_WEB_REQUEST_TIMEOUT={value}", timeout=60)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.splitlines()[-1] == f"error: WEBRACE_WEB_REQUEST_TIMEOUT {says}"
