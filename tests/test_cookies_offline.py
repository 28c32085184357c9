"""Cookies are judged with tldextract's bundled public suffix list: nothing is fetched from the
internet when the first cookie of a crawl arrives (webrace.middlewares.cookies)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from scrapy.settings import Settings

# Run in a fresh interpreter (tldextract's extractors are built once per process) whose
# sockets refuse any address but 127.0.0.1 and any name lookup, and record the attempt.
SCRIPT = textwrap.dedent("""
    import json, logging, socket, sys
    attempts = []
    real_connect, real_lookup = socket.socket.connect, socket.getaddrinfo
    def connect(self, address):
        if isinstance(address, tuple) and address[0] != "127.0.0.1":
            attempts.append(f"connect {address[0]}")
            raise OSError("the network is refused by the test")
        return real_connect(self, address)
    def lookup(host, *args, **kwargs):
        if host not in ("127.0.0.1", None):
            attempts.append(f"lookup {host}")
            raise socket.gaierror("the network is refused by the test")
        return real_lookup(host, *args, **kwargs)
    socket.socket.connect, socket.getaddrinfo = connect, lookup
    logging.basicConfig(level=logging.DEBUG, stream=sys.stderr)

    from scrapy import Request
    from scrapy.http import Response
    from scrapy.settings import Settings
    from scrapy.utils.misc import load_object
    from scrapy.utils.test import get_crawler

    settings = Settings()
    settings.setmodule("webrace.settings")
    path = [p for p, order in settings.getdict("DOWNLOADER_MIDDLEWARES").items() if "Cookies" in p and order]
    middleware = load_object(path[0]).from_crawler(get_crawler(settings_dict={"COOKIES_ENABLED": True}))
    sent = {}
    for url, set_cookie in (("http://127.0.0.1:8000/", "sid=1; Path=/"),
                            ("http://site.github.io/", "tracker=1; Domain=github.io; Path=/"),
                            ("http://site.github.io/", "own=1; Path=/")):
        request = Request(url)
        middleware.process_response(request, Response(url, headers={"Set-Cookie": set_cookie}))
        again = Request(url + "next")
        middleware.process_request(again)
        sent[url] = (again.headers.get("Cookie") or b"").decode()
    print(json.dumps({"middleware": path[0], "attempts": attempts, "sent": sent}))
""")


def test_the_crawls_cookie_middleware_is_webraces():
    settings = Settings()
    settings.setmodule("webrace.settings")
    enabled = {path for path, order in settings.getdict("DOWNLOADER_MIDDLEWARES").items() if order is not None}
    assert "webrace.middlewares.cookies.CookiesMiddleware" in enabled
    assert "scrapy.downloadermiddlewares.cookies.CookiesMiddleware" not in enabled


def test_the_first_cookies_fetch_no_public_suffix_list_and_public_suffix_cookies_are_still_refused(tmp_path):
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "TLDEXTRACT_CACHE": str(tmp_path / "tldextract"),
           "PYTHONPATH": ":".join(sys.path)}
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["middleware"] == "webrace.middlewares.cookies.CookiesMiddleware"
    assert result["attempts"] == []
    assert "Traceback" not in done.stderr and "publicsuffix" not in done.stderr
    assert not (tmp_path / "tldextract").exists()  # nor written to a cache
    assert result["sent"]["http://127.0.0.1:8000/"] == "sid=1"
    # a cookie for every site under github.io (a private public suffix) is refused; the site's own is kept
    assert result["sent"]["http://site.github.io/"] == "own=1"
