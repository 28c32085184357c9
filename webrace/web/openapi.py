"""The JSON API's OpenAPI 3.1 description, served at ``GET /api/v1/openapi.json`` and
rendered in the documentation's reference.

Made from the app itself: every path, method and path parameter is read from Flask's URL
map (each route of the ``api`` blueprint, and the two Atom feeds scripts read), an
operation's description from its view's docstring, the records' schemas from their
dataclasses (:class:`~webrace.records.aci.Aci`, :class:`~webrace.records.sentinel.Sentinel`,
:class:`~webrace.sentinels.evaluate.Notification`; a field's comment is its description).
What each route takes and answers is said once, here (:data:`OPERATIONS`); a route that this
table does not describe, or a description of no route, makes :func:`document` raise
:class:`Undocumented`, so the API and its description cannot part.
"""

from __future__ import annotations

import dataclasses
import inspect
import io
import re
import tokenize
import types
import typing
from dataclasses import dataclass, field
from typing import Any

from flask import Flask

from webrace import __version__
from webrace.records.aci import Aci
from webrace.records.sentinel import TYPES, Sentinel
from webrace.sentinels.evaluate import Notification
from webrace.web.owners import MAX_CURSOR, MAX_PAGE

OPENAPI = "3.1.0"
DESCRIBED_PAGES = ("pages.feed", "pages.token_feed")  # not under /api/, but read by scripts with a token
_RULE_PART = re.compile(r"<(?:(\w+)(?:\([^>]*\))?:)?(\w+)>")
_CONVERTERS = {"int": {"type": "integer"}, "float": {"type": "number"}}


class Undocumented(ValueError):
    """A route :data:`OPERATIONS` does not describe, or a description of no route."""


def ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _object(required: list[str] | None = None, **properties: Any) -> dict[str, Any]:
    return {"type": "object", "required": list(properties) if required is None else required, "properties": properties}


def _array(items: dict[str, Any]) -> dict[str, Any]:
    return {"type": "array", "items": items}


STRING, INTEGER, BOOLEAN = {"type": "string"}, {"type": "integer"}, {"type": "boolean"}
CURSOR = {"type": ["string", "null"], "description": "TIME.ID of an item: where a page starts (null: none)."}
CURSOR_PARAMETERS = tuple(
    {"name": name, "in": "query", "required": False, "description": what,
     "schema": {"type": "string", "maxLength": MAX_CURSOR}}
    for name, what in (("after", "The page of items older than this cursor (a page's `next`)."),
                       ("before", "The page of items newer than this cursor (a page's `previous`)."))
)


@dataclass(frozen=True)
class Operation:
    """What one route does with one method: its summary, the answer when it succeeds (status,
    what it is, JSON schema or media type), the errors it adds to the ones every route may
    give, the request body it takes, its query parameters, and who may call it."""

    summary: str
    status: int
    answer: str
    schema: dict[str, Any] | None = None
    media: str = "application/json"
    errors: dict[int, str] = field(default_factory=dict)
    body: dict[str, Any] | None = None
    query: tuple[dict[str, Any], ...] = ()
    auth: str = "owner"  # owner: the owner or an admin; admin; none; feed: token or session, errors as pages


OWNER_ERRORS = {
    403: "This is another owner's data (the owner and admins only).",
    404: "No such owner: the name is not one an owner can have.",
}
OPERATIONS: dict[tuple[str, str], Operation] = {
    ("api.openapi_description", "GET"): Operation(
        "This description", 200, "The OpenAPI 3.1 document you are reading.", {"type": "object"}, auth="none"
    ),
    ("api.me", "GET"): Operation(
        "Who the token or session is",
        200,
        "The account's name and whether it is an admin.",
        _object(name=STRING, admin=BOOLEAN),
    ),
    ("api.all_owners", "GET"): Operation(
        "Every owner (admin)",
        200,
        "Every owner: accounts, and owners of ACIs or URDs without an account.",
        _object(owners=_array(ref("OwnerSummary"))),
        errors={403: "Only an admin lists every owner."},
        auth="admin",
    ),
    ("api.acis", "GET"): Operation(
        "The owner's ACIs, newest first, a page at a time",
        200,
        "One page of ACIs (`WEBRACE_WEB_PAGE_SIZE` a page), read from an index: the newest, or those past a "
        "cursor. `more`: whether older ones follow, `next` the cursor for them (`?after=`); `previous` the "
        "cursor for the newer ones before this page (`?before=`), when there are; `page` when asked by number.",
        _object(["acis", "more", "next", "previous"], acis=_array(ref("Aci")), more=BOOLEAN, next=CURSOR,
                previous=CURSOR, page=INTEGER),
        errors={400: f"`page` is not a number from 1 to {MAX_PAGE:,}, or a cursor is not one.", **OWNER_ERRORS},
        query=(
            *CURSOR_PARAMETERS,
            {
                "name": "page",
                "in": "query",
                "required": False,
                "description": "The page by number, from 1 (old links; each page before it is read to reach it: "
                               "follow `next` instead).",
                "schema": {"type": "integer", "minimum": 1, "maximum": MAX_PAGE},
            },
        ),
    ),
    ("api.notifications", "GET"): Operation(
        "The owner's sentinel notifications, newest first, a page at a time",
        200,
        "One page of notifications (`WEBRACE_WEB_PAGE_SIZE` a page), paged as the ACIs are.",
        _object(["notifications", "more", "next", "previous"], notifications=_array(ref("Notification")),
                more=BOOLEAN, next=CURSOR, previous=CURSOR),
        errors={400: "A cursor is not one.", **OWNER_ERRORS},
        query=CURSOR_PARAMETERS,
    ),
    ("api.notification", "GET"): Operation(
        "One notification, with what changed",
        200,
        "The notification, the diff of its region as segments (`[op, text]`: `=` kept, `+` added, `-` removed) "
        "and as HTML (escaped, `<ins>`/`<del>` in a `div.diff`).",
        _object(notification=ref("Notification"), diff=_array(_array(STRING)), diff_html=STRING),
        errors={**OWNER_ERRORS, 404: "No such owner, or the owner has no notification with this id."},
    ),
    ("api.urds", "GET"): Operation(
        "The owner's URDs",
        200,
        "The owner's URDs by id (URLs shown without credentials).",
        _object(urds=_array(ref("Urd"))),
        errors=OWNER_ERRORS,
    ),
    ("api.urds", "POST"): Operation(
        "Add URDs",
        201,
        "Every URD of the document was stored (replacing the owner's URDs of the same ids).",
        _object(added=_array(STRING)),
        errors={
            400: "The XML is refused (not well formed, invalid against urd.xsd, a URD of another owner, "
            "an id another owner uses): `problems` has one line each, with `line N`. Nothing is stored.",
            413: "The body is larger than `WEBRACE_WEB_MAX_BODY` bytes. Nothing is stored.",
            **OWNER_ERRORS,
        },
        body={
            "required": True,
            "description": "One `<urd>` or a `<urds>` list, valid against the URD schema "
            "(urd.xsd), as `scrapy urd add` takes; every URD names this owner.",
            "content": {media: {"schema": {"type": "string"}} for media in ("application/xml", "text/xml")},
        },
    ),
    ("api.remove_urd", "DELETE"): Operation(
        "Remove a URD",
        200,
        "The URD was removed.",
        _object(removed=STRING),
        errors={**OWNER_ERRORS, 404: "No such owner, or the owner has no URD with this id."},
    ),
    ("api.sentinels", "GET"): Operation(
        "The owner's sentinels",
        200,
        "Each sentinel with when it is next due and the digest it last saw.",
        _object(sentinels=_array(ref("ListedSentinel"))),
        errors=OWNER_ERRORS,
    ),
    ("api.sentinels", "POST"): Operation(
        "Add a sentinel",
        201,
        "The sentinel was added (its baseline: the newest stored version of its page).",
        _object(added=STRING),
        errors={
            400: "The body is no JSON object of the fields below, or the sentinel is refused (as `scrapy "
            "sentinel add` refuses it): `problems` says why. Nothing is added.",
            413: "The body is larger than `WEBRACE_WEB_MAX_BODY` bytes.",
            **OWNER_ERRORS,
        },
        body={
            "required": True,
            "description": "The sentinel, as `scrapy sentinel add` takes it.",
            "content": {"application/json": {"schema": ref("NewSentinel")}},
        },
    ),
    ("api.remove_sentinel", "DELETE"): Operation(
        "Remove a sentinel",
        200,
        "The sentinel was removed.",
        _object(removed=STRING),
        errors={**OWNER_ERRORS, 404: "No such owner, or the owner has no sentinel with this id."},
    ),
    ("pages.feed", "GET"): Operation(
        "The owner's ACIs as an Atom feed",
        200,
        "An Atom 1.0 feed of the owner's newest ACIs (at most 100).",
        media="application/atom+xml",
        auth="feed",
        errors={
            302: "No token and no session: to the login page.",
            401: "The bearer token is not valid.",
            403: "These pages belong to another owner.",
            404: "No such owner.",
        },
    ),
    ("pages.token_feed", "GET"): Operation(
        "The owner's Atom feed at its secret URL",
        200,
        "The Atom feed: the token in the URL (made on the owner's profile page) is the whole authorisation, for "
        "this feed only.",
        media="application/atom+xml",
        auth="none",
        errors={404: "No such feed (the owner may have revoked its URL)."},
    ),
}
PARAMETERS = {
    "name": "An owner's account name (case folded: `Alice` is `alice`).",
    "note_id": "A notification's id (`id` in the notifications listed).",
    "urd_id": "A URD's id.",
    "sentinel_id": "A sentinel's id (`id` in the sentinels listed).",
    "token": "The secret feed token.",
}
COMMON_ERRORS = {
    400: "The Host header is not one the app answers (`WEBRACE_WEB_ALLOWED_HOSTS`: a plain-text answer), or a "
    "request of a session that changes something came without the session's CSRF token in `X-CSRFToken`.",
    403: "Plain http from a client neither on loopback nor in `WEBRACE_WEB_PLAIN_HTTP`: use https.",
    503: "Distributed mode: Redis is unreachable; `Retry-After` says when to try again.",
}
UNAUTHENTICATED = {401: "No token or session, or a bearer token that is not valid."}
AUTHENTICATION = """\
Every route but this description and the secret feed URL needs an owner: an API token in
`Authorization: Bearer TOKEN` (`scrapy user token NAME` prints a new one), or the session cookie
of a login to the web app (then requests that change something also need the session's CSRF
token in an `X-CSRFToken` header). Without either, or with a token that is not valid: 401 and
`WWW-Authenticate: Bearer realm="webrace"`. An owner reads and changes their own data, an admin
everyone's. Errors are JSON objects, `{"error": "one line"}`, with `problems` (one line each)
for a refused URD or sentinel. Over plain http the app answers only clients on loopback or in
`WEBRACE_WEB_PLAIN_HTTP`; behind a TLS proxy, see `WEBRACE_WEB_TRUSTED_PROXY`."""


def document(app: Flask) -> dict[str, Any]:
    """The OpenAPI 3.1 description of ``app``'s API routes."""
    paths: dict[str, dict[str, Any]] = {}
    seen = set()
    for rule in sorted(app.url_map.iter_rules(), key=lambda r: r.rule):
        if not (rule.endpoint.startswith("api.") or rule.endpoint in DESCRIBED_PAGES):
            continue
        path, parameters = _path(rule.rule)
        for method in sorted(rule.methods - {"HEAD", "OPTIONS"}):
            operation = OPERATIONS.get((rule.endpoint, method))
            if operation is None:
                raise Undocumented(
                    f"{method} {rule.rule} ({rule.endpoint}) is not described in webrace.web.openapi.OPERATIONS"
                )
            seen.add((rule.endpoint, method))
            view = app.view_functions[rule.endpoint]
            paths.setdefault(path, {})[method.lower()] = _operation(
                rule.endpoint, method, operation, parameters, inspect.getdoc(view)
            )
    stale = sorted(set(OPERATIONS) - seen)
    if stale:
        raise Undocumented(f"described but not routed: {', '.join(f'{m} {e}' for e, m in stale)}")
    return {
        "openapi": OPENAPI,
        "info": {"title": "WebRACE JSON API", "version": __version__, "description": AUTHENTICATION},
        "paths": paths,
        "components": {
            "schemas": schemas(),
            "securitySchemes": {
                "bearerToken": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "An API token: `scrapy user token NAME` prints a new one.",
                },
                "session": {
                    "type": "apiKey",
                    "in": "cookie",
                    "name": "webrace_session",
                    "description": "The session of a login to the web app (`POST /login`); a request that "
                    "changes something also needs its CSRF token in `X-CSRFToken`.",
                },
            },
        },
    }


def _path(rule: str) -> tuple[str, list[dict[str, Any]]]:
    """Flask's ``/owners/<name>/urds/<int:n>`` -> OpenAPI's ``/owners/{name}/urds/{n}`` and its parameters."""
    parameters = []
    for converter, name in _RULE_PART.findall(rule):
        if name not in PARAMETERS:
            raise Undocumented(f"path parameter {name!r} of {rule} is not described in webrace.web.openapi.PARAMETERS")
        parameters.append(
            {
                "name": name,
                "in": "path",
                "required": True,
                "description": PARAMETERS[name],
                "schema": _CONVERTERS.get(converter, STRING),
            }
        )
    return _RULE_PART.sub(r"{\2}", rule), parameters


def _operation(
    endpoint: str, method: str, operation: Operation, parameters: list[dict[str, Any]], docstring: str | None
) -> dict[str, Any]:
    api = endpoint.startswith("api.")
    content = {operation.media: {"schema": operation.schema} if operation.schema else {}}
    responses: dict[str, Any] = {str(operation.status): {"description": operation.answer, "content": content}}
    errors: dict[int, list[str]] = {}
    for table in (operation.errors, COMMON_ERRORS, UNAUTHENTICATED if operation.auth in ("owner", "admin") else {}):
        for status, said in table.items():
            errors.setdefault(status, []).append(said)
    for status, said in sorted(errors.items()):
        answer: dict[str, Any] = {"description": " Or: ".join(said)}
        if status == 302:
            answer["headers"] = {"Location": {"schema": STRING}}
        else:
            answer["content"] = (
                {"application/json": {"schema": ref("Error")}} if api else {"text/html": {"schema": STRING}}
            )
        if status == 400:  # the Host check answers before any view, in plain text
            answer["content"]["text/plain"] = {"schema": STRING}
        if status == 401 and api:
            answer["headers"] = {"WWW-Authenticate": {"schema": STRING, "description": 'Bearer realm="webrace"'}}
        if status == 503:
            answer["headers"] = {"Retry-After": {"schema": INTEGER, "description": "Seconds."}}
        responses[str(status)] = answer
    found: dict[str, Any] = {
        "operationId": f"{endpoint.split('.', 1)[1]}_{method.lower()}",
        "summary": operation.summary,
        "tags": ["api" if api else "feeds"],
        "responses": responses,
    }
    if docstring:
        found["description"] = docstring
    if parameters or operation.query:
        found["parameters"] = [*parameters, *operation.query]
    if operation.body:
        found["requestBody"] = operation.body
    found["security"] = [] if operation.auth == "none" else [{"bearerToken": []}, {"session": []}]
    return found


def schemas() -> dict[str, Any]:
    """The schemas of what the API answers with, made from the records' dataclasses."""
    sentinel = dataclass_schema(Sentinel, leave_out=("asked",))
    sentinel["properties"]["type"] = {"enum": list(TYPES)}
    sentinel["properties"]["on"] = {"enum": ["any", "added", "removed"]}
    listed = {
        **sentinel,
        "properties": {
            **sentinel["properties"],
            "next_due": {"type": "integer", "description": "Epoch ms."},
            "seen": {
                "type": ["string", "null"],
                "description": "The digest of the version it last saw (null: none yet).",
            },
        },
    }
    listed["required"] = [*sentinel["required"], "next_due", "seen"]
    return {
        "Error": {
            "type": "object",
            "required": ["error"],
            "properties": {
                "error": {"type": "string", "description": "What is wrong, in one line."},
                "problems": {
                    "type": "array",
                    "items": STRING,
                    "description": "A refused URD or sentinel: every problem, one line each.",
                },
            },
        },
        "Aci": dataclass_schema(Aci),
        "Notification": dataclass_schema(Notification, required="without-default", also_required=("id", "at")),
        "Sentinel": sentinel,
        "ListedSentinel": listed,
        "NewSentinel": {
            "type": "object",
            "additionalProperties": False,
            "required": ["url"],
            "properties": {
                "url": {"type": "string", "description": "The page watched."},
                "type": {"enum": list(TYPES), "description": "What counts as a change (default `any`)."},
                "where": {
                    "type": ["string", "null"],
                    "description": "The region: `css:SELECTOR` or `xpath:EXPRESSION`.",
                },
                "pattern": {
                    "type": ["string", "null"],
                    "description": "The keyword (type keyword) or regular expression (type regex).",
                },
                "every": {
                    "type": ["string", "number", "null"],
                    "description": "How often: `90s`, `15m`, `1h`, `1d`, or a number of seconds; rounded up to "
                    "`WEBRACE_SENTINEL_TICK` (default: the tick).",
                },
                "on": {"enum": ["any", "added", "removed", None], "description": "Fire on additions, removals or any."},
                "ignore": {
                    "type": ["string", "array", "null"],
                    "items": STRING,
                    "description": "Regions (`css:`/`xpath:`) or text (a regular expression) left out: a "
                    "list, or one rule a line.",
                },
            },
        },
        "Urd": _object(
            id=STRING,
            owner=STRING,
            url=STRING,
            depth={"type": "integer", "description": "Levels of links followed below the start page."},
            scope={"enum": ["host", "domain", "any"]},
            timing={"type": "integer", "description": "Re-crawl interval, ms."},
            lastcheck={"type": ["integer", "null"], "description": "Epoch ms of the last check (null: never)."},
            next_due={"type": "integer", "description": "Epoch ms."},
            urgent=BOOLEAN,
            keywords={
                "type": "object",
                "additionalProperties": {"type": "number"},
                "description": "Keyword -> weight.",
            },
            xml={"type": "string", "description": "The URD as XML (urd.xsd)."},
        ),
        "OwnerSummary": _object(
            name=STRING,
            account={"type": "boolean", "description": "Whether it has an account."},
            acis={"type": "integer", "description": "ACIs stored."},
            urds={"type": "integer", "description": "URDs registered."},
        ),
    }


def dataclass_schema(
    cls: type, leave_out: tuple[str, ...] = (), required: str = "all", also_required: tuple[str, ...] = ()
) -> dict[str, Any]:
    """The JSON schema of ``dataclasses.asdict(cls(...))``: a property per field, typed from its
    annotation, described by its comment; ``required``: every field (asdict writes them all),
    or those without a default (records stored before a field was added lack it) and
    ``also_required``."""
    hints = typing.get_type_hints(cls)
    comments = field_comments(cls)
    properties, needed = {}, []
    for item in dataclasses.fields(cls):
        if item.name in leave_out:
            continue
        prop = json_type(hints[item.name])
        if comments.get(item.name):
            prop["description"] = comments[item.name]
        properties[item.name] = prop
        if (
            required == "all"
            or item.name in also_required
            or (item.default is dataclasses.MISSING and item.default_factory is dataclasses.MISSING)
        ):
            needed.append(item.name)
    return {"type": "object", "required": needed, "properties": properties}


def json_type(hint: Any) -> dict[str, Any]:
    """The JSON schema of a value of Python type ``hint`` as JSON writes it."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (types.UnionType, typing.Union):
        kinds = [json_type(a) for a in args]
        if all(set(k) == {"type"} and isinstance(k["type"], str) for k in kinds):
            return {"type": [k["type"] for k in kinds]}
        return {"anyOf": kinds}
    if origin in (list, tuple):
        return {"type": "array", "items": json_type(args[0]) if args else {}}
    if origin is dict:
        return {"type": "object", "additionalProperties": json_type(args[1]) if len(args) == 2 else {}}
    simple = {str: "string", int: "integer", float: "number", bool: "boolean", type(None): "null"}
    if hint in simple:
        return {"type": simple[hint]}
    raise TypeError(f"no JSON type for {hint!r}")


def field_comments(cls: type) -> dict[str, str]:
    """Field name -> its comment in ``cls``'s source: the one on its line, else the comment
    lines right above it."""
    source = inspect.getsource(cls)
    alone: dict[int, str] = {}
    said: dict[str, str] = {}
    above: list[str] = []
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            body = token.string.lstrip("#").strip()
            if token.line[: token.start[1]].strip():
                name = token.line.split(":", 1)[0].strip()
                if name.isidentifier():
                    said[name] = body
            else:
                alone[token.start[0]] = body
    for number, line in enumerate(source.splitlines(), 1):
        if number in alone:
            above.append(alone[number])
            continue
        name = line.split(":", 1)[0].strip()
        if name.isidentifier() and ":" in line and name not in said and above:
            said[name] = " ".join(above)
        above = []
    return {name: text[:1].upper() + text[1:] for name, text in said.items()}
