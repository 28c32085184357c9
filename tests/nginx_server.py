"""A real nginx on 127.0.0.1 serving a directory, for tests that need a production server's
behaviour (``gzip on`` with chunked transfer, ``gzip_static``, weak ETags, 304 answers to
conditional requests) and its access log as the record of what was requested.

The server is started as a daemon: ``nginx`` returns once its listening socket is bound, so a
test never waits by guessing. Its log is read after a request of the test's own
(:meth:`Nginx.hits`): one worker answers requests one event at a time, so every request
answered before that one has its line written.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import textwrap
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from conftest import _free_port

NGINX = shutil.which("nginx") or ("/usr/sbin/nginx" if os.access("/usr/sbin/nginx", os.X_OK) else None)
NO_NGINX = "no nginx: .ci/run installs it (apt-get install nginx)"
_SYNC = "/__webrace_log_sync__"

# One JSON object a request: what the tests ask of the log.
_LOG_FORMAT = ("escape=json '{\"method\":\"$request_method\",\"path\":\"$request_uri\",\"status\":$status,"
               "\"sent\":$body_bytes_sent,\"encoding\":\"$sent_http_content_encoding\","
               "\"inm\":\"$http_if_none_match\",\"ims\":\"$http_if_modified_since\"}'")


@dataclass(frozen=True)
class Hit:
    method: str
    path: str
    status: int
    sent: int  # body bytes sent (compressed, when it was)
    encoding: str  # the Content-Encoding nginx answered with
    inm: str  # If-None-Match the client sent
    ims: str  # If-Modified-Since the client sent


class Nginx:
    def __init__(self, root: Path, port: int, server_conf: str) -> None:
        self.root, self.port = root, port
        self.docroot = root / "html"
        self.log = root / "access.log"
        self.conf = root / "nginx.conf"
        self.pid_file = root / "nginx.pid"
        temp = "".join(f"{kind}_temp_path {root / kind};\n"
                       for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
        user = "user root;\n" if os.geteuid() == 0 else ""  # workers read the test's private tmp dir
        self.conf.write_text(textwrap.dedent(f"""\
            {user}worker_processes 1;
            pid {self.pid_file};
            error_log {root / "error.log"} warn;
            events {{ worker_connections 64; }}
            http {{
                include /etc/nginx/mime.types;
                default_type application/octet-stream;
                {temp}
                log_format webrace {_LOG_FORMAT};
                access_log {self.log} webrace;
                server {{
                    listen 127.0.0.1:{port};
                    server_name _;
                    root {self.docroot};
                    location = {_SYNC} {{ return 204; }}
            """) + textwrap.indent(server_conf, " " * 8) + "\n    }\n}\n")

    def url(self, path: str = "/") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def start(self) -> subprocess.CompletedProcess:
        return subprocess.run([NGINX, "-c", str(self.conf), "-p", str(self.root)], capture_output=True, text=True)

    def hits(self) -> list[Hit]:
        """Every request answered so far (the log's own sync requests left out)."""
        with urllib.request.urlopen(self.url(_SYNC), timeout=30) as answer:
            answer.read()
        hits = [Hit(**json.loads(line)) for line in self.log.read_text().splitlines() if line.strip()]
        return [hit for hit in hits if hit.path != _SYNC]

    def clear(self) -> None:
        """Forget the requests so far (the next :meth:`hits` lists only later ones)."""
        self.hits()
        self.log.write_text("")  # nginx appends (O_APPEND): later lines go to the start

    def stop(self) -> None:
        """Stop the master we started (by its pid) and wait until it has gone."""
        try:
            pid = int(self.pid_file.read_text())
        except (OSError, ValueError):
            return
        fd = os.pidfd_open(pid)
        try:
            os.kill(pid, signal.SIGTERM)
            select.select([fd], [], [], 30)
        finally:
            os.close(fd)


@contextmanager
def nginx(root: Path, server_conf: str = "") -> Iterator[Nginx]:
    """nginx serving ``root/html`` on a free port of 127.0.0.1 (another, if something took that
    one first) with ``server_conf`` (directives of the ``server`` block) until the block ends."""
    (root / "html").mkdir(parents=True, exist_ok=True)
    for attempt in range(5):
        server = Nginx(root, _free_port(), server_conf)
        started = server.start()
        if started.returncode == 0:
            break
        if "Address already in use" not in started.stderr or attempt == 4:
            raise RuntimeError(f"nginx did not start: {started.stderr.strip()}")
    try:
        yield server
    finally:
        server.stop()
