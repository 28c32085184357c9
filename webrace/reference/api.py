"""The web API reference: the OpenAPI description the app serves (:mod:`webrace.web.openapi`)
rendered for reading, and every other route of the app (the pages, for browsers) listed from
its URL map."""

from __future__ import annotations

import json
from typing import Any

from flask import Flask
from scrapy.settings import Settings

from webrace.reference.markdown import code, fence, table, text
from webrace.web.app import create_app
from webrace.web.openapi import COMMON_ERRORS, DESCRIBED_PAGES, document

LEFT_OUT = ("static",)  # the app's CSS and images


def reference_app() -> Flask:
    """The app as ``scrapy web serve`` makes it, its secret key given so that nothing is
    written (no request is ever made to it)."""
    return create_app(Settings({"WEBRACE_WEB_SECRET_KEY": "the documentation's; serves nothing"}))


def openapi_json(app: Flask | None = None) -> str:
    return json.dumps(document(app or reference_app()), indent=2) + "\n"


def page_routes(app: Flask) -> list[tuple[str, list[str], str]]:
    """(rule, methods, what its view's docstring says) of every route the OpenAPI document
    does not describe: the pages."""
    found = []
    for rule in sorted(app.url_map.iter_rules(), key=lambda r: r.rule):
        if rule.endpoint.startswith("api.") or rule.endpoint in DESCRIBED_PAGES or rule.endpoint in LEFT_OUT:
            continue
        doc = (app.view_functions[rule.endpoint].__doc__ or "").strip()
        found.append((rule.rule, sorted(rule.methods - {"HEAD", "OPTIONS"}), " ".join(doc.split("\n\n")[0].split())))
    return found


def api_page(app: Flask | None = None) -> str:
    app = app or reference_app()
    spec = document(app)
    out = [
        "# Web API",
        "",
        "The web app (`scrapy web serve`) answers a JSON API under `/api/v1/` for scripts, with the pages' rights. "
        "This page is its OpenAPI 3.1 description, made from the app's routes when these pages are built; the "
        "same document is served by the app at `GET /api/v1/openapi.json` and is here as [openapi.json](openapi.json) "
        "for tools (code generators, Swagger UI, Schemathesis).",
        "",
        "## Authentication and errors",
        "",
        text(spec["info"]["description"]),
        "",
        "Besides the answers each operation lists, any of them may get these:",
        "",
        table(["Status", "Meaning"], [[code(str(status)), text(said)] for status, said in COMMON_ERRORS.items()]),
        "",
        table(
            ["Operation", "Summary"],
            [[f"[{code(f'{m.upper()} {p}')}](#{_anchor(op)})", text(op["summary"])] for p, m, op in _operations(spec)],
        ),
        "",
    ]
    for path, method, op in _operations(spec):
        out += _operation(path, method, op)
    out += ["## Schemas", "", "What the operations answer with (`$ref` in the description).", ""]
    for name, schema in spec["components"]["schemas"].items():
        out += _schema(name, schema)
    out += _pages(app)
    return "\n".join(out)


def _operations(spec: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [(path, method, op) for path, methods in spec["paths"].items() for method, op in methods.items()]


def _anchor(op: dict[str, Any]) -> str:
    return op["operationId"].replace("_", "-").lower()


def _operation(path: str, method: str, op: dict[str, Any]) -> list[str]:
    out = [f"### {method.upper()} {path} {{#{_anchor(op)}}}", "", f"**{text(op['summary'])}**", ""]
    if op.get("description"):
        out += [text(op["description"]), ""]
    out += [
        "Who: "
        + (
            "anyone who may reach the app."
            if op.get("security") == []
            else "an API token (`Authorization: Bearer TOKEN`) or a login's session."
        ),
        "",
    ]
    if op.get("parameters"):
        rows = [
            [code(p["name"]), p["in"], _type(p["schema"]), text(p.get("description", ""))] for p in op["parameters"]
        ]
        out += ["Parameters:", "", table(["Name", "In", "Type", "Meaning"], rows), ""]
    if op.get("requestBody"):
        body = op["requestBody"]
        media = ", ".join(code(m) for m in body["content"])
        out += [f"Request body ({media}): {text(body.get('description', ''))}", ""]
        for content in body["content"].values():
            if "$ref" in content.get("schema", {}):
                out += [f"Schema: {_type(content['schema'])}.", ""]
                break
    rows = []
    for status, answer in op["responses"].items():
        said = _own(int(status), answer["description"])
        if not said:
            continue
        kinds = ", ".join(
            f"{code(media)}{' ' + _type(c['schema']) if c.get('schema') else ''}"
            for media, c in answer.get("content", {}).items()
        )
        rows.append([code(status), text(said), kinds])
    out += ["Responses:", "", table(["Status", "Meaning", "Body"], rows), ""]
    return out


def _own(status: int, said: str) -> str:
    """What an answer's description says beyond the answer every operation may get (listed once)."""
    common = COMMON_ERRORS.get(status)
    if common is None:
        return said
    return "" if said == common else said.removesuffix(f" Or: {common}")


def _type(schema: dict[str, Any]) -> str:
    """A schema in a few words: a link to a named one, ``array of X``, its JSON type(s)."""
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[1]
        return f"[{name}](#{name.lower()})"
    if schema.get("type") == "array":
        return f"array of {_type(schema.get('items', {}))}"
    if "enum" in schema:
        return "one of " + ", ".join(code(json.dumps(v)) for v in schema["enum"])
    if schema.get("type") == "object" and schema.get("properties"):
        return "object: " + ", ".join(f"{code(k)} ({_type(v)})" for k, v in schema["properties"].items())
    kinds = schema.get("type", "any")
    return " or ".join(kinds) if isinstance(kinds, list) else kinds


def _schema(name: str, schema: dict[str, Any]) -> list[str]:
    out = [f"### {name}", ""]
    required = set(schema.get("required", ()))
    rows = [
        [code(key), _type(prop), "yes" if key in required else "no", text(prop.get("description", ""))]
        for key, prop in schema.get("properties", {}).items()
    ]
    out += [table(["Field", "Type", "Always there", "Meaning"], rows), ""]
    if schema.get("additionalProperties") is False:
        out += ["No other field is accepted.", ""]
    out += [
        f'??? example "{name} as JSON Schema"',
        "",
        "\n".join(f"    {line}" for line in fence(json.dumps(schema, indent=2), "json").splitlines()),
        "",
    ]
    return out


def _pages(app: Flask) -> list[str]:
    rows = [[code(rule), ", ".join(methods), text(doc)] for rule, methods, doc in page_routes(app)]
    return [
        "## The pages",
        "",
        "The app's other routes are pages for a browser after a login (forms carry a CSRF token): not an API, "
        "listed here so that every route is.",
        "",
        table(["Route", "Methods", "Note"], rows),
        "",
    ]
