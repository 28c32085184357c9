"""Which forms DynaBot may submit (webrace.dynabot.sideeffects): tables of real forms saved from
real applications (tests/fixtures/forms/README.md), and small ones for what those do not show."""

from __future__ import annotations

from pathlib import Path

import pytest

from webrace.dynabot.forms import Form, Parameter, analyze_forms
from webrace.dynabot.sideeffects import QUERY, classify, field_kind, is_mail, presented

FORMS = Path(__file__).resolve().parent / "fixtures" / "forms"
# where each page was served from: a form with no action posts to its page
PAGES = {
    "django_contact": "http://127.0.0.1:8000/contact/",
    "django_register": "http://127.0.0.1:8000/accounts/register/",
    "django_login": "http://127.0.0.1:8000/accounts/login/",
    "django_admin_login": "http://127.0.0.1:8000/admin/login/",
    "trac_wikistart": "http://127.0.0.1:8001/",
    "trac_search": "http://127.0.0.1:8001/search",
    "trac_query": "http://127.0.0.1:8001/query",
    "trac_newticket": "http://127.0.0.1:8001/newticket",
    "roundup_index": "http://127.0.0.1:8002/",
    "roundup_register": "http://127.0.0.1:8002/user?@template=register",
    "datasette_fts": "http://127.0.0.1:8003/packages/packages",
    "datasette_plain": "http://127.0.0.1:8003/packages_plain/packages",
    "omega": "http://127.0.0.1:8004/cgi-bin/omega/omega",
    "gitweb": "http://127.0.0.1:8005/cgi-bin/gitweb.cgi?p=webrace.git;a=summary",
    "pydoc": "http://127.0.0.1:8006/",
    "isso_demo_rendered": "http://127.0.0.1:8007/demo/",
}


def forms_of(page: str) -> list[Form]:
    return analyze_forms((FORMS / f"{page}.html").read_bytes(), PAGES[page])


# (page, form index, POST forms are queries at this vertex, what the form is taken for)
REAL = [
    # the side-effect forms of the real applications: never submitted, whatever the class says
    ("django_contact", 0, True, "contact"),
    ("django_register", 0, True, "sign-up"),
    ("django_login", 0, True, "login"),
    ("django_admin_login", 0, True, "login"),
    ("trac_newticket", 1, True, "ticket"),
    ("roundup_index", 2, True, "login"),
    ("roundup_register", 2, True, "login"),
    ("roundup_register", 3, True, "sign-up"),
    # their query forms
    ("trac_wikistart", 0, False, QUERY),
    ("trac_search", 0, False, QUERY),
    ("trac_search", 1, False, QUERY),
    ("trac_newticket", 0, False, QUERY),  # the search box in the header of the new-ticket page
    ("trac_query", 1, True, QUERY),  # the custom query posts: a query when the class says POST forms are
    ("trac_query", 1, False, "post"),  # ...and left alone when it does not
    ("roundup_index", 0, False, QUERY),
    ("roundup_index", 1, False, QUERY),  # "Show issue:" a number
    ("roundup_index", 3, False, QUERY),
    ("datasette_fts", 0, False, QUERY),
    ("datasette_fts", 1, False, QUERY),  # the CSV export's options
    ("datasette_plain", 0, False, QUERY),
    ("omega", 0, False, QUERY),
    ("gitweb", 0, False, QUERY),
    ("pydoc", 0, False, QUERY),
    ("pydoc", 1, False, QUERY),
]


@pytest.mark.parametrize(("page", "index", "post_query", "kind"), REAL)
def test_real_forms_are_classified_as_a_person_would(page, index, post_query, kind):
    verdict = classify(forms_of(page)[index], post_query=post_query)
    assert verdict.kind == kind, verdict.reason
    assert verdict.query == (kind == QUERY)
    assert bool(verdict.reason) != verdict.query  # a form left alone says why


@pytest.mark.parametrize(("page", "index", "said"), [
    ("django_contact", 0, ["a field for an e-mail address (email)", "a field for a message (body)",
                           "the action URL says 'contact'"]),
    ("django_register", 0, ["a password field (password1)"]),
    ("trac_newticket", 1, ["a field for an e-mail address (field_reporter)", "the action URL says 'newticket'"]),
    ("roundup_index", 2, ["a password field (__login_password)"]),
])
def test_the_reason_names_the_fields_and_words_that_decided(page, index, said):
    reason = classify(forms_of(page)[index], post_query=True).reason
    for what in said:
        assert what in reason


def test_a_side_effect_form_is_left_alone_even_when_the_class_tolerates_mail_and_uploads():
    tolerant = frozenset({"email", "upload"})
    for page, index, kind in [("django_contact", 0, "contact"), ("django_register", 0, "sign-up"),
                              ("trac_newticket", 1, "ticket")]:
        assert classify(forms_of(page)[index], post_query=True, allow=tolerant).kind == kind


def test_isso_builds_its_comment_box_without_a_form_element():
    # Isso 0.14's postbox is inputs in <div>s submitted by its script: nothing for DynaBot to submit
    assert forms_of("isso_demo_rendered") == []


@pytest.mark.parametrize(("page", "name", "kind"), [
    ("django_contact", "name", "personal"),
    ("django_contact", "email", "mail"),
    ("django_contact", "body", "message"),
    ("django_register", "username", "personal"),
    ("django_register", "password2", "password"),
    ("trac_newticket", "field_reporter", "mail"),  # labelled "Your email or username:"
    ("trac_newticket", "field_description", "message"),
    ("trac_newticket", "field_summary", None),
    ("trac_newticket", "field_keywords", None),
    ("roundup_register", "address", "address"),
    ("roundup_register", "phone", "personal"),
    ("roundup_register", "realname", "personal"),
    ("datasette_fts", "_search", None),
    ("datasette_fts", "_filter_value", None),
    ("omega", "P", None),
])
def test_real_fields_are_read_by_type_name_label_and_autocomplete(page, name, kind):
    parameter = next(p for f in forms_of(page) for p in f.parameters if p.name == name)
    assert field_kind(parameter) == kind


def form(fields: str, *, method: str = "get", action: str = "/find", heading: str = "", button: str = "Go",
         attributes: str = "") -> Form:
    page = (f"<h2>{heading}</h2>" if heading else "") + (
        f'<form method="{method}" action="{action}" {attributes}>{fields}'
        f'<input type="submit" value="{button}"></form>')
    return analyze_forms(page, "http://site.test/page")[0]


@pytest.mark.parametrize(("fields", "kind"), [
    ('<input name="q">', QUERY),
    ('<input type="search" name="term" placeholder="Search the catalogue">', QUERY),
    ('<textarea name="sequence"></textarea>', QUERY),
    ('<input type="email" name="notify">', "mail"),  # by its type
    ('<input name="contact_addr" placeholder="you@example.org, your e-mail">', "mail"),  # by its placeholder
    ('<input name="x1" autocomplete="email">', "mail"),  # by its autocomplete token
    ('<input name="x2" autocomplete="cc-number">', "order"),
    ('<input name="card_number">', "order"),
    ('<input name="x3" autocomplete="street-address">', "address"),
    ('<input name="zip">', "address"),
    ('<input name="x4" autocomplete="given-name">', "personal"),
    ('<input type="tel" name="x5">', "personal"),
    ('<input type="file" name="data">', "upload"),
    ('<textarea name="comment"></textarea>', "comment"),
    ('<textarea name="x6" placeholder="Type Comment Here"></textarea>', "comment"),
    ('<textarea name="message"></textarea>', "contact"),
    ('<input type="password" name="pin">', "login"),
    ('<input type="password" name="p1"><input type="password" name="p2">', "sign-up"),
])
def test_fields_decide_by_what_they_ask_for(fields, kind):
    assert classify(form(fields), post_query=True).kind == kind


@pytest.mark.parametrize(("kwargs", "kind"), [
    ({"action": "/newsletter/subscribe"}, "subscription"),
    ({"action": "/cart/add"}, "order"),
    ({"button": "Post comment"}, "comment"),
    ({"button": "Sign up"}, "sign-up"),
    ({"button": "Create my account"}, "sign-up"),
    ({"heading": "Leave a reply"}, "comment"),
    ({"heading": "Get in touch"}, "contact"),
    ({"attributes": 'id="loginForm"'}, "login"),
    ({"attributes": 'class="comment-form"'}, "comment"),
    ({"heading": "Search the archive", "button": "Search"}, QUERY),
])
def test_forms_decide_by_how_they_present_themselves(kwargs, kind):
    assert classify(form('<input name="q">', **kwargs), post_query=True).kind == kind


def test_a_post_form_is_a_query_only_where_the_class_says_so():
    posted = form('<input name="q">', method="post")
    assert classify(posted).kind == "post" and 'post="true"' in classify(posted).reason
    assert classify(posted, post_query=True).query
    assert classify(form('<input name="q">')).query  # GET forms always are


def test_the_class_may_tolerate_mail_and_upload_fields_and_nothing_else():
    blast = form('<textarea name="seq"></textarea><input type="file" name="seqfile">'
                 '<label>E-mail (optional) <input name="email"></label>', method="post")
    assert classify(blast, post_query=True).kind == "upload"
    assert classify(blast, post_query=True, allow=frozenset({"email", "upload"})).query
    with_password = form('<textarea name="seq"></textarea><input type="password" name="pw">', method="post")
    assert classify(with_password, post_query=True, allow=frozenset({"email", "upload"})).kind == "login"


def test_mail_fields_are_known_so_that_probes_leave_them_empty():
    assert is_mail(Parameter("email", "text", ""))
    assert is_mail(Parameter("notify", "email", ""))
    assert not is_mail(Parameter("sequence", "textarea", ""))


def test_presented_lists_every_place_that_speaks():
    found = presented(form('<input name="q">', action="/contact/send", button="Send message",
                           heading="Contact us"))
    places = [why for _, why in found]
    assert any(p.startswith("the action URL") for p in places)
    assert any(p.startswith("the heading") for p in places)
    assert any(p.startswith("the button 'Send message'") for p in places)
