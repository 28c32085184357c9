"""The documentation's reference (webrace/reference/, docs/gen_reference.py), made from the code:
every command, subcommand, option and exit status; every setting with a description; every
route of the web app in the OpenAPI description, which validates and which the app's real
answers match; every element and attribute of the XML Schemas, documented."""

from __future__ import annotations

import configparser
import json
import re
from pathlib import Path

import pytest
import xmlschema
from flask import Flask, jsonify
from jsonschema import Draft202012Validator
from openapi_spec_validator import validate
from scrapy.settings import Settings
from test_web import _notify, _page, _store_aci
from xmlschema.validators import XsdAttribute, XsdElement

from webrace import reference
from webrace import settings as webrace_settings
from webrace.reference.api import api_page, page_routes
from webrace.reference.commands import (
    command_classes,
    commands_page,
    global_options,
    read_commands,
    split_forms,
    split_statuses,
)
from webrace.reference.markdown import code, text
from webrace.reference.schemas import SCHEMAS, entries, schemas_page, undocumented
from webrace.reference.settings import read_settings, settings_page, undescribed
from webrace.web.accounts import open_accounts
from webrace.web.app import create_app
from webrace.web.openapi import Undocumented, document

ROOT = Path(__file__).resolve().parent.parent


# -- commands ---------------------------------------------------------------------------------


def _sections(page: str, prefix: str) -> dict[str, str]:
    """Heading (after ``prefix``) -> the text under it, up to the next heading of its level."""
    parts = re.split(rf"^{re.escape(prefix)}(.+)$", page, flags=re.MULTILINE)
    return {parts[i].strip(): parts[i + 1] for i in range(1, len(parts) - 1, 2)}


def test_the_commands_are_those_of_the_entry_points_and_crawl():
    parser = configparser.ConfigParser()
    parser.read(ROOT / "setup.cfg")
    registered = {
        line.split("=")[0].strip()
        for line in parser["options.entry_points"]["scrapy.commands"].split("\n")
        if "=" in line
    }
    assert set(command_classes()) == registered | {"crawl"}


def test_every_command_its_forms_options_and_exit_statuses_appear_in_the_commands_page():
    page = commands_page()
    sections = _sections(page, "## scrapy ")
    docs = read_commands()
    assert [d.name for d in docs] == sorted(sections)
    for doc in docs:
        section = sections[doc.name]
        assert doc.short and text(doc.short) in section
        for form in doc.forms:
            assert f"scrapy {doc.name} {form}\n" in section
        for option in doc.options:
            assert all(name in section for name in option.names), (doc.name, option.flags)
        assert doc.statuses and doc.statuses[0][0] == "0", doc.name
        for status, meaning in doc.statuses:
            assert f"| {code(status)} | {text(meaning)} |" in section
    every = _sections(page, "## ")["Options of every command"]
    assert {"--set", "--loglevel", "--logfile", "--nolog"} <= {n for o in global_options() for n in o.names}
    assert all(name in every for o in global_options() for name in o.names)


def test_every_subcommand_named_in_a_syntax_is_a_form_of_its_own():
    docs = {d.name: d for d in read_commands()}
    assert docs["urd"].subcommands == ["add", "list", "remove", "due", "schedule"]
    assert docs["store"].subcommands == ["versions", "get", "query", "gc", "export", "import", "migrate"]
    assert docs["deliver"].forms[0] == "[--loop [--interval S]]"


def test_the_options_of_crawl_and_its_spiders_arguments_appear():
    section = _sections(commands_page(), "## scrapy ")["crawl"]
    assert "`-a NAME=VALUE`" in section and "`-O, --overwrite-output FILE`" in section
    assert "`urd`:" in section and "-a urd=ID" in section and "`dynabot`:" in section


@pytest.mark.parametrize(
    ("syntax", "forms"),
    [
        ("add FILE... | list [--format table|jsonl|xml]", ["add FILE...", "list [--format table|jsonl|xml]"]),
        (
            "due (--all | ID...) | schedule [--loop [--interval S]]",
            ["due (--all | ID...)", "schedule [--loop [--interval S]]"],
        ),
        ("[options] <spider>", ["[options] <spider>"]),
    ],
)
def test_a_syntax_is_split_at_the_bars_outside_brackets(syntax, forms):
    assert split_forms(syntax) == forms


def test_exit_statuses_are_split_at_each_status_and_keep_their_semicolons():
    said = "0: done; `schedule --loop` stopped; 1: `add` of an invalid file; 2 also: a bad name; 141: gone (| head)"
    assert split_statuses(said) == [
        ("0", "done; `schedule --loop` stopped"),
        ("1", "`add` of an invalid file"),
        ("2", "a bad name"),
        ("141", "gone (| head)"),
    ]


# -- settings -----------------------------------------------------------------------------------


def test_every_setting_of_the_module_appears_in_the_settings_page():
    groups = read_settings()
    names = [s.name for g in groups for s in g.settings]
    assert sorted(names) == sorted(n for n in vars(webrace_settings) if n.isupper())
    page = settings_page(groups)
    assert all(f"\n### {name}\n" in page for name in names)


def test_every_setting_of_webraces_own_has_a_description():
    assert undescribed(read_settings()) == []


def test_a_setting_without_a_comment_is_found_undescribed_and_scrapys_link_to_scrapys_documentation():
    groups = read_settings("# --- WebRACE ---\n# Described.\nWEBRACE_A = 1\n\nWEBRACE_B = 2\nDOWNLOAD_DELAY = 0\n")
    assert undescribed(groups) == ["WEBRACE_B"]
    assert "docs.scrapy.org" in settings_page(groups).split("### DOWNLOAD_DELAY")[1]


def test_comments_are_read_as_the_module_writes_them():
    source = '''"""Docstring."""
import os

BOT_NAME = "x"

# --- WebRACE ---------------------------------------------------------
# Bounds of the rest, seconds.
WEBRACE_MIN = 0.0
WEBRACE_MAX = 30.0
# Keep running.
WEBRACE_LOOP = False

# The web app (`scrapy web serve`): host names it answers.
WEBRACE_WEB_HOSTS = None
WEBRACE_WEB_ID = None  # this worker's name
WEBRACE_WEB_IP = None
# A note on what is not set here.

# --- Scrapy ---
# DOWNLOAD_DELAY stays a floor.
DOWNLOAD_DELAY = 0
DOWNLOAD_TIMEOUT = 30
DOWNLOADER_MIDDLEWARES = {
    # a comment inside the value
    "a": 1,
}
'''
    groups = read_settings(source)
    said = {s.name: s.description for g in groups for s in g.settings}
    assert [g.title for g in groups] == ["The Scrapy project", "WebRACE", "The web app (`scrapy web serve`)", "Scrapy"]
    assert said["WEBRACE_MIN"] == said["WEBRACE_MAX"] == "Bounds of the rest, seconds."
    assert said["WEBRACE_LOOP"] == "Keep running."
    assert said["WEBRACE_WEB_HOSTS"] == "Host names it answers."
    assert said["WEBRACE_WEB_ID"] == "this worker's name"
    assert said["WEBRACE_WEB_IP"] == "Host names it answers."  # under the setting with the block's comment
    assert groups[2].notes == ["A note on what is not set here."]
    assert said["DOWNLOAD_DELAY"] == "DOWNLOAD_DELAY stays a floor." and said["DOWNLOAD_TIMEOUT"] == ""
    middlewares = next(s for s in groups[3].settings if s.name == "DOWNLOADER_MIDDLEWARES")
    assert "# a comment inside the value" in middlewares.source and middlewares.description == ""


def test_a_default_written_as_arithmetic_shows_its_value_and_one_over_lines_a_code_block():
    page = settings_page()
    assert "Default: `50 * 1024 * 1024` (52428800)" in page
    assert "```python\n{\n    # replaced by ExclusionMiddleware" in page


# -- the web API ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def app(tmp_path_factory) -> Flask:
    return create_app(Settings({"WEBRACE_DATA_DIR": str(tmp_path_factory.mktemp("reference"))}))


def _routes(app: Flask) -> set[tuple[str, str]]:
    return {
        (re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", rule.rule), method.lower())
        for rule in app.url_map.iter_rules()
        if rule.rule.startswith("/api/")
        for method in rule.methods - {"HEAD", "OPTIONS"}
    }


def test_every_route_of_the_api_is_in_the_openapi_description(app):
    spec = document(app)
    described = {(path, method) for path, methods in spec["paths"].items() for method in methods}
    assert _routes(app) <= described
    assert len(_routes(app)) >= 12


def test_every_route_of_the_app_is_in_the_api_page(app):
    page = api_page(app)
    for rule in app.url_map.iter_rules():
        if rule.endpoint != "static":
            assert re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", rule.rule) in page or f"`{rule.rule}`" in page, rule.rule
    assert {rule for rule, _, _ in page_routes(app)} >= {"/login", "/owner/<name>/profile"}


def test_every_page_of_the_app_says_what_it_is(app):
    assert [rule for rule, _, said in page_routes(app) if not said] == []


def test_the_openapi_description_is_valid_openapi_3_1(app):
    spec = document(app)
    assert spec["openapi"] == "3.1.0"
    validate(spec)


def test_a_route_the_description_does_not_know_is_refused(tmp_path):
    app = create_app(Settings({"WEBRACE_DATA_DIR": str(tmp_path)}))
    app.add_url_rule("/api/v1/new", endpoint="api.new", view_func=lambda: jsonify(new=True))
    with pytest.raises(Undocumented, match=r"GET /api/v1/new \(api.new\) is not described"):
        document(app)


def test_the_app_serves_its_openapi_description_to_anyone(app):
    answer = app.test_client().get("/api/v1/openapi.json")
    assert answer.status_code == 200 and answer.json == json.loads(json.dumps(document(app)))


@pytest.fixture(scope="module")
def filled(tmp_path_factory):
    """A data directory with alice (an owner, two ACIs and a notification) and root (an admin)."""
    data = tmp_path_factory.mktemp("api")
    settings = Settings({"WEBRACE_DATA_DIR": str(data)})
    with open_accounts(settings) as accounts:
        accounts.add("alice", "alice-secret")
        accounts.add("root", "root-secret", admin=True)
        tokens = {name: accounts.new_token(name) for name in ("alice", "root")}
    _store_aci(settings, "alice", "http://a.test/", _page("A", "java"), 1_000_000, "A")
    _store_aci(settings, "alice", "http://a.test/b", _page("B", "java"), 2_000_000, "B")
    note = _notify(settings, "alice", _page("N", "Exams on Monday"), _page("N", "Exams on Friday"), 3_000_000)
    app = create_app(settings)
    return app, tokens, note


def _checked(spec: dict, path: str, method: str, answer) -> dict | None:
    """Assert that ``answer``'s status is one the description gives ``path``/``method`` and that
    its JSON body is valid against the schema given for that status."""
    responses = spec["paths"][path][method]["responses"]
    assert str(answer.status_code) in responses, (path, method, answer.status_code, answer.data[:200])
    content = responses[str(answer.status_code)].get("content", {})
    media = answer.mimetype
    assert media in content, (path, method, answer.status_code, media)
    schema = content[media].get("schema")
    if media != "application/json" or schema is None:
        return None
    Draft202012Validator({**schema, "components": spec["components"]}).validate(answer.json)
    return answer.json


def test_the_apis_answers_are_as_its_description_says(filled):
    app, tokens, note = filled
    spec = document(app)
    client = app.test_client()
    alice, root = ({"Authorization": f"Bearer {tokens[n]}"} for n in ("alice", "root"))
    urd = b'<urd id="u1" owner="alice"><uri timing="600000">http://a.test/</uri><depth level="1"/></urd>'

    def call(method: str, path: str, template: str, headers=alice, **kwargs) -> dict | None:
        answer = client.open(path, method=method, headers=headers, **kwargs)
        return _checked(spec, template, method.lower(), answer)

    assert call("GET", "/api/v1/me", "/api/v1/me") == {"name": "alice", "admin": False}
    assert call("GET", "/api/v1/owners", "/api/v1/owners", headers=root)["owners"]
    assert len(call("GET", "/api/v1/owners/alice/acis?page=1", "/api/v1/owners/{name}/acis")["acis"]) == 2
    assert call("GET", "/api/v1/owners/alice/notifications", "/api/v1/owners/{name}/notifications")["notifications"]
    assert call(
        "GET", f"/api/v1/owners/alice/notifications/{note['id']}", "/api/v1/owners/{name}/notifications/{note_id}"
    )
    assert call(
        "POST", "/api/v1/owners/alice/urds", "/api/v1/owners/{name}/urds", data=urd, content_type="application/xml"
    ) == {"added": ["u1"]}
    assert call("GET", "/api/v1/owners/alice/urds", "/api/v1/owners/{name}/urds")["urds"][0]["id"] == "u1"
    added = call(
        "POST",
        "/api/v1/owners/alice/sentinels",
        "/api/v1/owners/{name}/sentinels",
        json={"url": "http://a.test/", "type": "content", "every": 3600, "ignore": ["\\d+"]},
    )["added"]
    assert call("GET", "/api/v1/owners/alice/sentinels", "/api/v1/owners/{name}/sentinels")["sentinels"]
    assert call("DELETE", f"/api/v1/owners/alice/sentinels/{added}", "/api/v1/owners/{name}/sentinels/{sentinel_id}")
    assert call("DELETE", "/api/v1/owners/alice/urds/u1", "/api/v1/owners/{name}/urds/{urd_id}")
    # errors: each a status the description gives the operation, its body an Error
    assert "error" in call("GET", "/api/v1/me", "/api/v1/me", headers={})
    assert "error" in call("GET", "/api/v1/owners", "/api/v1/owners")
    assert "error" in call("GET", "/api/v1/owners/root/acis", "/api/v1/owners/{name}/acis")
    assert "error" in call("GET", "/api/v1/owners/alice/acis?page=0", "/api/v1/owners/{name}/acis")
    assert "error" in call("DELETE", "/api/v1/owners/alice/urds/none", "/api/v1/owners/{name}/urds/{urd_id}")
    refused = call("POST", "/api/v1/owners/alice/urds", "/api/v1/owners/{name}/urds", data=b"<urd/>")
    assert refused["problems"]
    refused = call("POST", "/api/v1/owners/alice/sentinels", "/api/v1/owners/{name}/sentinels", json={"colour": 1})
    assert refused["problems"]
    call("GET", "/owner/alice/feed.atom", "/owner/{name}/feed.atom")
    call("GET", "/feed/nothing.atom", "/feed/{token}.atom", headers={})


# -- schemas ----------------------------------------------------------------------------------


@pytest.mark.parametrize("item", SCHEMAS, ids=lambda item: item.name)
def test_every_element_and_attribute_of_a_schema_is_in_the_schemas_page(item):
    schema = item.load()
    listed = entries(schema)
    paths = {e.path for e in listed}
    for component in schema.iter_components((XsdElement, XsdAttribute)):
        if component.parent is None and isinstance(component, XsdAttribute):
            continue
        name = component.local_name
        if isinstance(component, XsdAttribute):
            assert any(p.endswith(f"/@{name}") for p in paths), name
        else:
            assert any(p == name or p.endswith(f"/{name}") for p in paths), name
    page = schemas_page()
    assert all(code(path) in page for path in paths)
    assert f"schemas/{item.name}" in page


@pytest.mark.parametrize("item", SCHEMAS, ids=lambda item: item.name)
def test_every_element_and_attribute_of_every_schema_is_documented(item):
    assert undocumented(item.load()) == []
    assert item.load().annotations


def test_a_schema_without_annotations_is_found_undocumented(tmp_path):
    schema = xmlschema.XMLSchema(
        '<xs:schema xmlns:xs="http://www.w3.org/2001/XMLSchema"><xs:element name="a"><xs:complexType>'
        '<xs:attribute name="b"/></xs:complexType></xs:element></xs:schema>'
    )
    assert undocumented(schema) == ["a", "a/@b"]


# -- the generator ------------------------------------------------------------------------------


def test_the_generator_writes_the_four_pages_the_openapi_document_and_the_schemas():
    made = reference.files()
    assert {
        "reference/commands.md",
        "reference/settings.md",
        "reference/api.md",
        "reference/schemas.md",
        "reference/openapi.json",
    } <= set(made)
    assert {f"reference/schemas/{i.name}" for i in SCHEMAS} <= set(made)
    assert json.loads(made["reference/openapi.json"])["openapi"] == "3.1.0"


@pytest.mark.parametrize(
    ("plain", "markdown"),
    [
        ("a <urd> of `<urd>`", "a &lt;urd&gt; of `<urd>`"),
        ("type/* and a_b, [x] | y", "type/\\* and a\\_b, \\[x\\] &#124; y"),
        ("`a|b` stays", "`a|b` stays"),
    ],
)
def test_prose_is_escaped_and_code_kept(plain, markdown):
    assert text(plain) == markdown
