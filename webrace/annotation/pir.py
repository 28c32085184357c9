"""The Personal Information Roadmap (seed 000 section 6): a small web server on 127.0.0.1
that shows each owner their ACIs, newest first, each linking to the stored version.

Routes:

- ``/``                           the owners, with how many ACIs each has
- ``/owner/<name>``               the owner's ACIs: title, relevance, time, summary, links
- ``/owner/<name>/feed.atom``     the same as an Atom feed
- ``/aci/<id>``                   the stored version the ACI points to, from the object store

A stored page is served as it was fetched, with a ``<base>`` so its relative links point at
the original site, and under ``Content-Security-Policy: sandbox`` with scripts refused: the
browser runs none of the archived page's scripts. Stores are opened per request (SQLite
connections are per thread), read only.
"""

from __future__ import annotations

import html
import logging
import re
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import quote, unquote, urlsplit

from webrace.annotation.feed import atom_feed, rfc3339
from webrace.backends import open_aci_store, open_object_cache
from webrace.records.aci import Aci
from webrace.store.objects import ObjectCorrupt, ObjectMissing

logger = logging.getLogger(__name__)

SANDBOX = "sandbox; script-src 'none'; object-src 'none'"
_MEDIA = {"html": "text/html", "xhtml": "application/xhtml+xml", "xml": "application/xml", "text": "text/plain"}
_HEAD = re.compile(rb"<head(\s[^>]*)?>", re.IGNORECASE)

_STYLE = """body{font-family:system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;color:#222}
li{margin:0 0 1.2rem 0;list-style:none}.meta{color:#666;font-size:.85rem}.rel{font-weight:bold}
.urgent{color:#b00;font-weight:bold}.summary{margin:.3rem 0}a{color:#0645ad}"""


class PirServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, settings: Any, port: int = 0, host: str = "127.0.0.1") -> None:
        self.settings = settings
        super().__init__((host, port), _Handler)

    @property
    def base_url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}"


class _Handler(BaseHTTPRequestHandler):
    server: PirServer
    server_version = "WebRACE-PIR"

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        path = unquote(urlsplit(self.path).path)
        parts = [p for p in path.split("/") if p]
        try:
            if not parts:
                self.index()
            elif parts[0] == "owner" and len(parts) == 2:
                self.owner_page(parts[1])
            elif parts[0] == "owner" and len(parts) == 3 and parts[2] == "feed.atom":
                self.feed(parts[1])
            elif parts[0] == "aci" and len(parts) == 2:
                self.stored_version(parts[1])
            else:
                self.send_text(HTTPStatus.NOT_FOUND, "No such page. Start at /")
        except Exception:  # one bad request must not stop the server
            logger.exception("PIR request %s failed", self.path)
            self.send_text(HTTPStatus.INTERNAL_SERVER_ERROR, "Internal error (see the server's log)")

    def index(self) -> None:
        with open_aci_store(self.server.settings) as store:
            owners = [(o, len(store.list(o))) for o in store.owners()]
        items = "".join(f'<li><a href="/owner/{quote(o)}">{html.escape(o)}</a> '
                        f'<span class="meta">{n} ACI(s)</span></li>' for o, n in owners)
        self.send_html("WebRACE: Personal Information Roadmap",
                       f"<ul>{items}</ul>" if owners else "<p>No ACI yet: crawl some URDs with keywords.</p>")

    def owner_page(self, owner: str) -> None:
        with open_aci_store(self.server.settings) as store:
            acis = store.list(owner)
        if not acis:
            self.send_text(HTTPStatus.NOT_FOUND, f"No ACI for {owner}")
            return
        entries = "".join(_entry(a) for a in acis)
        feed = f'<p><a href="/owner/{quote(owner)}/feed.atom">Atom feed</a> · <a href="/">all owners</a></p>'
        self.send_html(f"What is new for {owner}", feed + f"<ul>{entries}</ul>")

    def feed(self, owner: str) -> None:
        with open_aci_store(self.server.settings) as store:
            acis = store.list(owner)
        self.send_bytes(HTTPStatus.OK, "application/atom+xml; charset=utf-8",
                        atom_feed(owner, acis, link_base=self.server.base_url))

    def stored_version(self, aci_id: str) -> None:
        with open_aci_store(self.server.settings) as store:
            aci = store.get(aci_id)
        if aci is None:
            self.send_text(HTTPStatus.NOT_FOUND, f"No ACI {aci_id}")
            return
        with open_object_cache(self.server.settings) as cache:
            try:
                body = cache.objects.get(aci.docbase)
            except ObjectMissing:
                self.send_text(HTTPStatus.GONE, f"Version {aci.version} of {aci.uri} is no longer stored "
                                                "(acknowledged and removed by `scrapy store gc`)")
                return
            except ObjectCorrupt:
                self.send_text(HTTPStatus.INTERNAL_SERVER_ERROR, f"The stored copy of {aci.uri} is damaged")
                return
            meta = cache.lookup(aci.uri)
        content_type = meta.header_value("Content-Type") if meta is not None and meta.digest == aci.docbase else None
        content_type = content_type or _MEDIA.get(aci.format, "application/octet-stream")
        if aci.format in ("html", "xhtml") and b"<base" not in body[:4096].lower():
            base = f'<base href="{html.escape(aci.uri, quote=True)}">'.encode()
            body, found = _HEAD.subn(lambda m: m.group(0) + base, body, count=1)
            if not found:
                body = base + body
        self.send_bytes(HTTPStatus.OK, content_type, body, {"Content-Security-Policy": SANDBOX})

    # -- responses -----------------------------------------------------------------------

    def send_html(self, title: str, body: str) -> None:
        page = (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
                f"<style>{_STYLE}</style></head><body><h1>{html.escape(title)}</h1>{body}</body></html>")
        self.send_bytes(HTTPStatus.OK, "text/html; charset=utf-8", page.encode(),
                        {"Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'"})

    def send_text(self, status: HTTPStatus, text: str) -> None:
        self.send_bytes(status, "text/plain; charset=utf-8", (text + "\n").encode())

    def send_bytes(self, status: HTTPStatus, content_type: str, data: bytes,
                   headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Cache-Control", "no-store")
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        logger.info("%s %s", self.address_string(), format % args)


def _entry(aci: Aci) -> str:
    urgent = '<span class="urgent">urgent</span> · ' if aci.urgent else ""
    return (
        f'<li><a href="/aci/{aci.id}">{html.escape(aci.title or aci.uri)}</a>'
        f'<div class="meta">{urgent}<span class="rel">relevance {aci.relevance:g}</span> · '
        f"{rfc3339(aci.updatetime)} · version {aci.version} · "
        f'<a href="{html.escape(aci.uri, quote=True)}">{html.escape(aci.uri)}</a></div>'
        f'<div class="summary">{html.escape(aci.summary)}</div></li>'
    )
