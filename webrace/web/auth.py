"""Who is asking, and what they may see: every request is identified once (the session's
login, or for the JSON API and the Atom feed an ``Authorization: Bearer`` token), and every
view of an owner's data goes through :func:`may_see`: the owner themself, or an admin.

Before that, the transport: over https anyone may ask; over plain http only a client on
loopback or in ``WEBRACE_WEB_PLAIN_HTTP``'s networks (:func:`transport_problem`), since a
session cookie without ``Secure`` (the only kind plain http can carry back) crosses the
network in clear.

Sessions are Flask's (a cookie signed with itsdangerous) holding the id of a login kept in
the account store, so that logging out ends it on the server too. CSRF is Flask-WTF's,
checked on every state-changing request that is not authenticated by a bearer token (a
token is not sent by a browser on its own, so it cannot be forged across sites).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from flask import current_app, g, request, session
from flask_wtf.csrf import CSRFProtect
from werkzeug.exceptions import Forbidden, SecurityError

from webrace.names import canonical_owner
from webrace.web.accounts import open_accounts
from webrace.web.config import WebConfig

csrf = CSRFProtect()
SAFE_METHODS = ("GET", "HEAD", "OPTIONS")


def settings() -> Any:
    """The Scrapy settings the app was made with."""
    return current_app.config["WEBRACE_SETTINGS"]


def config() -> WebConfig:
    return current_app.config["WEBRACE_WEB"]


def api_request() -> bool:
    return request.path.startswith("/api/")


def bearer_request() -> bool:
    """Whether an ``Authorization: Bearer`` token is read: the API, and the Atom feed (for
    feed readers and scripts; a browser never sends one on its own, so no CSRF either way)."""
    return api_request() or request.endpoint == "pages.feed"


def transport_problem() -> str | None:
    """Why this request may not be answered over its transport (None: it may): plain http
    from a client neither on loopback nor in ``WEBRACE_WEB_PLAIN_HTTP``."""
    if request.is_secure or config().plain_http.allows(request.remote_addr):
        return None
    return (f"This server answers plain http only from this machine or the networks its admin allows, not from "
            f"{request.remote_addr}: use its https address (or the admin adds your network to "
            "WEBRACE_WEB_PLAIN_HTTP).")


def identify() -> None:
    """Set ``g.user`` (None: nobody), ``g.admin`` and ``g.by_token``; check CSRF on a
    state-changing request that a session authenticates."""
    if isinstance(request.routing_exception, SecurityError):  # a Host not allowed: 400 before anything else
        raise request.routing_exception
    g.user, g.admin, g.by_token, g.bad_token = None, False, False, False
    problem = transport_problem()
    if problem:  # before any session is read or made: no cookie goes out in clear
        raise Forbidden(problem)
    header = request.headers.get("Authorization", "")
    with open_accounts(settings()) as accounts:
        if bearer_request() and header[:7].lower() == "bearer ":
            g.by_token = True
            g.user = accounts.owner_for_token(header[7:].strip())
            g.bad_token = g.user is None
        elif "login" in session:
            g.user = accounts.login_owner(str(session["login"]))
            if g.user is None:  # logged out elsewhere, expired, new password, account removed
                session.clear()
        g.admin = g.user is not None and accounts.is_admin(g.user)
    if request.method not in SAFE_METHODS and not g.by_token:
        csrf.protect()


def log_in(name: str) -> None:
    """Open a login of account ``name`` (canonical) in a new session."""
    session.clear()  # a new session, and a new CSRF token with it
    with open_accounts(settings()) as accounts:
        session["login"] = accounts.open_login(name, config().session_hours * 3600)
    session.permanent = True


def log_out() -> None:
    if "login" in session:
        with open_accounts(settings()) as accounts:
            accounts.close_login(str(session["login"]))
    session.clear()


def may_see(owner: str) -> bool:
    """Whether the user asking may see and change ``owner``'s data (``Alice``'s is ``alice``'s)."""
    return g.user is not None and (g.user == (canonical_owner(owner) or owner) or g.admin)


def local_path(target: str | None) -> str | None:
    """``target`` when it is a path on this site (after a login, go there), else None. A
    browser drops tabs and newlines from a URL and reads ``\\`` as ``/`` (WHATWG), so
    ``/%09/evil.example`` (a tab, decoded) would go to another site, and a newline would split the Location
    header: a target with a control character, a space or a backslash is no path of ours."""
    if not target or len(target) > 2048 or any(ch <= " " or ch in "\x7f\\" for ch in target):
        return None
    if not target.startswith("/") or target.startswith("//"):
        return None
    parts = urlsplit(target)
    return None if parts.scheme or parts.netloc else target
