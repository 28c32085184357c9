"""A small HTTP client for the web app's tests: one connection per request (http.client, so
that a Host header can be forged and redirects are seen, not followed), and the cookies the
app sets kept by name, sent back whatever their attributes (the tests read those themselves)."""

from __future__ import annotations

import http.client
import json
import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode, urlsplit

CSRF = re.compile(r'name="csrf_token" value="([^"]+)"')


@dataclass
class Answer:
    status: int
    headers: Any  # the response's http.client.HTTPMessage: names case-insensitive
    text: str
    cookies: list[str] = field(default_factory=list)  # the Set-Cookie headers

    def json(self) -> dict:
        return json.loads(self.text)

    @property
    def location(self) -> str:
        return self.headers.get("Location") or ""


class Client:
    def __init__(self, base_url: str) -> None:
        parts = urlsplit(base_url)
        self.host, self.port = parts.hostname, parts.port
        self.cookies: dict[str, str] = {}

    def request(self, method: str, path: str, form: dict | None = None, body: bytes | None = None,
                headers: dict[str, str] | None = None, host: str | None = None) -> Answer:
        sent = dict(headers or {})
        if host is not None:
            sent["Host"] = host
        if self.cookies:
            sent["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        if form is not None:
            body = urlencode(form).encode()
            sent["Content-Type"] = "application/x-www-form-urlencoded"
        conn = http.client.HTTPConnection(self.host, self.port, timeout=20)
        try:
            conn.request(method, path, body=body, headers=sent)
            response = conn.getresponse()
            text = response.read().decode("utf-8", "replace")
            set_cookies = response.headers.get_all("Set-Cookie") or []
            answer = Answer(response.status, response.headers, text, set_cookies)
        finally:
            conn.close()
        for header in set_cookies:
            name, _, value = header.split(";", 1)[0].partition("=")
            if "expires=thu, 01 jan 1970" in header.lower() or "max-age=0" in header.lower():
                self.cookies.pop(name, None)
            else:
                self.cookies[name] = value
        return answer

    def get(self, path: str, **kwargs: object) -> Answer:
        return self.request("GET", path, **kwargs)

    def post(self, path: str, form: dict | None = None, **kwargs: object) -> Answer:
        return self.request("POST", path, form=form, **kwargs)

    def token(self, path: str = "/login") -> str:
        """The CSRF token of a page's forms."""
        return CSRF.search(self.get(path).text).group(1)

    def submit(self, page: str, action: str, fields: dict) -> Answer:
        """Post ``fields`` to ``action`` with the CSRF token of ``page``'s forms, as a browser would."""
        return self.post(action, {"csrf_token": self.token(page), **fields})

    def login(self, name: str, password: str) -> Answer:
        return self.submit("/login", "/login", {"username": name, "password": password})
