"""The JSON API (``/api/v1/``), for scripts, with the pages' rights: an owner reads and
changes their own data, an admin everyone's. Authenticated by ``Authorization: Bearer
TOKEN`` (`scrapy user token NAME`) or by the session (then state-changing requests need the
CSRF token in an ``X-CSRFToken`` header). Without either: 401. Errors are ``{"error": ...}``
(``problems``: one line each, for a refused URD or sentinel).

What each route takes and answers is in its OpenAPI description (:mod:`webrace.web.openapi`),
served at ``GET /api/v1/openapi.json`` and rendered in the documentation's reference: an
owner's ACIs, notifications, URDs (``POST`` takes the URD XML) and sentinels (``POST`` takes
a JSON object), and for an admin the list of owners.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from flask import Blueprint, abort, current_app, g, jsonify, request

from webrace.names import canonical_owner, owner_name_problem
from webrace.web import openapi, owners, profile
from webrace.web.accounts import open_accounts
from webrace.web.auth import config, may_see, settings

blueprint = Blueprint("api", __name__, url_prefix="/api/v1")


def authenticated(view: Callable) -> Callable:
    @functools.wraps(view)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        if g.user is None:
            abort(401, "the bearer token is not valid" if g.bad_token
                  else "authentication required: Authorization: Bearer TOKEN (scrapy user token NAME)")
        return view(*args, **kwargs)
    return guarded


def owner_api(view: Callable) -> Callable:
    @functools.wraps(view)
    @authenticated
    def guarded(name: str, **kwargs: Any) -> Any:
        if not may_see(name):
            abort(403, "this is another owner's data")
        owner = canonical_owner(name)
        if owner is None:  # an admin may see any owner, but this is none
            abort(404, owner_name_problem(name))
        return view(owner, **kwargs)
    return guarded


def _refused(exc: profile.ProfileError) -> Any:
    response = jsonify(error=str(exc.problems[0]) if exc.problems else "refused", problems=exc.problems)
    response.status_code = 400
    return response


@blueprint.route("/openapi.json")
def openapi_description() -> Any:
    """Served to anyone who may reach the app: it describes the API, and holds no one's data."""
    return jsonify(openapi.document(current_app))


@blueprint.route("/me")
@authenticated
def me() -> Any:
    return jsonify(name=g.user, admin=g.admin)


@blueprint.route("/owners")
@authenticated
def all_owners() -> Any:
    if not g.admin:
        abort(403, "only an admin lists every owner")
    with open_accounts(settings()) as accounts:
        names = accounts.names()
    return jsonify(owners=owners.owners(settings(), names))


@blueprint.route("/owners/<name>/acis")
@owner_api
def acis(name: str) -> Any:
    number, after, before = _paging()
    page = owners.acis(settings(), name, number, config().page_size, after, before)
    return jsonify(acis=[asdict(a) for a in page.items], **_links(page))


@blueprint.route("/owners/<name>/notifications")
@owner_api
def notifications(name: str) -> Any:
    _, after, before = _paging(numbered=False)
    page = owners.notifications(settings(), name, config().page_size, after, before)
    return jsonify(notifications=page.items, **_links(page))


def _paging(numbered: bool = True) -> tuple[int | None, Any, Any]:
    """``?page=`` (where a list has numbers), ``?after=`` and ``?before=`` of a request; 400 saying
    which is wrong."""
    try:
        number = owners.page_number(request.args.get("page")) if numbered and request.args.get("page") else None
        return number, owners.parse_cursor(request.args.get("after")), \
            owners.parse_cursor(request.args.get("before"), "before")
    except ValueError as exc:
        abort(400, str(exc))


def _links(page: owners.Page) -> dict[str, Any]:
    out: dict[str, Any] = {"more": page.more, "next": page.next, "previous": page.previous}
    if page.number is not None:
        out["page"] = page.number
    return out


@blueprint.route("/owners/<name>/notifications/<note_id>")
@owner_api
def notification(name: str, note_id: str) -> Any:
    found = owners.notification(settings(), name, note_id)
    if found is None:
        abort(404, f"{name} has no notification {note_id[:80]!r}")
    note, segments = found
    return jsonify(notification=note, diff=[list(s) for s in segments], diff_html=owners.segments_html(segments))


@blueprint.route("/owners/<name>/urds", methods=["GET", "POST"])
@owner_api
def urds(name: str) -> Any:
    if request.method == "GET":
        return jsonify(urds=[_urd_dict(u) for u in profile.urds(settings(), name)])
    try:
        added = profile.add_urds(settings(), name, request.get_data(cache=False))
    except profile.ProfileError as exc:
        return _refused(exc)
    return jsonify(added=[u.id for u in added]), 201


@blueprint.route("/owners/<name>/urds/<urd_id>", methods=["DELETE"])
@owner_api
def remove_urd(name: str, urd_id: str) -> Any:
    if not profile.remove_urd(settings(), name, urd_id):
        abort(404, f"{name} has no URD {urd_id[:80]!r}")
    return jsonify(removed=urd_id)


@blueprint.route("/owners/<name>/sentinels", methods=["GET", "POST"])
@owner_api
def sentinels(name: str) -> Any:
    if request.method == "GET":
        rows = profile.sentinels(settings(), name)
        return jsonify(sentinels=[{**json.loads(s.to_json()), "next_due": due, "seen": seen} for s, due, seen in rows])
    try:
        added = profile.add_sentinel(settings(), name, profile.sentinel_fields(_json_body()))
    except profile.ProfileError as exc:
        return _refused(exc)
    return jsonify(added=added.id), 201


@blueprint.route("/owners/<name>/sentinels/<sentinel_id>", methods=["DELETE"])
@owner_api
def remove_sentinel(name: str, sentinel_id: str) -> Any:
    if not profile.remove_sentinel(settings(), name, sentinel_id):
        abort(404, f"{name} has no sentinel {sentinel_id[:80]!r}")
    return jsonify(removed=sentinel_id)


def _json_body() -> Any:
    """The request's JSON (parsed by the app's provider, which bounds its nesting); 400 saying
    why when there is none."""
    if not request.is_json:
        abort(400, f"expected a JSON object (Content-Type: application/json): {', '.join(profile.SENTINEL_FIELDS)}")
    try:
        return current_app.json.loads(request.get_data(cache=False))
    except ValueError as exc:  # not JSON, not UTF-8, nested too deep
        abort(400, f"the body is not JSON: {exc}")


def _urd_dict(urd: Any) -> dict[str, Any]:
    return {"id": urd.id, "owner": urd.owner, "url": urd.url, "depth": urd.depth, "scope": urd.scope,
            "timing": urd.timing, "lastcheck": urd.lastcheck, "next_due": urd.next_due, "urgent": urd.urgent,
            "keywords": {k.key: float(k.weight) for k in urd.keywords}, "xml": urd.to_xml()}
