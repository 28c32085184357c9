"""The web app served by waitress, a production WSGI server: one event loop holds the
connections (a half-open one costs no thread, and is closed after
``WEBRACE_WEB_CHANNEL_TIMEOUT`` seconds of silence), ``WEBRACE_WEB_THREADS`` threads run the
requests, at most ``WEBRACE_WEB_CONNECTION_LIMIT`` connections are open at once, request
bodies are bounded. Bound to 127.0.0.1 unless told otherwise.

:func:`serve` runs it in the foreground (`scrapy web serve`); :func:`start` in a background
thread and returns a handle (``base_url``, ``stop()``), for tests and embedding.
"""

from __future__ import annotations

import functools
import threading
from typing import Any

from waitress import create_server
from waitress.wasyncore import close_all

from webrace.web.app import create_app
from webrace.web.config import WebConfig

HEADER_LIMIT = 64 * 1024  # bytes of request line and headers


def make_server(settings: Any, host: str = "127.0.0.1", port: int = 0) -> Any:
    """The waitress server of the app, listening (OSError when it cannot)."""
    web = WebConfig.from_settings(settings, host)
    options: dict[str, Any] = {}
    if web.trusted_proxy:
        options = {"trusted_proxy": web.trusted_proxy,
                   "trusted_proxy_headers": {"x-forwarded-proto", "x-forwarded-for"}}
    return create_server(
        create_app(settings, host), host=host, port=port, threads=web.threads,
        connection_limit=web.connection_limit, channel_timeout=web.channel_timeout,
        cleanup_interval=max(1, min(30, web.channel_timeout)),
        max_request_body_size=web.max_body + HEADER_LIMIT, max_request_header_size=HEADER_LIMIT,
        ident="WebRACE", expose_tracebacks=False, clear_untrusted_proxy_headers=True, **options)


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
    """Serve in the foreground until Ctrl-C; ``announce`` gets the line saying where."""
    server = make_server(settings, host, port)
    announce(f"Serving the web app on {base_url(server)}/ (Ctrl-C to stop)")
    try:
        server.run()
    except KeyboardInterrupt:
        pass
    finally:
        server.close()
