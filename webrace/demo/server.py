"""Serve the demo site (``webrace/demo/site``) on 127.0.0.1 from a background thread.

The standard library's HTTP server is all the demo needs, so it runs on a machine with no
web server installed. Port 0 lets the system pick a free port; :func:`start` returns the
address to put in the URDs.

Run alone (``python -m webrace.demo.server [--port N] [--site DIR]``) to crawl the site by hand;
``--site DIR`` serves a copy of it in ``DIR`` (made the first time), whose pages you may edit to
see a re-crawl find the change (the tutorial does).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import threading
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

SITE_DIR = Path(__file__).resolve().parent / "site"
HOST = "127.0.0.1"  # loopback only: the demo never offers the site to the network


class DemoServer(ThreadingHTTPServer):
    """A ThreadingHTTPServer that remembers what it served, so the demo can show that each
    page was downloaded once and that every request the crawler made arrived here."""

    daemon_threads = True  # an unfinished request must not keep the demo alive

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)
        self.hits: list[str] = []  # request paths, in order


class QuietHandler(SimpleHTTPRequestHandler):
    """SimpleHTTPRequestHandler without its line per request on stderr (the crawl's own
    log says what was fetched); requests are recorded on the server instead."""

    server: DemoServer

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        self.server.hits.append(self.path)

    def log_message(self, format: str, *args: object) -> None:
        pass


_server: DemoServer | None = None
_thread: threading.Thread | None = None


def start(port: int = 0, directory: Path = SITE_DIR) -> tuple[DemoServer, str]:
    """Start serving ``directory``; return the server and its base URL (no trailing slash)."""
    global _server, _thread
    if _server is not None:
        raise RuntimeError("the demo server is already running")
    handler = partial(QuietHandler, directory=str(directory))
    _server = DemoServer((HOST, port), handler)
    _thread = threading.Thread(target=_server.serve_forever, name="webrace-demo-server", daemon=True)
    _thread.start()
    return _server, f"http://{HOST}:{_server.server_address[1]}"


def stop() -> None:
    """Stop the server started by :func:`start` (does nothing if none is running)."""
    global _server, _thread
    if _server is None:
        return
    _server.shutdown()
    _server.server_close()
    if _thread is not None:
        _thread.join(timeout=5)
    _server = _thread = None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m webrace.demo.server", description="Serve the WebRACE demo site.")
    parser.add_argument("--port", type=int, default=0, help="port to listen on (default: any free port)")
    parser.add_argument(
        "--site",
        metavar="DIR",
        type=Path,
        help="serve DIR, a copy of the demo site made there first if DIR does not exist (its pages are yours to edit)",
    )
    args = parser.parse_args(argv)
    directory = SITE_DIR if args.site is None else args.site
    try:
        if args.site is not None and not args.site.exists():
            shutil.copytree(SITE_DIR, args.site)
        if not directory.is_dir():
            raise NotADirectoryError(f"not a directory: {directory}")
        server, base = start(args.port, directory)
    except OSError as exc:  # a port in use, a directory that cannot be written
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"Serving {directory} at {base}/ (Ctrl-C to stop)", flush=True)
    try:
        threading.Event().wait()  # the server runs in its thread; wait here for Ctrl-C
    except KeyboardInterrupt:
        print(f"\nStopped after {len(server.hits)} request(s).")
    finally:
        stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
