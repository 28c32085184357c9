"""The web app served by waitress, a production WSGI server: one event loop holds the
connections (polled, so their number is not capped by ``select``'s 1,024 descriptors; a
half-open one costs no thread), ``WEBRACE_WEB_THREADS`` threads run the requests, at most
``WEBRACE_WEB_CONNECTION_LIMIT`` connections are open at once, request bodies are bounded.
Bound to 127.0.0.1 unless told otherwise.

A burst beyond what the server can queue is answered at once, never left in silence: a
request arriving while ``WEBRACE_WEB_QUEUE_LIMIT`` requests already wait for a thread, and
every request of a connection opened past ``WEBRACE_WEB_CONNECTION_LIMIT`` (up to as many
again are accepted for this), gets ``503`` with ``Retry-After`` from the event loop itself,
without running the app, and its connection is closed. Only when the overflow is full too
does the server stop accepting (connections then wait in the listening backlog).

Two clocks close a connection. ``WEBRACE_WEB_CHANNEL_TIMEOUT``: seconds of silence (waitress's
own). ``WEBRACE_WEB_REQUEST_TIMEOUT``: seconds a connection may take to send a whole request,
counted from when it opened or its previous answer was made, however it trickles its bytes;
waitress has no such clock, so :class:`_Server` adds it to its maintenance. Without it, a
client opening many connections and sending a byte now and then (or nothing) holds every
slot of the connection limit and a normal request waits in the backlog.

:func:`serve` runs it in the foreground (`scrapy web serve`); :func:`start` in a background
thread and returns a handle (``base_url``, ``stop()``), for tests and embedding.
"""

from __future__ import annotations

import functools
import math
import resource
import signal
import threading
import time
from typing import Any

from waitress.adjustments import Adjustments
from waitress.channel import HTTPChannel
from waitress.server import TcpWSGIServer
from waitress.task import ThreadedTaskDispatcher
from waitress.utilities import Error
from waitress.wasyncore import close_all

from webrace.web.app import create_app
from webrace.web.config import WebConfig, setting

HEADER_LIMIT = 64 * 1024  # bytes of request line and headers
SPARE_FILES = 64  # descriptors kept beside the connections (stores, listening socket, wake-up pipe)
MAP_EXTRAS = 3  # entries of waitress's socket map besides connections (listening sockets, wake-up pipe)
RETRY_AFTER_S = 1  # what a request refused for the load is told (Retry-After)
INLINE_OUTPUT = 64 * 1024  # bytes a connection may still have to send for a refusal to be written from the loop


class Busy(Error):
    """waitress's error answer as ``503 Service Unavailable`` with ``Retry-After``."""

    code = 503
    reason = "Service Unavailable"

    def to_response(self, ident: str | None = None) -> tuple[str, list, bytes]:
        status, headers, body = super().to_response(ident)
        return status, [*headers, ("Retry-After", str(RETRY_AFTER_S))], body


def request_timeout(settings: Any) -> int:
    """``WEBRACE_WEB_REQUEST_TIMEOUT``: whole seconds, at least 1 (ValueError saying so)."""
    value = setting(settings, "WEBRACE_WEB_REQUEST_TIMEOUT")
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        seconds = math.nan
    if not 1 <= seconds <= 86_400:
        raise ValueError(f"WEBRACE_WEB_REQUEST_TIMEOUT must be from 1 to 86400 seconds, not {value!r}")
    return int(seconds)


class _Channel(HTTPChannel):
    """A connection that knows since when it has been waiting for a whole request."""

    def __init__(self, server: Any, *args: Any, **kwargs: Any) -> None:
        super().__init__(server, *args, **kwargs)
        self.waiting_since = self.creation_time
        self.overflow = len(server.active_channels) > server.open_limit  # past the limit: every request refused

    def service(self) -> None:
        super().service()
        self.waiting_since = time.time()  # an answer was made: the next request's time starts


class _Server(TcpWSGIServer):
    channel_class = _Channel
    request_timeout = 20
    queue_limit = 64
    open_limit = 1000  # connections served; accepted up to adj.connection_limit, the rest refused

    def add_task(self, channel: Any) -> None:
        """Queue the channel's request for a thread, or refuse it at once (see the module's
        docstring): the refusal is written from the event loop (a thunk of its wake-up
        pipe: this is called holding the channel's request lock), as waitress answers a
        request it could not parse."""
        if (channel.overflow or len(self.task_dispatcher.queue) >= self.queue_limit) \
                and channel.total_outbufs_len < INLINE_OUTPUT:
            channel.requests[0].error = Busy(f"The server is busy: try again in {RETRY_AFTER_S} s.")
            self.trigger.pull_trigger(channel.service)
            return
        super().add_task(channel)

    def maintenance(self, now: float) -> None:
        """waitress's (silent connections closed), and: a connection with no request being
        answered and nothing left to send that has not brought a whole request within the
        request timeout is closed, trickling or not."""
        super().maintenance(now)
        cutoff = now - self.request_timeout
        for channel in list(self.active_channels.values()):
            if not channel.requests and not channel.total_outbufs_len and channel.waiting_since < cutoff:
                channel.will_close = True


def make_server(settings: Any, host: str = "127.0.0.1", port: int = 0) -> Any:
    """The waitress server of the app, listening (OSError when it cannot; ValueError for a
    host name that resolves to nothing or a bad server setting)."""
    web = WebConfig.from_settings(settings, host)
    timeout = request_timeout(settings)
    options: dict[str, Any] = {}
    if web.trusted_proxy:
        options = {"trusted_proxy": web.trusted_proxy,
                   "trusted_proxy_headers": {"x-forwarded-proto", "x-forwarded-for"}}
    adj = Adjustments(
        host=host, port=port, threads=web.threads,
        connection_limit=_descriptors_for(2 * web.connection_limit) + MAP_EXTRAS,  # the limit and its overflow
        channel_timeout=web.channel_timeout, cleanup_interval=max(1, min(30, web.channel_timeout, timeout) // 2),
        asyncore_use_poll=True, max_request_body_size=web.max_body + HEADER_LIMIT,
        max_request_header_size=HEADER_LIMIT, ident="WebRACE", expose_tracebacks=False,
        clear_untrusted_proxy_headers=True, **options)
    server = _create(create_app(settings, host), adj, timeout)
    for one in server.all:
        one.queue_limit = web.queue_limit
        one.open_limit = min(web.connection_limit, adj.connection_limit - MAP_EXTRAS)
    return server


def _create(app: Any, adj: Adjustments, timeout: int) -> _Server:
    """waitress's ``create_server`` for TCP, with :class:`_Server`: one per address the host
    resolves to (``localhost``: 127.0.0.1 and ::1), sharing one map and one set of threads, so
    the first one's loop serves them all and closing its map closes them all."""
    socket_map: dict = {}
    dispatcher = ThreadedTaskDispatcher()
    dispatcher.set_thread_count(adj.threads)
    servers = [_Server(app, socket_map, dispatcher=dispatcher, adj=adj, sockinfo=sockinfo) for sockinfo in adj.listen]
    for server in servers:
        server.request_timeout = timeout
        server.all = servers
        server.app = app  # the app itself (waitress's ``application`` may wrap it)
    return servers[0]


def _descriptors_for(connections: int) -> int:
    """``connections``, after raising this process's soft limit of open files to hold them
    (up to its hard limit); fewer when the hard limit is lower (each connection is one)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = connections + SPARE_FILES
    if soft != resource.RLIM_INFINITY and soft < wanted:
        raised = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (raised, hard))
            soft = raised
        except (ValueError, OSError):
            pass
    return connections if soft == resource.RLIM_INFINITY else max(1, min(connections, soft - SPARE_FILES))


def base_url(server: Any) -> str:
    host, port = server.effective_host, server.effective_port
    return f"http://{f'[{host}]' if ':' in host else host}:{port}"


class Handle:
    """A server running in a background thread."""

    def __init__(self, server: Any) -> None:
        self.server = server
        self.base_url = base_url(server)
        self.thread = threading.Thread(target=server.run, name="webrace-web", daemon=True)
        self.thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        """Close the listening socket and every connection (in the server's own loop), then
        end the request threads."""
        try:
            self.server.trigger.pull_trigger(functools.partial(close_all, self.server._map))
        except OSError:  # its wake-up pipe is closed already (seen once under load): close from here
            close_all(self.server._map)
        self.thread.join(timeout)
        self.server.task_dispatcher.shutdown(timeout=timeout)


def start(settings: Any, host: str = "127.0.0.1", port: int = 0) -> Handle:
    return Handle(make_server(settings, host, port))


def serve(settings: Any, host: str = "127.0.0.1", port: int = 8080, announce: Any = print) -> None:
    """Serve in the foreground until Ctrl-C or SIGTERM (a supervisor's stop: the same clean
    end, exit status 0); ``announce`` gets the line saying where."""
    server = make_server(settings, host, port)
    announce(f"Serving the web app on {base_url(server)}/ (Ctrl-C to stop)")
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        server.run()
    except KeyboardInterrupt:
        pass
    finally:
        server.close()
