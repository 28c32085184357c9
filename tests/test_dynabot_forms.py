"""DynaBot form analysis: what a browser sees in a form, and what it sends when the form is filled."""

from __future__ import annotations

import email
import email.policy
import warnings
from urllib.parse import parse_qsl, urlsplit

import pytest
from scrapy import FormRequest
from scrapy.exceptions import ScrapyDeprecationWarning
from scrapy.http import HtmlResponse

from webrace.dynabot.forms import (
    MULTIPART,
    URLENCODED,
    Form,
    Option,
    Parameter,
    analyze_forms,
    form_data,
    form_request,
)

PAGE = "http://bio.test/tools/blast.html?lang=en"


def one_form(html: str, url: str = PAGE, encoding: str | None = None) -> Form:
    forms = analyze_forms(html, url, encoding)
    assert len(forms) == 1
    return forms[0]


def param(form: Form, name: str) -> Parameter:
    return next(p for p in form.parameters if p.name == name)


def sent(html: str, assignment: dict | None = None, **kwargs) -> list[tuple[str, str]]:
    """The name-value pairs a urlencoded/GET submission carries."""
    request = form_request(one_form(html), assignment or {}, **kwargs)
    if request.method == "GET":
        return parse_qsl(urlsplit(request.url).query, keep_blank_values=True)
    return parse_qsl(request.body.decode("ascii"), keep_blank_values=True)


def multipart_parts(request) -> list[tuple[str, str | None, bytes]]:
    """(name, filename, content) of each part, read back with the stdlib email parser."""
    content_type = request.headers[b"Content-Type"]
    message = email.message_from_bytes(b"Content-Type: " + content_type + b"\r\n\r\n" + request.body,
                                       policy=email.policy.HTTP)
    assert message.is_multipart()
    return [(part.get_param("name", header="content-disposition"), part.get_filename(),
             part.get_payload(decode=True)) for part in message.iter_parts()]


# --- what the analyzer sees -----------------------------------------------------------------------


def test_page_without_forms_or_content_has_no_forms():
    assert analyze_forms("<p>BLAST is a tool</p>", PAGE) == []
    assert analyze_forms("", PAGE) == []
    assert analyze_forms(b"   ", PAGE) == []


def test_forms_are_indexed_in_document_order_like_scrapys_formnumber():
    forms = analyze_forms("<form name=a></form><div><form action=/b></form></div>", PAGE)
    assert [f.index for f in forms] == [0, 1]
    assert forms[1].action == "http://bio.test/b"


def test_broken_html_still_yields_its_form():
    form = one_form("<body><table><tr><td><form action=run><input name=sequence><select name=db>"
                    "<option>nt<option>est</select><td>text</table>")
    assert [p.name for p in form.parameters] == ["sequence", "db"]
    assert [o.value for o in param(form, "db").options] == ["nt", "est"]


@pytest.mark.parametrize("action, base, expected", [
    (None, None, PAGE),
    ("", None, PAGE),
    ("  ", None, PAGE),
    ("run.cgi", None, "http://bio.test/tools/run.cgi"),
    (" /cgi-bin/blast?x=1 ", None, "http://bio.test/cgi-bin/blast?x=1"),
    ("run.cgi", "http://mirror.test/blast/", "http://mirror.test/blast/run.cgi"),
    ("run.cgi", "/other/", "http://bio.test/other/run.cgi"),
    ("", "http://mirror.test/blast/", PAGE),  # an empty action is the page's own URL, whatever the base
])
def test_action_is_absolute(action, base, expected):
    head = f'<head><base href="{base}"></head>' if base else ""
    attribute = "" if action is None else f' action="{action}"'
    assert one_form(f"<html>{head}<body><form{attribute}></form></body></html>").action == expected


@pytest.mark.parametrize("attributes, method, enctype", [
    ("", "GET", URLENCODED),
    ("method=post", "POST", URLENCODED),
    ("method=POST enctype=MULTIPART/FORM-DATA", "POST", MULTIPART),
    ("method=post enctype=text/plain", "POST", URLENCODED),
    ("method=dialog", "GET", URLENCODED),
    ("method=put", "GET", URLENCODED),
])
def test_method_and_enctype(attributes, method, enctype):
    form = one_form(f"<form {attributes}></form>")
    assert (form.method, form.enctype) == (method, enctype)


@pytest.mark.parametrize("markup, kind", [
    ("<input name=p>", "text"),
    ("<input name=p type=TEXT>", "text"),
    ("<input name=p type=Search>", "search"),
    ("<input name=p type=email>", "email"),
    ("<input name=p type=number>", "number"),
    ("<input name=p type=password>", "password"),
    ("<input name=p type=hidden>", "hidden"),
    ("<input name=p type=file>", "file"),
    ("<input name=p type=datetime-local>", "datetime-local"),
    ("<input name=p type=sequence>", "text"),  # unknown types are text, as in browsers
    ("<input name=p type=datetime>", "text"),  # obsolete
    ("<textarea name=p></textarea>", "textarea"),
    ("<select name=p></select>", "select"),
    ("<input name=p type=checkbox>", "checkbox"),
    ("<input name=p type=radio>", "radio"),
])
def test_parameter_kind_is_the_lower_cased_html_type(markup, kind):
    assert param(one_form(f"<form>{markup}</form>"), "p").kind == kind


@pytest.mark.parametrize("markup, kind", [
    ("<input type=submit name=b>", "submit"),
    ("<input type=image name=b>", "image"),
    ("<input type=reset name=b>", "reset"),
    ("<input type=button name=b>", "button"),
    ("<button name=b>Go</button>", "submit"),  # a <button> submits unless told otherwise
    ("<button name=b type=bogus>Go</button>", "submit"),
    ("<button name=b type=reset>Go</button>", "reset"),
    ("<button name=b type=button>Go</button>", "button"),
])
def test_buttons_are_kept_apart_from_parameters(markup, kind):
    form = one_form(f"<form><input name=q>{markup}</form>")
    assert [p.name for p in form.parameters] == ["q"]
    assert [(b.name, b.kind) for b in form.buttons] == [("b", kind)]


def test_button_label_is_its_caption():
    form = one_form("<form><input type=submit value=Search><button name=c value=clear><b>Clear</b> all</button>"
                    "<input type=image alt='Run BLAST' src=go.png></form>")
    assert [b.label for b in form.buttons] == ["Search", "Clear all", "Run BLAST"]
    assert form.buttons[1].value == "clear"


@pytest.mark.parametrize("markup, value", [
    ("<input name=p>", ""),
    ("<input name=p value='10'>", "10"),
    ("<input name=p value='a&#10;b'>", "ab"),  # text values lose their line breaks
    ("<input type=hidden name=p value='a&#10;b'>", "a\nb"),
    ("<textarea name=p></textarea>", ""),
    ("<textarea name=p>ACGT\nTTGA</textarea>", "ACGT\nTTGA"),
    ("<textarea name=p>\n&gt;probe\nACGT</textarea>", ">probe\nACGT"),  # the newline after the tag is dropped
    ("<textarea name=p>\n\nACGT</textarea>", "\nACGT"),
    ("<input type=file name=p>", ""),
])
def test_default_value(markup, value):
    assert param(one_form(f"<form>{markup}</form>"), "p").value == value


def test_single_select_defaults_to_its_first_option():
    form = one_form("<form><select name=db><option value=''>Choose a database</option>"
                    "<option value=nt>Nucleotide collection</option><option>est</option></select></form>")
    db = param(form, "db")
    assert db.value == ""
    assert db.options == (Option("", "Choose a database", True), Option("nt", "Nucleotide collection", False),
                          Option("est", "est", False))
    assert not db.multiple


@pytest.mark.parametrize("options, value", [
    ("<option>a<option selected>b<option>c", "b"),
    ("<option selected>a<option selected>b<option>c", "b"),  # the last one marked wins
    ("<option disabled>a<option>b<option>c", "b"),  # the first enabled one
    ("<optgroup disabled><option>a</optgroup><option>b", "b"),
    ("<option value=' x '>  spaced\n text </option>", " x "),
    ("<option>  spaced\n text </option>", "spaced text"),
    ("<option selected disabled>a<option>b", None),  # selected but disabled: nothing is sent
    ("", None),
])
def test_single_select_value(options, value):
    assert param(one_form(f"<form><select name=s>{options}</select></form>"), "s").value == value


def test_option_label_attribute_wins_over_its_text():
    option = param(one_form("<form><select name=s><option label=Short value=1>Long text</select></form>"),
                   "s").options[0]
    assert (option.value, option.label) == ("1", "Short")


def test_multiple_select_sends_every_selected_option():
    html = ("<form><select name=db multiple><option selected>nt<option>est<option selected>htgs"
            "<option selected disabled>gss</select></form>")
    db = param(one_form(html), "db")
    assert db.multiple
    assert [o.selected for o in db.options] == [True, False, True, True]
    assert sent(html) == [("db", "nt"), ("db", "htgs")]
    assert sent(html, {"db": ["est", "gss"]}) == [("db", "est"), ("db", "gss")]
    assert sent(html, {"db": []}) == []


def test_multiple_select_without_selection_sends_nothing():
    assert sent("<form><select name=db multiple><option>nt<option>est</select></form>") == []


def test_radio_group_is_one_parameter_at_its_first_member():
    html = ("<form><fieldset><legend>Program</legend>"
            "<label><input type=radio name=program value=blastp checked> blastp</label>"
            "<input name=expect value=10>"
            "<label><input type=radio name=program value=blastn> blastn</label>"
            "<input type=radio name=program id=tx value=tblastx><label for=tx>tblastx</label></fieldset></form>")
    form = one_form(html)
    assert [p.name for p in form.parameters] == ["program", "expect"]
    program = param(form, "program")
    assert (program.kind, program.value, program.label) == ("radio", "blastp", "Program")
    assert program.options == (Option("blastp", "blastp", True), Option("blastn", "blastn", False),
                               Option("tblastx", "tblastx", False))
    assert sent(html) == [("program", "blastp"), ("expect", "10")]
    assert sent(html, {"program": "blastn"}) == [("program", "blastn"), ("expect", "10")]


@pytest.mark.parametrize("radios, value", [
    ("<input type=radio name=r value=a><input type=radio name=r value=b>", None),  # none checked: not sent
    ("<input type=radio name=r value=a checked><input type=radio name=r value=b checked>", "b"),
    ("<input type=radio name=r checked>", "on"),
    ("<input type=radio name=r value=a checked disabled><input type=radio name=r value=b>", None),
])
def test_radio_group_value(radios, value):
    form = one_form(f"<form>{radios}</form>")
    assert param(form, "r").value == value
    assert form_data(form) == ([] if value is None else [("r", value)])


def test_checkboxes_send_only_when_checked():
    html = ("<form><input type=checkbox name=filter value=L checked><input type=checkbox name=megablast>"
            "<input type=checkbox name=lower checked></form>")
    form = one_form(html)
    assert [(p.name, p.value) for p in form.parameters] == [("filter", "L"), ("megablast", None), ("lower", "on")]
    assert sent(html) == [("filter", "L"), ("lower", "on")]
    assert sent(html, {"filter": None, "megablast": "on"}) == [("megablast", "on"), ("lower", "on")]


def test_checkbox_group_shares_a_name():
    html = ("<form><fieldset><legend>Databases</legend>"
            "<label><input type=checkbox name=db value=nt checked>nt</label>"
            "<label><input type=checkbox name=db value=est>est</label>"
            "<label><input type=checkbox name=db value=htgs checked>htgs</label></fieldset></form>")
    db = param(one_form(html), "db")
    assert (db.kind, db.multiple, db.value, db.label) == ("checkbox", True, "nt", "Databases")
    assert [(o.value, o.label, o.selected) for o in db.options] == [
        ("nt", "nt", True), ("est", "est", False), ("htgs", "htgs", True)]
    assert sent(html) == [("db", "nt"), ("db", "htgs")]
    assert sent(html, {"db": ["est"]}) == [("db", "est")]


def test_hidden_and_checkbox_of_one_name_both_send_and_the_assignment_fills_the_visible_one():
    html = "<form><input type=hidden name=agree value=0><input type=checkbox name=agree value=1></form>"
    assert sent(html) == [("agree", "0")]
    assert sent(html, {"agree": "1"}) == [("agree", "0"), ("agree", "1")]


def test_disabled_controls_are_kept_but_never_sent():
    html = ("<form><input name=a value=1 disabled><textarea name=b disabled>x</textarea>"
            "<fieldset disabled><legend>Opt <input name=c value=3></legend><input name=d value=4>"
            "<select name=e><option>5</select></fieldset>"
            "<fieldset disabled><legend>first</legend><legend><input name=f value=6></legend></fieldset>"
            "<input name=g value=7><input type=submit name=go value=Go disabled><input type=submit name=run value=Run>"
            "</form>")
    form = one_form(html)
    assert [(p.name, p.disabled) for p in form.parameters] == [
        ("a", True), ("b", True), ("c", False), ("d", True), ("e", True), ("f", True), ("g", False)]
    assert form.buttons[0].disabled
    assert sent(html) == [("c", "3"), ("g", "7"), ("run", "Run")]  # the first enabled submit button


def test_assigning_a_disabled_or_unknown_parameter_is_an_error():
    form = one_form("<form><input name=a disabled><input name=b></form>")
    with pytest.raises(ValueError, match="'a' is disabled"):
        form_request(form, {"a": "x"})
    with pytest.raises(ValueError, match="'sequence' does not exist"):
        form_request(form, {"sequence": "x"})


def test_form_attribute_joins_controls_outside_the_form_and_takes_controls_away():
    html = ("<input name=before form=blast value=0>"
            "<form id=blast action=run><input name=inside value=1>"
            "<input name=elsewhere form=other value=x><input name=nowhere form=missing value=y></form>"
            "<form id=other action=other></form>"
            "<textarea name=sequence form=blast>ACGT</textarea><button form=blast name=go value=1>Go</button>")
    blast, other = analyze_forms(html, PAGE)
    assert [p.name for p in blast.parameters] == ["before", "inside", "sequence"]
    assert [b.name for b in blast.buttons] == ["go"]
    assert [p.name for p in other.parameters] == ["elsewhere"]
    assert sent(html.replace("<form id=other action=other></form>", "")) == [
        ("before", "0"), ("inside", "1"), ("sequence", "ACGT"), ("go", "1")]


@pytest.mark.parametrize("markup, label", [
    ("<label for=s>Enter your nucleotide sequence</label><textarea id=s name=p></textarea>",
     "Enter your nucleotide sequence"),
    ("<label>Enter  <b>query</b>\n sequence <textarea name=p>ACGT</textarea> here</label>",
     "Enter query sequence here"),
    ("<label>Database <select name=p><option>nt</option></select></label>", "Database"),
    ("<label for=s>Query</label><label for=s>(FASTA)</label><input id=s name=p>", "Query (FASTA)"),
    ("<label for=x>Elsewhere</label><input name=p>", ""),
    ("<label for=s>Hidden</label><input type=hidden id=s name=p>", ""),
    ("<input name=p>", ""),
])
def test_label_text(markup, label):
    assert param(one_form(f"<form>{markup}</form>"), "p").label == label


def test_text_inputs_are_the_enabled_named_free_text_fields():
    form = one_form("<form><input name=email type=email><input name=q><input name=off disabled>"
                    "<textarea name=seq></textarea><input type=search name=s><input type=number name=n>"
                    "<input type=password name=pw><input type=hidden name=h><input></form>")
    assert [p.name for p in form.text_inputs()] == ["q", "seq", "s"]


# --- what the browser sends ---------------------------------------------------------------------------


def test_get_replaces_the_action_query_and_drops_the_fragment():
    form = one_form("<form action='search.cgi?CMD=Put&x=1#top'><input name=q value=''>"
                    "<input type=hidden name=CMD value=Get><input type=submit value=Search></form>")
    request = form_request(form, {"q": "acgt tt"})
    assert request.method == "GET"
    assert request.url == "http://bio.test/tools/search.cgi?q=acgt+tt&CMD=Get"
    assert request.body == b""


def test_get_without_parameters_still_drops_the_action_query():
    request = form_request(one_form("<form action='go?x=1'></form>"))
    assert urlsplit(request.url).query == ""


def test_post_urlencoded_body_and_content_type():
    form = one_form("<form method=post action='blast.cgi?CMD=Put'><input type=hidden name=SERVICE value=plain>"
                    "<textarea name=QUERY_DATA></textarea><input name=EXPECT value=10>"
                    "<input type=submit name=action value=Search></form>")
    request = form_request(form, {"QUERY_DATA": "ACGT&TT=1"})
    assert request.method == "POST"
    assert request.url == "http://bio.test/tools/blast.cgi?CMD=Put"  # a POST keeps the action's query
    assert request.headers[b"Content-Type"] == URLENCODED.encode()
    assert request.body == b"SERVICE=plain&QUERY_DATA=ACGT%26TT%3D1&EXPECT=10&action=Search"


def test_line_breaks_are_sent_as_crlf():
    html = "<form method=post><textarea name=seq></textarea></form>"
    assert sent(html, {"seq": ">probe\nACGT\rTT\r\nGG"}) == [("seq", ">probe\r\nACGT\r\nTT\r\nGG")]


def test_multipart_body_reads_back_with_the_email_parser():
    html = ("<form method=post enctype=multipart/form-data action=upload>"
            "<label for=s>Enter your nucleotide sequence</label><textarea id=s name=seq_input></textarea>"
            "<input type=file name=seq_file><input type=hidden name=job_title value='my job'>"
            "<input type=checkbox name=off value=1><button type=submit name=run value=yes>Run</button></form>")
    form = one_form(html)
    request = form_request(form, {"seq_input": "ACGT\nTTGA"})
    assert request.headers[b"Content-Type"].startswith(b"multipart/form-data; boundary=")
    assert multipart_parts(request) == [
        ("seq_input", None, b"ACGT\r\nTTGA"),
        ("seq_file", "", b""),  # no file chosen: an empty part with an empty file name
        ("job_title", None, b"my job"),
        ("run", None, b"yes"),
    ]


def test_multipart_file_parameter_assigned_uploads_its_value():
    form = one_form("<form method=post enctype=multipart/form-data><input type=file name=f></form>")
    assert multipart_parts(form_request(form, {"f": ">q\nACGT"})) == [("f", "query.txt", b">q\nACGT")]


def test_file_parameter_in_a_urlencoded_form_sends_the_file_name():
    assert sent("<form method=post><input type=file name=f><input name=q></form>") == [("f", ""), ("q", "")]


@pytest.mark.parametrize("buttons, expected", [
    ("", []),
    ("<input type=submit value=Search>", []),  # no name: nothing sent
    ("<input type=submit name=action>", [("action", "")]),
    ("<input type=reset name=r value=Clear><input type=submit name=action value=Search>", [("action", "Search")]),
    ("<input type=button name=b value=Help><button name=go value=1>Go</button>", [("go", "1")]),
    ("<input type=image name=run src=go.png>", [("run.x", "0"), ("run.y", "0")]),
    ("<input type=image src=go.png>", [("x", "0"), ("y", "0")]),
])
def test_default_button_is_the_first_submit_button(buttons, expected):
    assert sent(f"<form><input type=hidden name=h value=1>{buttons}</form>") == [("h", "1"), *expected]


def test_clicking_a_chosen_button():
    html = ("<form method=post><input name=q><input type=submit name=action value=Clear>"
            "<input type=submit name=action value=Search><input type=image name=map src=m.png>"
            "<input type=reset value=Reset></form>")
    form = one_form(html)
    clear, search, image, reset = form.buttons
    assert [b.value for b in form.submit_buttons()] == ["Clear", "Search", ""]
    assert sent(html, button=search) == [("q", ""), ("action", "Search")]
    assert sent(html, button=image) == [("q", ""), ("map.x", "0"), ("map.y", "0")]
    with pytest.raises(ValueError, match="not one of its enabled submit buttons"):
        form_request(form, button=reset)


def test_values_are_encoded_in_the_page_encoding():
    page = "<meta charset=iso-8859-1><form><input name=q value='caf\xe9'></form>"
    form = one_form(page.encode("latin-1"))
    assert form.encoding == "cp1252"  # what browsers (and Scrapy) use for latin-1
    assert urlsplit(form_request(form).url).query == "q=caf%E9"
    assert urlsplit(form_request(form, {"q": "\u03b1"}).url).query == "q=%26%23945%3B"  # &#945;, as browsers do
    assert one_form(page).encoding == "utf-8"  # text: the caller says, utf-8 by default
    assert one_form(page, encoding="latin-1").encoding == "cp1252"


def test_accept_charset_overrides_the_page_encoding():
    form = one_form("<form accept-charset='bogus ISO-8859-1'><input name=q></form>", encoding="utf-8")
    assert form.encoding == "cp1252"
    assert urlsplit(form_request(form, {"q": "\xe9"}).url).query == "q=%E9"


def test_request_keyword_arguments_reach_the_request():
    form = one_form("<form method=post><input name=q></form>")
    request = form_request(form, {"q": "x"}, headers={"User-Agent": "DynaBot"}, meta={"probe": 1},
                           dont_filter=True)
    assert request.headers[b"User-Agent"] == b"DynaBot"
    assert request.headers[b"Content-Type"] == URLENCODED.encode()
    assert request.meta["probe"] == 1 and request.dont_filter


@pytest.mark.parametrize("html", [
    "<form method=post action=r><input name=a value=1><select name=s><option>x<option selected>y</select>"
    "<input type=checkbox name=c checked><input type=radio name=r value=1><input type=radio name=r value=2 checked>"
    "<textarea name=t>text</textarea><input type=submit name=go value=Go></form>",
    "<form action='r?q=1'><input name=a value='caf\xe9 au lait'><select name=s><option>first</select></form>",
])
def test_defaults_agree_with_scrapys_form_request(html):
    response = HtmlResponse(PAGE, body=html.encode("utf-8"), encoding="utf-8")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ScrapyDeprecationWarning)
        theirs = FormRequest.from_response(response)
    ours = form_request(analyze_forms(response.body, response.url, response.encoding)[0])
    assert (ours.method, ours.url) == (theirs.method, theirs.url)
    assert sorted(parse_qsl(ours.body.decode())) == sorted(parse_qsl(theirs.body.decode()))
