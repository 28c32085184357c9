"""The pages: login, each owner's page (ACIs and notifications) and Atom feed, a notification
with what changed, the profile (URDs and sentinels: listed, added, edited, removed; the
secret feed URL), the stored versions, and the admin's list of owners. Another owner's page
answers 403 (whether that owner exists or not); a stored version the asker may not see
answers exactly as one that does not exist (404: its id is computable, so a 403 would tell
that another owner's keywords matched that page); a logged-out visitor is sent to ``/login``.

The feed is also read with the API's bearer token, or without any login at the owner's
secret feed URL (``/feed/TOKEN.atom``, made and revoked in the profile): read-only, that
feed only.

Stored versions are served from their own path, never inlined, under a Content-Security-
Policy ``sandbox`` that runs none of their scripts and loads nothing from elsewhere.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

from flask import Blueprint, Response, abort, flash, g, redirect, render_template, request, url_for

from webrace.annotation.feed import atom_feed
from webrace.names import canonical_owner, owner_name_problem
from webrace.records.sentinel import ON, TYPES
from webrace.web import owners, profile
from webrace.web.accounts import MAX_PASSWORD, open_accounts
from webrace.web.auth import config, local_path, log_in, log_out, may_see, settings

try:
    from webrace.delivery.channels import open_channels
    from webrace.records.channel import ChannelError
except ImportError:  # the pages do not need the delivery package: without it, no channels section
    open_channels, ChannelError = None, ValueError

blueprint = Blueprint("pages", __name__)

STORED_CSP = ("sandbox; default-src 'none'; style-src 'unsafe-inline'; img-src data:; script-src 'none'; "
              "object-src 'none'")
MAX_FEED = 100  # entries of an owner's Atom feed


def _to_login() -> Response:
    return redirect(url_for("pages.login", next=request.full_path.rstrip("?")))


def logged_in(view: Callable) -> Callable:
    @functools.wraps(view)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        return _to_login() if g.user is None else view(*args, **kwargs)
    return guarded


def owner_view(view: Callable) -> Callable:
    """A view of owner ``name``'s data (``/owner/Alice/`` is alice's): the owner or an admin;
    others get 403; a bearer token that is not valid (the feed), 401."""
    @functools.wraps(view)
    def guarded(name: str, **kwargs: Any) -> Any:
        if g.user is None:
            if g.by_token:
                abort(401, "The bearer token is not valid.")
            return _to_login()
        if not may_see(name):
            abort(403, "These pages belong to another owner.")
        owner = canonical_owner(name)
        if owner is None:  # an admin may see any owner, but this is none
            abort(404, owner_name_problem(name))
        return view(owner, **kwargs)
    return guarded


# -- login -----------------------------------------------------------------------------------

@blueprint.route("/login", methods=["GET", "POST"])
def login() -> Any:
    """The login form; POST checks the name and password (failures counted: WEBRACE_WEB_LOGIN_LIMIT)."""
    target = local_path(request.values.get("next")) or url_for("pages.home")
    if request.method == "GET":
        return render_template("login.html", next=target)
    name = request.form.get("username", "")[:200]
    password = request.form.get("password", "")[:MAX_PASSWORD + 1]
    limit = config().login_limit
    who = f"{request.remote_addr or '?'} {canonical_owner(name) or name}"  # ALICE and alice: one limit
    with open_accounts(settings()) as accounts:
        # counted before the password is checked, in the account store every server process of
        # the data directory shares: parallel tries get `limit` password checks, no more
        attempt, wait_ms = accounts.count_attempt(who, limit.amount, limit.get_expiry() * 1000)
        if attempt is None:  # too many tries: not even a right password opens it
            wait = math.ceil(wait_ms / 1000)
            error = f"Too many failed logins: try again in {wait} s."
            page = render_template("login.html", next=target, error=error, username=name)
            return page, 429, {"Retry-After": str(wait)}
        good = bool(name and password) and accounts.check(name, password)
        if good:
            accounts.forget_attempt(attempt)  # only failures count
    if not good:  # never which of the two was wrong
        return render_template("login.html", next=target, error="Wrong name or password.", username=name), 401
    log_in(canonical_owner(name))
    return redirect(target)


@blueprint.route("/logout", methods=["POST"])
def logout() -> Any:
    """Ends the login, on the server too."""
    log_out()
    return redirect(url_for("pages.login"))


@blueprint.route("/")
@logged_in
def home() -> Any:
    """To the owner's own page."""
    return redirect(url_for("pages.owner_page", name=g.user))


@blueprint.route("/owners/")
@logged_in
def all_owners() -> Any:
    """Every owner with their counts (an admin only)."""
    if not g.admin:
        abort(403, "Only an admin sees every owner.")
    with open_accounts(settings()) as accounts:
        names = accounts.names()
    return render_template("owners.html", owners=owners.owners(settings(), names))


# -- an owner's page ---------------------------------------------------------------------------

@blueprint.route("/owner/<name>/")
@owner_view
def owner_page(name: str) -> Any:
    """The owner's ACIs, newest first, a page at a time (``?after=``/``?before=`` a cursor;
    ``?page=N`` of old links still answers), and their newest notifications (``?changes_after=``:
    older ones)."""
    try:
        number = owners.page_number(request.args.get("page")) if request.args.get("page") else None
        after = owners.parse_cursor(request.args.get("after"))
        before = owners.parse_cursor(request.args.get("before"), "before")
        changes_after = owners.parse_cursor(request.args.get("changes_after"), "changes_after")
    except ValueError as exc:
        abort(400, str(exc))
    page = owners.acis(settings(), name, number, config().page_size, after, before)
    notes = owners.notifications(settings(), name, owners.MAX_NOTIFICATIONS, changes_after)
    return render_template("owner.html", owner=name, page=page, notes=notes)


@blueprint.route("/owner/<name>/feed.atom")
@owner_view
def feed(name: str) -> Any:
    """The owner's Atom feed, for the login's session or an API token."""
    return _feed(name)


@blueprint.route("/feed/<token>.atom")
def token_feed(token: str) -> Any:
    """The feed at its owner's secret URL: the token is the whole authorisation, for this feed only."""
    with open_accounts(settings()) as accounts:
        name = accounts.feed_owner(token)
    if name is None:
        abort(404, "No such feed (the owner may have revoked its URL).")
    return _feed(name)


def _feed(name: str) -> Response:
    acis = owners.acis(settings(), name, size=MAX_FEED).items
    return Response(atom_feed(name, acis, link_base=request.host_url.rstrip("/")),
                    content_type="application/atom+xml; charset=utf-8")


@blueprint.route("/owner/<name>/notifications/<note_id>")
@owner_view
def notification(name: str, note_id: str) -> Any:
    """One notification, the change highlighted in its region."""
    found = owners.notification(settings(), name, note_id)
    if found is None:
        abort(404, f"{name} has no notification {note_id[:80]!r}.")
    note, segments = found
    return render_template("notification.html", owner=name, note=note, diff=owners.segments_html(segments))


@blueprint.route("/stored/<aci_id>")
@logged_in
def stored(aci_id: str) -> Any:
    """The stored version an ACI points to, sandboxed: none of its scripts run."""
    item = owners.aci(settings(), aci_id)
    if item is None or not may_see(item.owner):  # the same answer: another owner's ACI is none of ours
        abort(404, f"No ACI {aci_id[:80]!r}.")
    try:
        content_type, body = owners.stored_version(settings(), item)
    except owners.StoredUnavailable as exc:
        abort(exc.status, str(exc))
    response = Response(body, content_type=content_type)
    response.headers["Content-Security-Policy"] = STORED_CSP  # none of the archived page's scripts run
    return response


@blueprint.route("/aci/<aci_id>")
def old_stored_link(aci_id: str) -> Any:
    """Where the Atom feeds of `scrapy aci feed --link-base` and the old PIR pointed."""
    return redirect(url_for("pages.stored", aci_id=aci_id), code=308)


# -- the profile: URDs and sentinels ---------------------------------------------------------------

def _profile(name: str, status: int = 200, **state: Any) -> Any:
    channels = []
    if open_channels is not None:
        with open_channels(settings()) as store:
            channels = store.list(name)
    with open_accounts(settings()) as accounts:
        feed_made = accounts.feed_token_made(name)
    return render_template("profile.html", owner=name, urds=profile.urds(settings(), name),
                           sentinels=profile.sentinels(settings(), name), channels=channels,
                           delivery=open_channels is not None, feed_made=feed_made,
                           types=TYPES, ons=ON, form=state.pop("form", {}), **state), status


@blueprint.route("/owner/<name>/profile")
@owner_view
def profile_page(name: str) -> Any:
    """The owner's URDs, sentinels, delivery channels and secret feed URL, with forms to change them."""
    return _profile(name)


@blueprint.route("/owner/<name>/urds", methods=["POST"])
@owner_view
def add_urds(name: str) -> Any:
    """Adds the pasted URD XML, validated as `scrapy urd add` validates it."""
    xml = request.form.get("urd_xml", "")
    try:
        added = profile.add_urds(settings(), name, xml.encode())
    except profile.ProfileError as exc:
        return _profile(name, 400, urd_xml=xml, urd_problems=exc.problems)
    flash(f"Added {len(added)} URD(s): {', '.join(u.id for u in added[:10])}" + ("..." if len(added) > 10 else ""))
    return redirect(url_for("pages.profile_page", name=name))


@blueprint.route("/owner/<name>/urds/<urd_id>/edit", methods=["GET", "POST"])
@owner_view
def edit_urd(name: str, urd_id: str) -> Any:
    """A URD's XML, to edit and save (its id stays)."""
    current = profile.urd(settings(), name, urd_id)
    if current is None:
        abort(404, f"{name} has no URD {urd_id[:80]!r}.")
    if request.method == "GET":
        return render_template("urd_edit.html", owner=name, urd=current, urd_xml=current.to_xml())
    xml = request.form.get("urd_xml", "")
    try:
        profile.add_urds(settings(), name, xml.encode(), editing=urd_id)
    except profile.ProfileError as exc:
        return render_template("urd_edit.html", owner=name, urd=current, urd_xml=xml, problems=exc.problems), 400
    flash(f"Saved URD {urd_id}")
    return redirect(url_for("pages.profile_page", name=name))


@blueprint.route("/owner/<name>/urds/<urd_id>/remove", methods=["POST"])
@owner_view
def remove_urd(name: str, urd_id: str) -> Any:
    """Removes one of the owner's URDs."""
    if not profile.remove_urd(settings(), name, urd_id):
        abort(404, f"{name} has no URD {urd_id[:80]!r}.")
    flash(f"Removed URD {urd_id}")
    return redirect(url_for("pages.profile_page", name=name))


@blueprint.route("/owner/<name>/sentinels", methods=["POST"])
@owner_view
def add_sentinel(name: str) -> Any:
    """Adds a sentinel, checked as `scrapy sentinel add` checks it."""
    try:
        added = profile.add_sentinel(settings(), name, request.form)
    except profile.ProfileError as exc:
        return _profile(name, 400, form=request.form, sentinel_problems=exc.problems)
    flash(f"Added sentinel {added.id}")
    return redirect(url_for("pages.profile_page", name=name))


@blueprint.route("/owner/<name>/sentinels/<sentinel_id>/edit", methods=["GET", "POST"])
@owner_view
def edit_sentinel(name: str, sentinel_id: str) -> Any:
    """A sentinel's fields, to edit and save."""
    current = profile.sentinel(settings(), name, sentinel_id)
    if current is None:
        abort(404, f"{name} has no sentinel {sentinel_id[:80]!r}.")
    if request.method == "GET":
        form = {"url": current.url, "type": current.type, "where": current.where or "",
                "pattern": current.pattern or "", "every": f"{current.every // 1000}s", "on": current.on,
                "ignore": "\n".join(current.ignore)}
        return render_template("sentinel_edit.html", owner=name, sentinel=current, form=form, types=TYPES, ons=ON)
    try:
        saved = profile.add_sentinel(settings(), name, request.form, replacing=sentinel_id)
    except profile.ProfileError as exc:
        return render_template("sentinel_edit.html", owner=name, sentinel=current, form=request.form, types=TYPES,
                               ons=ON, problems=exc.problems), 400
    flash(f"Saved sentinel {saved.id}")
    return redirect(url_for("pages.profile_page", name=name))


@blueprint.route("/owner/<name>/sentinels/<sentinel_id>/remove", methods=["POST"])
@owner_view
def remove_sentinel(name: str, sentinel_id: str) -> Any:
    """Removes one of the owner's sentinels."""
    if not profile.remove_sentinel(settings(), name, sentinel_id):
        abort(404, f"{name} has no sentinel {sentinel_id[:80]!r}.")
    flash(f"Removed sentinel {sentinel_id}")
    return redirect(url_for("pages.profile_page", name=name))


# -- the secret feed URL -------------------------------------------------------------------------

@blueprint.route("/owner/<name>/feed-url", methods=["POST"])
@owner_view
def new_feed_url(name: str) -> Any:
    """A new secret feed URL (the one before stops working), shown on this answer only: not
    flashed, since a flashed message rides in the session cookie."""
    with open_accounts(settings()) as accounts:
        if not accounts.exists(name):
            abort(404, f"{name} has no account.")
        token = accounts.new_feed_token(name)
    return _profile(name, feed_url=url_for("pages.token_feed", token=token, _external=True))


@blueprint.route("/owner/<name>/feed-url/remove", methods=["POST"])
@owner_view
def revoke_feed_url(name: str) -> Any:
    """Revokes the secret feed URL."""
    with open_accounts(settings()) as accounts:
        revoked = accounts.revoke_feed_token(name)
    flash("Revoked the secret feed URL" if revoked else "There was no secret feed URL")
    return redirect(url_for("pages.profile_page", name=name))


# -- delivery channels (webrace.delivery) ------------------------------------------------------------

@blueprint.route("/owner/<name>/channels", methods=["POST"])
@owner_view
def add_channel(name: str) -> Any:
    """Adds a delivery channel (an Apprise URL), checked as `scrapy deliver channel add` checks it."""
    if open_channels is None:
        abort(404, "Delivery is not installed.")
    events = request.form.getlist("events")
    try:
        with open_channels(settings()) as store:
            channel = store.add(name, request.form.get("channel_url", ""), events)
    except ChannelError as exc:
        return _profile(name, 400, channel_problems=[str(exc)], form={"channel_events": events})
    flash(f"Added channel {channel}")
    return redirect(url_for("pages.profile_page", name=name))


@blueprint.route("/owner/<name>/channels/<channel_id>/remove", methods=["POST"])
@owner_view
def remove_channel(name: str, channel_id: str) -> Any:
    """Removes a delivery channel."""
    if open_channels is None:
        abort(404, "Delivery is not installed.")
    with open_channels(settings()) as store:
        if not store.remove(name, channel_id):
            abort(404, f"{name} has no channel {channel_id[:80]!r}.")
    flash(f"Removed channel {channel_id}")
    return redirect(url_for("pages.profile_page", name=name))
