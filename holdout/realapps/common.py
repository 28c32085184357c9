"""What the real applications' installers and launchers share: where they live, a venv with
PyPI packages, Debian packages, a free port, and the ``Launch`` an app module returns.

Pure helpers: no app is named here (each has its module in ``apps/``).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import venv
from dataclasses import dataclass, field
from pathlib import Path

HOST = "127.0.0.1"


def cache_dir() -> Path:
    """Where every app is installed: ``$WEBRACE_REALAPPS_DIR``, else ``$XDG_CACHE_HOME/webrace-realapps``."""
    if os.environ.get("WEBRACE_REALAPPS_DIR"):
        return Path(os.environ["WEBRACE_REALAPPS_DIR"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "webrace-realapps"


@dataclass
class Launch:
    """How to run one app: ``argv`` from ``cwd`` with ``env`` added; its requests are logged in
    ``log`` (the server's own access log). ``log_is_output``: the server writes that log on its
    standard output or error, which the runner sends to ``log``. ``ready``: a path the runner
    requests until it answers (any status below 400) before the app counts as started."""

    argv: list[str]
    log: Path
    log_is_output: bool = True
    cwd: Path | None = None
    env: dict[str, str] = field(default_factory=dict)
    ready: str = "/"
    stdin_pipe: bool = False  # pydoc's server stops at the end of its standard input


MIME_TYPES = {".html": "text/html; charset=utf-8", ".htm": "text/html; charset=utf-8", ".css": "text/css",
              ".js": "text/javascript", ".json": "application/json", ".txt": "text/plain; charset=utf-8",
              ".png": "image/png", ".svg": "image/svg+xml", ".ico": "image/x-icon", ".gif": "image/gif",
              ".woff": "font/woff", ".woff2": "font/woff2", ".inv": "application/octet-stream"}


def lighttpd(port: int, run: Path, root: Path, aliases: dict[str, Path] | None = None,
             cgi: dict[str, str] | None = None, setenv: dict[str, str] | None = None, ready: str = "/") -> Launch:
    """Debian's lighttpd serving ``root`` (and ``aliases``: URL prefix -> directory), running
    ``cgi`` (extension -> interpreter, "" for executables) under ``/cgi-bin/``, logging every
    request in the common log format. lighttpd buffers its access log for about a second and
    writes it all when it stops."""
    def quote(value: object) -> str:
        return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'

    mimes = ", ".join(f"{quote(ext)} => {quote(kind)}" for ext, kind in MIME_TYPES.items())
    lines = [f"server.document-root = {quote(root)}", f"server.port = {port}", 'server.bind = "127.0.0.1"',
             'server.modules = ("mod_access", "mod_alias", "mod_setenv", "mod_cgi", "mod_accesslog")',
             f"accesslog.filename = {quote(run / 'access.log')}", f"server.errorlog = {quote(run / 'error.log')}",
             f"server.pid-file = {quote(run / 'lighttpd.pid')}", f"server.upload-dirs = ({quote(run)})",
             'index-file.names = ("index.html", "index.php", "doku.php")',
             f'mimetype.assign = ({mimes}, "" => "application/octet-stream")']
    if aliases:
        # a prefix ending in "/" maps to a directory ending in "/" (a Path has none)
        lines.append("alias.url = (" + ", ".join(f"{quote(k)} => {quote(str(v) + '/' * k.endswith('/'))}"
                                                 for k, v in aliases.items()) + ")")
    if cgi:
        assign = ", ".join(f"{quote(k)} => {quote(v)}" for k, v in cgi.items())
        lines.append(f'$HTTP["url"] =~ "^/cgi-bin/" {{ cgi.assign = ({assign}) }}')
    if setenv:
        lines.append("setenv.add-environment = (" + ", ".join(f"{quote(k)} => {quote(v)}"
                                                               for k, v in setenv.items()) + ")")
    conf = run / "lighttpd.conf"
    conf.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return Launch(["/usr/sbin/lighttpd", "-D", "-f", str(conf)], log=run / "access.log", log_is_output=False,
                  ready=ready)


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def run(argv: list[str], **kwargs) -> subprocess.CompletedProcess:
    """A setup step; its output is shown only when it fails (then it raises)."""
    done = subprocess.run(argv, capture_output=True, text=True, **kwargs)
    if done.returncode:
        tail = (done.stdout + done.stderr).strip().splitlines()[-15:]
        raise RuntimeError(f"{' '.join(map(str, argv[:4]))} ... exited with {done.returncode}:\n" + "\n".join(tail))
    return done


def python_venv(home: Path, *requirements: str) -> Path:
    """A venv at ``home/venv`` (made with this Python) holding ``requirements`` from PyPI;
    returns its ``bin`` directory."""
    env_dir = home / "venv"
    if not (env_dir / "bin" / "python").exists():
        venv.EnvBuilder(with_pip=True, clear=True).create(env_dir)
    if requirements:
        run([str(env_dir / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check",
             *requirements])
    return env_dir / "bin"


def debian_packages(*names: str) -> None:
    """Install Debian packages (as root) unless every one is installed already."""
    missing = [n for n in names if subprocess.run(["dpkg-query", "-W", "-f=${Status}", n], capture_output=True,
                                                  text=True).stdout != "install ok installed"]
    if not missing:
        return
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        raise RuntimeError(f"needs the Debian packages {' '.join(missing)}: apt-get install {' '.join(missing)}")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    run(["apt-get", "install", "-y", "-q", "--no-install-recommends", *missing], env=env)


def venv_bin(home: Path) -> Path:
    return home / "venv" / "bin"
