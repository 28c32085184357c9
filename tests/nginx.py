"""A real nginx on 127.0.0.1 for tests: its own process, configuration, logs and files.

``nginx`` (a pytest fixture, from tests/conftest.py) gives an :class:`Nginx` not started yet:
the test writes its files under ``nginx.root`` and any ``server`` directives (``rewrite``,
``location`` blocks, ``gzip on``, ``gzip_static on``...) into ``nginx.extra``, then calls
:meth:`Nginx.start`. Whole ``server`` blocks of the test's own (TLS, a reverse proxy) go into
``nginx.servers``, a function called once ``nginx.ports`` (``nginx.extra_ports`` more free
ports) are picked. Every path nginx uses (pid, logs, temporary files) is under the test's
temporary directory; the server runs in the foreground (``daemon off``) on a free port and is
stopped when the test ends. Without an ``nginx`` binary (Debian: ``apt-get install nginx``) the
test is skipped, saying so.

The access log has one JSON object a request (:class:`Hit`). It is read after a request of
our own that nginx does not log, to a virtual server on the same port: the single worker
answers one event at a time and writes a request's line as it finishes it, so every request
answered before ours has its line written when ours is answered (no waiting by guessing).
"""

from __future__ import annotations

import http.client
import json
import os
import pwd
import shutil
import socket
import subprocess
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

NO_NGINX = "no nginx binary: `apt-get install nginx` (Debian) for the tests against a real nginx"
_CANDIDATES = ("/usr/sbin/nginx", "/usr/local/sbin/nginx", "/usr/local/nginx/sbin/nginx")
_SYNC_HOST = "log-sync.invalid"  # the server name of the unlogged requests that sync the log

# What the tests ask of the log, one JSON object a request (the fields of Hit).
_LOG_FORMAT = ("escape=json '{\"method\":\"$request_method\",\"uri\":\"$request_uri\",\"status\":$status,"
               "\"sent\":$body_bytes_sent,\"encoding\":\"$sent_http_content_encoding\","
               "\"inm\":\"$http_if_none_match\",\"ims\":\"$http_if_modified_since\"}'")
_TYPES = ("text/html html htm; text/plain txt; text/css css; text/xml xml; application/javascript js; "
          "application/json json; application/pdf pdf; image/png png; image/jpeg jpg jpeg; image/gif gif;")


@dataclass(frozen=True)
class Hit:
    method: str
    uri: str  # as requested, query included
    status: int
    sent: int  # body bytes sent (compressed, when they were)
    encoding: str  # the Content-Encoding nginx answered with
    inm: str  # If-None-Match the client sent
    ims: str  # If-Modified-Since the client sent


def nginx_binary() -> str | None:
    return shutil.which("nginx") or next((c for c in _CANDIDATES if Path(c).is_file()), None)


class Nginx:
    def __init__(self, binary: str, directory: Path) -> None:
        self.binary = binary
        self.dir = directory
        self.root = directory / "html"  # the document root
        self.root.mkdir(parents=True, exist_ok=True)
        self.access_log = directory / "access.log"
        self.extra = ""  # directives of the server block (rewrite rules, locations, gzip)
        self.extra_ports = 0  # free ports picked at start, besides ``port``, into ``ports``
        self.servers: Callable[[], str] = lambda: ""  # server blocks of the test's own (may use ``ports``)
        self.port = 0
        self.ports: list[int] = []
        self.proc: subprocess.Popen | None = None

    def url(self, path: str = "/") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def write(self, path: str, content: str | bytes) -> Path:
        """A file of the site, ``path`` as in its URL."""
        file = self.root / path.lstrip("/")
        file.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, str):
            content = content.encode("utf-8")
        file.write_bytes(content)
        return file

    def config(self) -> str:
        d = self.dir
        temp = "".join(f"    {name}_temp_path {d / name};\n" for name in ("client_body", "proxy", "fastcgi", "uwsgi",
                                                                            "scgi"))
        # run as root (CI containers), its workers would be `nobody`, who cannot read the
        # test's private temporary directory: they run as the test's user instead
        user = f"user {pwd.getpwuid(os.geteuid()).pw_name};\n" if os.geteuid() == 0 else ""
        # one worker: the log sync (see the module's docstring) holds for one event loop only
        return f"""daemon off;
{user}master_process on;
worker_processes 1;
pid {d / 'nginx.pid'};
error_log stderr notice;
error_log {d / 'error.log'} notice;
events {{ worker_connections 64; }}
http {{
    types {{ {_TYPES} }}
    default_type application/octet-stream;
    log_format hits {_LOG_FORMAT};
    access_log {self.access_log} hits;
{temp}    server {{
        listen 127.0.0.1:{self.port} default_server;
        server_name localhost;
        root {self.root};
{self.extra}
    }}
{self.servers()}
    server {{
        listen 127.0.0.1:{self.port};
        server_name {_SYNC_HOST};
        access_log off;
        location / {{ return 204; }}
    }}
}}
"""

    def start(self) -> None:
        """Returns once nginx listens (its master says it started its worker, after binding)."""
        for attempt in range(5):
            self.port = _free_port()
            self.ports = []
            while len(self.ports) < self.extra_ports:
                port = _free_port()
                if port not in (self.port, *self.ports):
                    self.ports.append(port)
            conf = self.dir / "nginx.conf"
            conf.write_text(self.config(), encoding="utf-8")
            self.proc = subprocess.Popen([self.binary, "-p", str(self.dir), "-c", str(conf),
                                          "-e", "stderr"],
                                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            log = []
            for line in self.proc.stderr:
                log.append(line)
                if "start worker process" in line:
                    self.proc.stderr.close()  # nginx's later lines are in error.log
                    return
            self.proc.wait()
            if "Address already in use" in "".join(log) and attempt < 4:
                continue
            raise RuntimeError(f"nginx exited with {self.proc.returncode}: {''.join(log[-5:])}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()  # SIGTERM: nginx's fast shutdown, workers included
            self.proc.wait(timeout=30)

    def _sync(self) -> None:
        """Returns once every request answered before has its line in the access log."""
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)  # no proxy, whatever the env
        try:
            connection.request("GET", "/", headers={"Host": _SYNC_HOST})
            connection.getresponse().read()
        finally:
            connection.close()

    def hits(self) -> list[Hit]:
        """Every request answered so far, in order (none if nginx was never started)."""
        if self.proc is None:
            return []
        self._sync()
        lines = self.access_log.read_text(encoding="utf-8").splitlines() if self.access_log.exists() else []
        return [Hit(**json.loads(line)) for line in lines if line.strip()]

    def requests(self) -> list[tuple[str, str, int]]:
        """(method, URI, status) of every request answered so far, in order."""
        return [(hit.method, hit.uri, hit.status) for hit in self.hits()]

    def clear_log(self) -> None:
        """Forget the requests answered so far (the next :meth:`hits` lists only later ones)."""
        if self.proc is not None:
            self._sync()
        if self.access_log.exists():
            with self.access_log.open("r+") as log:  # nginx appends (O_APPEND): later lines go to the start
                log.truncate(0)

    def downloads(self) -> Counter:
        """URI -> how many times it was requested (robots.txt aside)."""
        return Counter(hit.uri for hit in self.hits() if hit.uri != "/robots.txt")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
