"""A real nginx on 127.0.0.1 for tests: its own process, configuration, logs and files.

``nginx`` (a pytest fixture, from tests/conftest.py) gives an :class:`Nginx` not started yet:
the test writes its files under ``nginx.root`` and any ``server`` directives (``rewrite``,
``location`` blocks) into ``nginx.extra``, then calls :meth:`Nginx.start`. Every path nginx
uses (pid, logs, temporary files) is under the test's temporary directory; the server runs in
the foreground (``daemon off``) on a free port and is stopped when the test ends. Without an
``nginx`` binary (Debian: ``apt-get install nginx``) the test is skipped, saying so.

The access log has one line per request: ``METHOD URI STATUS`` (:meth:`Nginx.requests`).
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
from collections import Counter
from pathlib import Path

NO_NGINX = "no nginx binary: `apt-get install nginx` (Debian) for the tests against a real nginx"
_CANDIDATES = ("/usr/sbin/nginx", "/usr/local/sbin/nginx", "/usr/local/nginx/sbin/nginx")


def nginx_binary() -> str | None:
    return shutil.which("nginx") or next((c for c in _CANDIDATES if Path(c).is_file()), None)


class Nginx:
    def __init__(self, binary: str, directory: Path) -> None:
        self.binary = binary
        self.dir = directory
        self.root = directory / "html"  # the document root
        self.root.mkdir(parents=True, exist_ok=True)
        self.access_log = directory / "access.log"
        self.extra = ""  # directives of the server block (rewrite rules, locations)
        self.port = 0
        self.proc: subprocess.Popen | None = None

    def url(self, path: str = "/") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def write(self, path: str, text: str) -> Path:
        """A file of the site, ``path`` as in its URL."""
        file = self.root / path.lstrip("/")
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_text(text, encoding="utf-8")
        return file

    def config(self) -> str:
        d = self.dir
        temp = "".join(f"    {name}_temp_path {d / name};\n" for name in ("client_body", "proxy", "fastcgi", "uwsgi",
                                                                            "scgi"))
        # run as root (CI containers), its workers would be `nobody`, who cannot read the
        # test's private temporary directory: they run as the test's user instead
        user = f"user {pwd.getpwuid(os.geteuid()).pw_name};\n" if os.geteuid() == 0 else ""
        return f"""daemon off;
{user}master_process on;
worker_processes 1;
pid {d / 'nginx.pid'};
error_log stderr notice;
events {{ worker_connections 64; }}
http {{
    types {{ text/html html; text/plain txt; }}
    default_type application/octet-stream;
    access_log off;
    log_format requests '$request_method $request_uri $status';
{temp}    server {{
        listen 127.0.0.1:{self.port};
        server_name localhost;
        root {self.root};
        access_log {self.access_log} requests;
{self.extra}
    }}
}}
"""

    def start(self) -> None:
        """Returns once nginx listens (its master says it started its worker, after binding)."""
        for attempt in range(5):
            self.port = _free_port()
            conf = self.dir / "nginx.conf"
            conf.write_text(self.config(), encoding="utf-8")
            self.proc = subprocess.Popen([self.binary, "-p", str(self.dir), "-c", str(conf),
                                          "-e", "stderr"],
                                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            log = []
            for line in self.proc.stderr:
                log.append(line)
                if "start worker process" in line:
                    self.proc.stderr.close()  # nginx's later lines are not read
                    return
            self.proc.wait()
            if "Address already in use" in "".join(log) and attempt < 4:
                continue
            raise RuntimeError(f"nginx exited with {self.proc.returncode}: {''.join(log[-5:])}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()  # SIGTERM: nginx's fast shutdown, workers included
            self.proc.wait(timeout=30)

    def requests(self) -> list[tuple[str, str, int]]:
        """(method, URI, status) of every request logged so far, in order."""
        if not self.access_log.exists():
            return []
        out = []
        for line in self.access_log.read_text(encoding="utf-8").splitlines():
            method, uri, status = line.rsplit(" ", 2)
            out.append((method, uri, int(status)))
        return out

    def clear_log(self) -> None:
        """Forget the requests logged so far (nginx appends to the file it holds open)."""
        if self.access_log.exists():
            with self.access_log.open("r+") as log:
                log.truncate(0)

    def downloads(self) -> Counter:
        """URI -> how many times it was requested (robots.txt aside)."""
        return Counter(uri for _, uri, _ in self.requests() if uri != "/robots.txt")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
