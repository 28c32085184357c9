"""Which forms DynaBot may submit: queries, never forms with side effects (pure; no Scrapy here).

A crawler that submits a contact, comment, sign-up, log-in, order or subscription form sends
mail, creates accounts and records, or tries credentials on someone else's server. DynaBot
submits only what a reasonable person would call a query (DESIGN.md, "Safety by default"):

- a GET form, or a POST form at a vertex the service class marks as a query form
  (``post="true"``: a BLAST search posts its sequence);
- that has no field asking for a password, an e-mail address, a message or comment, a
  payment, a postal address, personal details or a file to upload. A field is judged by its
  input type, name, id, label, placeholder and autocomplete tokens; the class may tolerate
  e-mail and upload fields in its query forms (``allow="email upload"``: a BLAST form's
  "e-mail me the results" box, its "or upload a file"); an e-mail field is then left empty;
- that does not present itself as one of those forms: its action URL, button captions, the
  form's id, name and class, and the heading a reader sees above it.

:func:`classify` gives the verdict with its reason (for the trace and the statistics).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from webrace.dynabot.forms import SUBMIT_KINDS, Form, Parameter

QUERY = "query"

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_SEPARATORS = re.compile(r"[^a-z0-9]+")


def _words(*texts: str) -> str:
    """Lower-case words separated by single spaces, padded: camelCase, snake_case, ids and URL
    pieces split (``id_email`` -> `` id email ``, ``loginForm`` -> `` login form ``)."""
    joined = " ".join(_CAMEL.sub(" ", t or "") for t in texts).lower()
    return " " + " ".join(_SEPARATORS.split(joined)).strip() + " "


# Fields (their name, id, label, placeholder; autocomplete tokens apart)
_MAIL = re.compile(r" (e ?mail|email|emails|mail|mailto) ")
_MESSAGE = re.compile(r" (message|messages|msg|comment|comments|body|feedback|remarks?|description|reply|review|"
                r"enquiry|inquiry|complaint|testimonial) ")
_PAYMENT = re.compile(r" (card ?number|credit ?card|debit ?card|cvv|cvc|csc|cc ?(number|num|exp|csc)|iban|bic|"
                r"expiry|expiration|billing|payment) ")
_ADDRESS = re.compile(r" (street|address|addresses|addr|zip|zip ?code|zipcode|postal ?code|post ?code|postcode|"
                r"shipping) ")
_PERSONAL = re.compile(r" (real ?name|full ?name|first ?name|last ?name|surname|given ?name|family ?name|your name|"
                 r"phone|telephone|mobile|birthday|date of birth|birth ?date|username|user ?name|login|submitter) ")
_AUTOCOMPLETE = {  # https://html.spec.whatwg.org/#autofill-field: token prefix -> what the field asks for
    "email": "mail", "current-password": "password", "new-password": "password", "one-time-code": "password",
    "cc-": "payment", "transaction-": "payment", "street-address": "address", "address-": "address",
    "postal-code": "address", "country": "address", "name": "personal", "given-name": "personal",
    "family-name": "personal", "additional-name": "personal", "honorific-": "personal", "nickname": "personal",
    "tel": "personal", "bday": "personal", "username": "personal", "organization": "personal",
}

# What a form presents itself as (action, buttons, the form's attributes, its heading)
_KINDS = (
    ("login", re.compile(r" (log ?in|logon|log ?on|sign ?in|signin|login|authenticate|forgot password|"
                   r"reset password) ")),
    ("sign-up", re.compile(r" (sign ?up|signup|register|registration|registering|create (an |my |your )?account|"
                     r"join (us|now)|enrol|enroll) ")),
    ("contact", re.compile(r" (contact|contact us|feedback|enquiry|inquiry|get in touch|send (us )?(a |your )?message|"
                     r"write to us) ")),
    ("comment", re.compile(r" (comment|comments|add comment|reply|guestbook|post (a )?(comment|reply|review)|"
                     r"leave a (comment|reply|review)|write a review) ")),
    ("order", re.compile(r" (place (an |your )?order|order now|your order|order form|orders|checkout|check out|"
                         r"cart|basket|buy|purchase|pay|payment|donate|donation|add to cart|book now) ")),
    ("subscription", re.compile(r" (subscribe|subscription|unsubscribe|newsletter|mailing list|notify me) ")),
    ("ticket", re.compile(r" (new ?ticket|newticket|create ticket|new issue|create issue|open (an |a )?issue|"
                    r"report (a )?bug|file (a )?(ticket|bug|issue)) ")),
    ("submission", re.compile(r" (deposit|submit (your |a |new )?(entry|record|manuscript|article|story|link)) ")),
    ("change", re.compile(r" (delete|remove|purge|publish|save changes) ")),
)


_FORMS = {
    "login": "a log-in form", "sign-up": "a sign-up form", "contact": "a contact form", "comment": "a comment form",
    "order": "an order or payment form", "subscription": "a subscription form", "ticket": "a form filing a ticket",
    "submission": "a submission form", "change": "a form that changes data",
    "mail": "a form asking for an e-mail address", "address": "a form asking for a postal address",
    "personal": "a form asking for personal details", "upload": "a form uploading a file",
}


_PRIORITY = ("sign-up", "login", "order", "contact", "comment", "ticket", "submission", "subscription", "change",
             "upload", "mail", "address", "personal")  # the name a form is given when it shows several


@dataclass(frozen=True)
class Verdict:
    """Whether a form may be submitted, and why not."""

    kind: str  # QUERY, or what the form is taken for: "login", "sign-up", "contact", "post", "mail", ...
    reason: str = ""  # one line for the trace: which field or word decided

    @property
    def query(self) -> bool:
        return self.kind == QUERY


def field_kind(parameter: Parameter) -> str | None:
    """What a field asks for that no query needs: "password", "mail", "message", "payment",
    "address", "personal", "upload"; None for a field a query may have."""
    if parameter.kind == "password":
        return "password"
    if parameter.kind == "file":
        return "upload"
    if parameter.kind in ("hidden", "submit", "image", "reset", "button"):
        return None
    for token in parameter.autocomplete.split():
        for prefix, kind in _AUTOCOMPLETE.items():
            if token == prefix or (prefix.endswith("-") and token.startswith(prefix)):
                return kind
    if parameter.kind == "email":
        return "mail"
    if parameter.kind == "tel":
        return "personal"
    said = _words(parameter.name, parameter.id, parameter.label, parameter.placeholder)
    if _PAYMENT.search(said):
        return "payment"
    if parameter.kind == "textarea" and _MESSAGE.search(said):
        return "message"
    if _MAIL.search(said):
        return "mail"
    if _ADDRESS.search(said):
        return "address"
    if _PERSONAL.search(said):
        return "personal"
    return None


def is_mail(parameter: Parameter) -> bool:
    """A field for an e-mail address: never filled in by a probe (a service would write to it)."""
    return field_kind(parameter) == "mail"


_FIELD_FORMS = {  # what a form with such a field is taken for
    "password": "login", "mail": "mail", "message": "contact", "payment": "order", "address": "address",
    "personal": "personal", "upload": "upload",
}
_FIELD_WORDS = {  # in the order they tell most about a form
    "password": "a password field", "payment": "a payment field", "message": "a field for a message",
    "mail": "a field for an e-mail address", "upload": "a file upload", "address": "a field for a postal address",
    "personal": "a field for personal details",
}


@dataclass(frozen=True)
class _Found:
    form: str  # what the form is taken for
    why: str  # for the trace
    field: str = ""  # the field's kind, when a field told it


def _fields(form: Form, allow: frozenset[str]) -> list[_Found]:
    """The fields no query needs (but those the class tolerates), the most telling first."""
    found = []
    signing_up = sum(p.kind == "password" for p in form.parameters) > 1 or any(
        "new-password" in p.autocomplete for p in form.parameters)
    for parameter in form.parameters:
        kind = field_kind(parameter)
        if kind is None or (kind == "mail" and "email" in allow) or (kind == "upload" and "upload" in allow):
            continue
        what = _FIELD_FORMS[kind]
        if kind == "message" and " comment" in _words(parameter.name, parameter.id, parameter.label,
                                                        parameter.placeholder):
            what = "comment"
        elif kind == "password" and signing_up:
            what = "sign-up"
        name = parameter.name or parameter.id or parameter.label or parameter.kind
        found.append(_Found(what, f"{_FIELD_WORDS[kind]} ({name})", kind))
    return sorted(found, key=lambda f: list(_FIELD_WORDS).index(f.field))


def presented(form: Form) -> list[tuple[str, str]]:
    """What the form presents itself as, from its action URL, its buttons, its attributes and the
    heading above it: (kind, "the button 'Send' says 'send'") pairs."""
    action = urlsplit(form.action)
    places = [
        ("the action URL", _words(unquote(action.path), unquote(action.query))),
        ("the form's attributes", _words(form.attributes)),
        ("the heading", _words(form.heading)),
    ]
    for button in form.buttons:
        if button.kind in SUBMIT_KINDS and not button.disabled:
            caption = button.label or button.value or button.name
            places.append((f"the button {caption!r}", _words(button.name, button.value or "", button.label)))
    found = []
    for where, said in places:
        for kind, pattern in _KINDS:
            if hit := pattern.search(said):
                found.append((kind, f"{where} says {hit.group(0).strip()!r}"))
    return found


def classify(form: Form, *, post_query: bool = False, allow: frozenset[str] = frozenset()) -> Verdict:
    """May DynaBot submit ``form``? ``post_query``: the service class calls a POST form at this
    vertex a query; ``allow``: the fields its query forms may carry ("email", "upload")."""
    fields, words = _fields(form, allow), presented(form)
    if fields or words:
        # a password field says what the form is; else what the form says of itself; else its fields
        told = [f.form for f in fields if f.field == "password"] or [k for k, _ in words] or [f.form for f in fields]
        kind = min(told, key=_PRIORITY.index)
        reasons = list(dict.fromkeys([why for _, why in words[:2]] + [f.why for f in fields[:3]]))
        return Verdict(kind, f"{_FORMS[kind]}: " + "; ".join(reasons))
    if form.method == "POST" and not post_query:
        return Verdict("post", "a POST form, and the service class does not call POST forms queries "
                               '(post="true" on its form vertex)')
    return Verdict(QUERY)
