"""The web app of the user tier, made with Flask: :func:`create_app` from the Scrapy settings.

Flask rather than Django because the app is made from a settings object, per data
directory, and several live in one process (the tests start one per data directory);
Django's settings are one per process. What a framework must do here is done by
maintained code: sessions (Flask's signed cookie, HttpOnly, SameSite=Lax, Secure over https:
:class:`SessionInterface`), CSRF
(Flask-WTF), the Host check (Flask's ``TRUSTED_HOSTS``: another Host header gets 400, so a
DNS-rebinding page cannot talk to the app), templates (Jinja2, autoescaped), password hashing
(argon2-cffi, in ``accounts``). Every response says ``no-store`` and carries a strict
Content-Security-Policy; the stored pages a stricter one of their own (``pages``).
"""

from __future__ import annotations

import json
import logging
import math
import re
import threading
from datetime import UTC, datetime, timedelta
from typing import Any

from flask import Flask, Request, Response, current_app, jsonify, make_response, render_template, request
from flask.json.provider import DefaultJSONProvider
from flask.sessions import SecureCookieSessionInterface
from flask_wtf.csrf import CSRFError
from werkzeug.exceptions import BadRequest, HTTPException, SecurityError, ServiceUnavailable
from werkzeug.formparser import FormDataParser

from webrace import __version__
from webrace.backends import RedisUnavailable, connect, distributed
from webrace.outage import FIRST_WAIT_S, REDIS_DOWN, Outage, reason
from webrace.web import api, pages
from webrace.web.auth import api_request, csrf, identify
from webrace.web.config import WebConfig

APP_CSP = ("default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
           "frame-ancestors 'none'; base-uri 'none'")
MAX_JSON_DEPTH = 64  # arrays and objects in one another in a request's JSON body
_STRING_OR_BRACKET = re.compile(r'"(?:[^"\\]++|\\.)*+"|[\[\]{}]')  # possessive: linear on an unclosed string
_LEVEL = {"[": 1, "{": 1, "]": -1, "}": -1}  # a string token counts 0
logger = logging.getLogger(__name__)


class BoundedJSON(DefaultJSONProvider):
    """Flask's JSON, refusing a body nested deeper than ``MAX_JSON_DEPTH`` before parsing it:
    Python's parser recurses per level, so 100,000 ``[`` would end in a RecursionError (a 500)."""

    def loads(self, s: str | bytes, **kwargs: Any) -> Any:
        if isinstance(s, bytes | bytearray):
            s = bytes(s).decode(json.detect_encoding(s), "surrogatepass")  # as json.loads does
        depth = 0
        for token in _STRING_OR_BRACKET.finditer(s):
            depth += _LEVEL.get(token.group(), 0)
            if depth > MAX_JSON_DEPTH:
                raise ValueError(f"nested deeper than {MAX_JSON_DEPTH} levels")
        return super().loads(s, **kwargs)


class NamedFieldsParser(FormDataParser):
    """Werkzeug's form parser, refusing a multipart part without a name: werkzeug keeps it
    under the key None, on which Flask-WTF's CSRF check fails (a 500 for anyone's POST)."""

    def parse(self, *args: Any, **kwargs: Any) -> Any:
        stream, form, files = super().parse(*args, **kwargs)
        if None in form or None in files:
            raise BadRequest("a form field without a name")
        return stream, form, files


class WebRequest(Request):
    form_data_parser_class = NamedFieldsParser


def create_app(settings: Any, host: str = "127.0.0.1") -> Flask:
    """The app over the stores ``settings`` name, answering the Host names allowed for ``host``."""
    web = WebConfig.from_settings(settings, host)
    app = Flask(__name__)
    app.json = BoundedJSON(app)
    app.request_class = WebRequest
    app.config.update(
        WEBRACE_SETTINGS=settings,
        WEBRACE_WEB=web,
        SECRET_KEY=web.secret_key,
        TRUSTED_HOSTS=list(web.allowed_hosts),
        SESSION_COOKIE_NAME="webrace_session",
        SESSION_COOKIE_HTTPONLY=True,
        SESSION_COOKIE_SAMESITE="Lax",
        PERMANENT_SESSION_LIFETIME=timedelta(hours=web.session_hours),
        MAX_CONTENT_LENGTH=web.max_body,
        MAX_FORM_MEMORY_SIZE=web.max_body,
        WTF_CSRF_CHECK_DEFAULT=False,  # checked in auth.identify, where bearer tokens are told apart
        WTF_CSRF_TIME_LIMIT=int(web.session_hours * 3600),
        JSON_SORT_KEYS=False,
    )
    app.session_interface = SessionInterface()
    csrf.init_app(app)
    if distributed(settings):  # before anything else reads a store
        app.extensions[RedisGate.NAME] = RedisGate(settings)
        app.before_request(app.extensions[RedisGate.NAME].check)
    app.before_request(identify)
    app.after_request(_headers)
    app.register_error_handler(HTTPException, _error)
    for error in (*REDIS_DOWN, RedisUnavailable):
        app.register_error_handler(error, _unavailable)
    app.register_blueprint(pages.blueprint)
    app.register_blueprint(api.blueprint)
    app.jinja_env.globals.update(version=__version__)
    app.jinja_env.filters["when"] = _when
    return app


class SessionInterface(SecureCookieSessionInterface):
    """Flask's signed-cookie sessions, the cookie ``Secure`` when the request came over https
    and only then. Flask's ``SESSION_COOKIE_SECURE`` is one value for the app, but one app
    answers https through a TLS proxy and plain http on loopback (or a network the admin
    allows: ``auth.transport_problem`` refuses the others before any session is made); a
    ``Secure`` cookie set over plain http is never sent back by scripts (Python's cookie jar)
    nor, off loopback, by browsers, so the CSRF token it carries would be missing.
    ``request.is_secure`` is the WSGI ``url_scheme``: https when served so directly, or when
    ``WEBRACE_WEB_TRUSTED_PROXY`` says so in ``X-Forwarded-Proto`` (waitress believes no one else)."""

    def get_cookie_secure(self, app: Flask) -> bool:
        return request.is_secure


def _headers(response: Any) -> Any:
    headers = response.headers
    headers.setdefault("Content-Security-Policy", APP_CSP)
    headers.setdefault("X-Frame-Options", "DENY")
    headers.setdefault("X-Content-Type-Options", "nosniff")
    headers.setdefault("Referrer-Policy", "same-origin")
    headers.setdefault("Cache-Control", "no-store")  # every page is someone's private data
    return response


def _error(exc: HTTPException) -> Any:
    """Errors as JSON under /api/, else as a page; a CSRF failure says what to do."""
    message = exc.description or exc.name
    if isinstance(exc, SecurityError):  # a Host not allowed: no page (no URL can be built for it)
        return Response(f"400 Bad Request: {message}\n", 400, content_type="text/plain; charset=utf-8")
    if isinstance(exc, CSRFError):
        message = f"{exc.description} Reload the page and try again."
    if api_request():
        response = jsonify(error=message)
        response.status_code = exc.code or 500
        if exc.code == 401:
            response.headers["WWW-Authenticate"] = 'Bearer realm="webrace"'
        return response
    page = render_template("error.html", code=exc.code, name=exc.name, message=message)
    return page, exc.code, ({"WWW-Authenticate": 'Bearer realm="webrace"'} if exc.code == 401 else {})


class RedisGate:
    """(Distributed mode) Redis away: said once in the log when a request finds it so and once
    when it is back; meanwhile every request is answered 503 at once (with ``Retry-After``),
    and Redis is tried again (one PING) only when the outage's wait is over: 1 s doubling to
    ``MOST_WAIT_S`` (5 s: someone is waiting for the page), so a server under load does not
    knock on a dead Redis for every request, nor wait on it."""

    NAME = "webrace_redis_gate"
    MOST_WAIT_S = 5.0

    def __init__(self, settings: Any) -> None:
        self.settings = settings
        self.outage = Outage(logger.warning, most=self.MOST_WAIT_S)
        self.lock = threading.Lock()  # waitress's threads share the outage

    def check(self) -> Any:
        with self.lock:
            if not self.outage.down:
                return None
            if not self.outage.due():
                return _unavailable(RedisUnavailable("Redis is away"), self.outage.left())
        try:
            connect(self.settings).close()
        except RedisUnavailable as exc:
            return _unavailable(exc)
        with self.lock:
            self.outage.ok()
        return None

    def failed(self, exc: BaseException) -> float:
        with self.lock:
            self.outage.failed(exc)
            return self.outage.left()


def _unavailable(exc: BaseException, retry_after: float | None = None) -> Response:
    """The distributed mode's Redis is down: 503, saying so (the message never holds a
    password), and when to try again (``Retry-After``)."""
    gate = current_app.extensions.get(RedisGate.NAME)
    if retry_after is None:
        retry_after = gate.failed(exc) if gate is not None else FIRST_WAIT_S
    response = make_response(_error(ServiceUnavailable(f"The shared store is unreachable: {reason(exc)}")))
    response.headers["Retry-After"] = str(max(math.ceil(retry_after), 1))
    return response


def _when(ms: int | None) -> str:
    """Epoch ms as ``2026-11-21 18:52 UTC``."""
    if ms is None:
        return "never"
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M UTC")
