"""Form analysis for DynaBot's service analyzer (seed 004, section 2.4.2), and the probe requests.

A source's forms are the seed's ``f = (P, B)``: parameters ``p = (t, i, v)`` (kind, name,
default value) and buttons. ``analyze_forms`` reads them from a page the way a browser would
(controls outside the ``<form>`` element joined by ``form="id"``, radio groups, the effective
selection of a ``<select>``, disabled controls and fieldsets, labels); ``form_request`` builds
the request a browser sends when a user fills some parameters and clicks a button.

Only ``form_request`` uses Scrapy; the rest works on plain values.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from urllib.parse import urldefrag, urlencode, urljoin, urlsplit, urlunsplit

import lxml.html
from lxml import etree
from scrapy import Request
from scrapy.http import Headers
from urllib3 import encode_multipart_formdata
from w3lib.encoding import html_to_unicode, resolve_encoding
from w3lib.html import strip_html5_whitespace

URLENCODED = "application/x-www-form-urlencoded"
MULTIPART = "multipart/form-data"
INPUT_KINDS = frozenset(
    "hidden text search tel url email password date month week time datetime-local number range color "
    "checkbox radio file submit image reset button".split()
)
BUTTON_KINDS = frozenset({"submit", "image", "reset", "button"})
SUBMIT_KINDS = frozenset({"submit", "image"})  # the buttons that send the form
TEXT_KINDS = frozenset({"text", "search", "textarea"})  # where a free-text argument can go
GROUP_KINDS = frozenset({"radio", "checkbox"})  # members sharing a name make one parameter
_NO_NEWLINES = frozenset({"text", "search", "tel", "password", "url", "email"})  # value sanitization
_CONTROLS = ("input", "select", "textarea", "button")
_LONE_NEWLINE = re.compile(r"\r\n|\r|\n")



@dataclass(frozen=True)
class Option:
    """A ``<select>`` option, or one member of a radio or checkbox group."""

    value: str
    label: str
    selected: bool  # selected / checked as the page loads (a single select always has one)
    disabled: bool = False  # never sent


@dataclass(frozen=True)
class Parameter:
    """One control (the seed's ``p = (t, i, v)``), or one button."""

    name: str
    kind: str  # the lower-cased HTML type; "textarea", "select"; unknown input types are "text"
    value: str | None  # what a browser sends untouched; None: nothing
    options: tuple[Option, ...] = ()  # select options, or the members of a radio / checkbox group
    multiple: bool = False  # a multiple select, or a checkbox group of several members
    label: str = ""  # associated <label> text (a group: its fieldset legend); buttons: their caption
    disabled: bool = False  # never sent (a group: all its members are)
    id: str = ""  # the control's id (a group: its first member's)
    placeholder: str = ""  # what the empty field shows
    autocomplete: str = ""  # the autocomplete tokens, lower-case ("email", "current-password", "cc-number")


@dataclass(frozen=True)
class Form:
    """One form of a page (the seed's ``f = (P, B)``)."""

    index: int  # position among the page's <form> elements, as Scrapy's formnumber
    action: str  # absolute URL
    method: str  # "GET" or "POST"
    enctype: str  # URLENCODED or MULTIPART
    parameters: tuple[Parameter, ...]  # document order; a radio or checkbox group at its first member
    buttons: tuple[Parameter, ...]  # submit, image, reset and button controls
    encoding: str = "utf-8"  # what the values are encoded with when sent
    attributes: str = ""  # the <form> element's id, name and class, what a page calls its form
    heading: str = ""  # the nearest heading or legend before the form (or its first inside): what it is for

    def text_inputs(self) -> list[Parameter]:
        """The parameters a free-text argument (a sequence, a keyword) can be typed into."""
        return [p for p in self.parameters if p.kind in TEXT_KINDS and p.name and not p.disabled]

    def submit_buttons(self) -> list[Parameter]:
        """The buttons that send the form, the default one first."""
        return [b for b in self.buttons if b.kind in SUBMIT_KINDS and not b.disabled]


@dataclass(frozen=True)
class Upload:
    """A file part of a multipart body."""

    filename: str
    content: str
    content_type: str = "application/octet-stream"


Entry = tuple[str, str | Upload]
Assignment = Mapping[str, str | Sequence[str] | None]


# ---------------------------------------------------------------------------------------------
# Analysis
# ---------------------------------------------------------------------------------------------


def analyze_forms(html: str | bytes, url: str, encoding: str | None = None) -> list[Form]:
    """The forms of the page ``html`` fetched from ``url``, in document order.

    ``encoding`` is the page's (Scrapy's ``response.encoding``); for bytes without one it is
    detected as Scrapy does (BOM, ``<meta charset>``, else utf-8). Forms submit in it unless
    they name another with ``accept-charset``.
    """
    text, encoding = _decode(html, encoding)
    root = _parse(text)
    if root is None:
        return []
    base = base_url(root, url)
    forms = root.xpath("//form")
    ids: dict[str, etree._Element] = {}
    for el in root.iter():
        if isinstance(el.tag, str) and el.get("id"):
            ids.setdefault(el.get("id"), el)
    owned = _owned_controls(root, forms, ids)
    labels = _labels(root, ids)
    return [_form(n, f, owned[n], labels, url, base, encoding) for n, f in enumerate(forms)]


def _decode(html: str | bytes, encoding: str | None) -> tuple[str, str]:
    if isinstance(html, bytes):
        content_type = f"text/html; charset={encoding}" if encoding else None
        encoding, text = html_to_unicode(content_type, html)
    else:
        text = html
    return text, _codec_name(encoding) or "utf-8"


def _codec_name(encoding: str | None) -> str | None:
    resolved = resolve_encoding(encoding) if encoding else None
    return codecs.lookup(resolved).name if resolved else None


def _parse(text: str) -> etree._Element | None:
    # lxml refuses str with an XML encoding declaration, so hand it utf-8 bytes instead.
    parser = lxml.html.HTMLParser(encoding="utf-8")
    try:
        return lxml.html.document_fromstring(text.encode("utf-8", "replace"), parser=parser)
    except etree.ParserError:  # nothing but whitespace
        return None


def base_url(root: etree._Element, url: str) -> str:
    """The page's ``<base href>`` resolved against its URL, else its URL."""
    href = root.xpath("string((//base[@href])[1]/@href)")
    href = strip_html5_whitespace(href)
    return urljoin(url, href) if href else url


def _owned_controls(root, forms, ids) -> list[list[etree._Element]]:
    """Each form's controls in document order: its descendants, and those naming it in form=."""
    position = {form: n for n, form in enumerate(forms)}
    owned: list[list[etree._Element]] = [[] for _ in forms]
    for el in root.iter(*_CONTROLS):
        if el.get("form") is not None:
            owner = ids.get(el.get("form"))  # the attribute wins even when it names no form
        else:
            owner = next(el.iterancestors("form"), None)
        if owner in position:
            owned[position[owner]].append(el)
    return owned


def _labels(root, ids) -> dict[etree._Element, str]:
    texts: dict[etree._Element, list[str]] = {}
    for label in root.iter("label"):
        target = _labelled_control(label, ids)
        if target is not None:
            texts.setdefault(target, []).append(_text(label))
    return {el: " ".join(t for t in found if t) for el, found in texts.items()}


def _labelled_control(label, ids) -> etree._Element | None:
    if label.get("for") is not None:
        target = ids.get(label.get("for"))
        return target if target is not None and _labelable(target) else None
    return next((el for el in label.iter(*_CONTROLS) if _labelable(el)), None)


def _labelable(el) -> bool:
    return el.tag in _CONTROLS and not (el.tag == "input" and (el.get("type") or "").lower() == "hidden")


def _text(el) -> str:
    """Rendered text of ``el`` without the text of controls inside it, whitespace collapsed."""
    return " ".join(_raw_text(el).split())


def _raw_text(el) -> str:
    parts = [el.text or ""]
    for child in el:
        if isinstance(child.tag, str) and child.tag not in ("select", "textarea", "button", "script", "style"):
            parts.append(_raw_text(child))
        parts.append(child.tail or "")
    return "".join(parts)


def _form(index, form, controls, labels, url, base, encoding) -> Form:
    action = strip_html5_whitespace(form.get("action") or "")
    enctype = (form.get("enctype") or "").strip().lower()
    return Form(
        index=index,
        action=urljoin(base, action) if action else url,
        method="POST" if (form.get("method") or "").strip().lower() == "post" else "GET",
        enctype=MULTIPART if enctype == MULTIPART else URLENCODED,
        parameters=tuple(_parameters(controls, labels)),
        buttons=tuple(_button(el, labels) for el in controls if _kind(el) in BUTTON_KINDS),
        encoding=_accept_charset(form) or encoding,
        attributes=" ".join(filter(None, (form.get(a) for a in ("id", "name", "class"))))[:300],
        heading=_heading(form),
    )


_HEADINGS = frozenset({"h1", "h2", "h3", "h4", "h5", "h6", "legend"})
_LAST_HEADING = etree.XPath("(descendant-or-self::*[self::h1 or self::h2 or self::h3 or self::h4 or self::h5 or "
                            "self::h6 or self::legend])[last()]")
_HEADING_LEVELS = 6  # ancestors of the form looked through for a heading before it
_HEADING_SIBLINGS = 8  # preceding siblings looked at per level: "near" the form, and bounded on huge pages


def _heading(form) -> str:
    """The heading a reader sees for the form: the nearest heading before it in its section (the
    closest preceding sibling of the form, or of one of its ancestors, that is or holds a heading),
    else the first heading inside it."""
    node = form
    for _ in range(_HEADING_LEVELS):
        if node is None:
            break
        for n, sibling in enumerate(node.itersiblings(preceding=True)):
            if n >= _HEADING_SIBLINGS:
                break
            if isinstance(sibling.tag, str) and (found := _LAST_HEADING(sibling)):
                return _text(found[0])[:200]
        node = node.getparent()
    inside = next(form.iter(*_HEADINGS), None)
    return _text(inside)[:200] if inside is not None else ""

def _accept_charset(form) -> str | None:
    for token in (form.get("accept-charset") or "").replace(",", " ").split():
        if name := _codec_name(token):
            return name
    return None


def _kind(el) -> str:
    kind = (el.get("type") or "").lower()
    if el.tag == "input":
        return kind if kind in INPUT_KINDS else "text"
    if el.tag == "button":
        return kind if kind in ("submit", "reset", "button") else "submit"
    return el.tag  # select, textarea


def _parameters(controls, labels) -> Iterator[Parameter]:
    groups: dict[tuple[str, str], list[etree._Element]] = {}
    order: list[etree._Element | tuple[str, str]] = []
    for el in controls:
        kind = _kind(el)
        if kind in BUTTON_KINDS:
            continue
        name = el.get("name") or ""
        if kind in GROUP_KINDS and name:
            if (kind, name) not in groups:
                order.append((kind, name))
            groups.setdefault((kind, name), []).append(el)
        else:
            order.append(el)
    for item in order:
        if isinstance(item, tuple):
            yield _group(item[0], item[1], groups[item], labels)
        elif item.tag == "select":
            yield _select(item, labels)
        else:
            yield _single(item, labels)


def _single(el, labels) -> Parameter:
    kind = _kind(el)
    if kind in GROUP_KINDS:  # a nameless radio or checkbox: never sent, but part of the form
        return _group(kind, "", [el], labels)
    if kind == "textarea":
        value = el.value or ""
        value = value[2:] if value.startswith("\r\n") else value[1:] if value.startswith("\n") else value
    elif kind == "file":
        value = ""  # the file name: none chosen
    else:
        value = el.get("value") or ""
        if kind in _NO_NEWLINES:
            value = value.replace("\r", "").replace("\n", "")
    return Parameter(el.get("name") or "", kind, value, label=labels.get(el, ""), disabled=_disabled(el), **_marks(el))


def _marks(el) -> dict[str, str]:
    """What a control says of itself besides its name: id, placeholder, autocomplete."""
    return {"id": el.get("id") or "", "placeholder": " ".join((el.get("placeholder") or "").split())[:200],
            "autocomplete": " ".join((el.get("autocomplete") or "").lower().split())[:200]}


def _group(kind, name, members, labels) -> Parameter:
    """A radio group (one checked member at most, the last one checked wins) or checkboxes."""
    checked = [el.get("checked") is not None for el in members]
    if kind == "radio" and any(checked):
        last = len(checked) - 1 - checked[::-1].index(True)
        checked = [n == last for n in range(len(checked))]
    options = tuple(
        Option(el.get("value") if el.get("value") is not None else "on", labels.get(el) or _beside(el), on,
               _disabled(el))
        for el, on in zip(members, checked, strict=True)
    )
    label = labels.get(members[0], "")
    if len(members) > 1:  # the members' own labels name the choices; a legend names the group
        fieldset = next(members[0].iterancestors("fieldset"), None)
        legend = fieldset.find("legend") if fieldset is not None else None
        label = _text(legend) if legend is not None else ""
    sent = [o.value for o in options if o.selected and not o.disabled]
    return Parameter(name, kind, sent[0] if sent else None, options, multiple=kind == "checkbox" and len(members) > 1,
                     label=label, disabled=all(o.disabled for o in options), **_marks(members[0]))


def _beside(el) -> str:
    """The text a browser shows right after a radio button or checkbox that has no <label>
    (``<input type=checkbox name=db value=v1> Viral proteins<br>``): up to the next element."""
    return " ".join((el.tail or "").split())[:120]


def _select(el, labels) -> Parameter:
    multiple = el.get("multiple") is not None
    found = [_option(opt) for opt in el.iter("option")]
    marked = [o.selected for o in found]
    if not multiple and found:
        # a single select shows one option: the last one marked selected, else the first enabled one
        if any(marked):
            pick = len(marked) - 1 - marked[::-1].index(True)
        else:
            pick = next((n for n, o in enumerate(found) if not o.disabled), None)
        marked = [n == pick for n in range(len(found))]
    options = tuple(Option(o.value, o.label, on, o.disabled) for o, on in zip(found, marked, strict=True))
    sent = [o.value for o in options if o.selected and not o.disabled]
    return Parameter(el.get("name") or "", "select", sent[0] if sent else None, options, multiple,
                     labels.get(el, ""), _disabled(el), **_marks(el))


def _option(opt) -> Option:
    text = " ".join(opt.text_content().split())
    value = opt.get("value")
    group = opt.getparent()
    disabled = opt.get("disabled") is not None or (group.tag == "optgroup" and group.get("disabled") is not None)
    return Option(text if value is None else value, opt.get("label") or text, opt.get("selected") is not None,
                  disabled)


def _button(el, labels) -> Parameter:
    kind = _kind(el)
    if el.tag == "button":
        caption = _text(el)
    else:
        caption = el.get("value") or el.get("alt") or ""
    return Parameter(el.get("name") or "", kind, el.get("value") or "", label=labels.get(el) or caption,
                     disabled=_disabled(el), **_marks(el))


def _disabled(el) -> bool:
    """Disabled itself, or inside a disabled fieldset but not in that fieldset's first legend."""
    if el.get("disabled") is not None:
        return True
    child = el
    for ancestor in el.iterancestors():
        if ancestor.tag == "fieldset" and ancestor.get("disabled") is not None:
            if child is not ancestor.find("legend"):
                return True
        child = ancestor
    return False


# ---------------------------------------------------------------------------------------------
# Submission
# ---------------------------------------------------------------------------------------------


def form_data(form: Form, assignment: Assignment | None = None, *, button: Parameter | None = None) -> list[Entry]:
    """The name-value entries a browser sends: defaults, overridden by ``assignment``, then the button.

    ``assignment`` maps a parameter name to a value, a list of values (a multiple select, a
    checkbox group) or None (not sent: an unchecked box). It fills the first enabled parameter
    of that name, a visible one before a hidden one. A file parameter's value becomes the
    content of an uploaded ``query.txt``.
    """
    assignment = assignment or {}
    targets = _targets(form, assignment)
    entries: list[Entry] = []
    for p in form.parameters:
        if p.disabled or not p.name:
            continue
        values = _values(assignment[p.name]) if targets.get(p.name) is p else _defaults(p)
        for value in values:
            entries.append((p.name, _upload(value) if p.kind == "file" else value))
    return entries + _click(form, button)


def _targets(form: Form, assignment: Assignment) -> dict[str, Parameter]:
    targets = {}
    for name in assignment:
        enabled = [p for p in form.parameters if p.name == name and not p.disabled]
        if not enabled:
            known = [p for p in form.parameters if p.name == name]
            problem = "is disabled" if known else "does not exist"
            raise ValueError(f"form {form.index} of {form.action}: parameter {name!r} {problem}")
        targets[name] = next((p for p in enabled if p.kind != "hidden"), enabled[0])
    return targets


def _values(value: str | Sequence[str] | None) -> list[str]:
    if value is None:
        return []
    return [value] if isinstance(value, str) else list(value)


def _defaults(p: Parameter) -> list[str]:
    if p.kind in GROUP_KINDS or p.kind == "select":
        return [o.value for o in p.options if o.selected and not o.disabled]
    return [] if p.value is None else [p.value]


def _upload(value: str) -> Upload:
    return Upload("query.txt", value, "text/plain") if value else Upload("", "")


def _click(form: Form, button: Parameter | None) -> list[Entry]:
    if button is None:
        button = next(iter(form.submit_buttons()), None)
        if button is None:
            return []
    elif button not in form.submit_buttons():
        raise ValueError(f"form {form.index} of {form.action}: {button.name or button.label!r} is not one of "
                         f"its enabled submit buttons")
    if button.kind == "image":  # clicked at its top left corner
        prefix = f"{button.name}." if button.name else ""
        return [(prefix + "x", "0"), (prefix + "y", "0")]
    return [(button.name, button.value or "")] if button.name else []


def form_request(form: Form, assignment: Assignment | None = None, *, button: Parameter | None = None,
                 **request_kwargs) -> Request:
    """The request a browser sends for ``form`` filled with ``assignment`` when ``button`` is clicked
    (default: the first enabled submit button). ``request_kwargs`` go to ``scrapy.Request``."""
    entries = form_data(form, assignment, button=button)
    url = urldefrag(form.action)[0]
    headers = Headers(request_kwargs.pop("headers", None) or {})
    if form.method == "GET":  # the query replaces the action's own
        url = urlunsplit(urlsplit(url)._replace(query=urlencoded(entries, form.encoding)))
        return Request(url, method="GET", headers=headers, encoding=form.encoding, **request_kwargs)
    if form.enctype == MULTIPART:
        body, content_type = multipart(entries, form.encoding)
    else:
        body, content_type = urlencoded(entries, form.encoding).encode("ascii"), URLENCODED
    headers[b"Content-Type"] = content_type
    return Request(url, method="POST", body=body, headers=headers, encoding=form.encoding, **request_kwargs)


def urlencoded(entries: Sequence[Entry], encoding: str) -> str:
    """application/x-www-form-urlencoded, as browsers write it (a file entry sends its name)."""
    pairs = [
        (_encode(_crlf(name), encoding), _encode(_crlf(v.filename if isinstance(v, Upload) else v), encoding))
        for name, v in entries
    ]
    return urlencode(pairs)


def multipart(entries: Sequence[Entry], encoding: str) -> tuple[bytes, str]:
    """A multipart/form-data body and its Content-Type (with the boundary)."""
    fields: list = []
    for name, value in entries:
        if isinstance(value, Upload):
            fields.append((_crlf(name), (value.filename, _encode(value.content, encoding), value.content_type)))
        else:
            fields.append((_crlf(name), _encode(_crlf(value), encoding)))
    return encode_multipart_formdata(fields)


def _crlf(text: str) -> str:
    """Browsers send every line break in a name or value as CRLF."""
    return _LONE_NEWLINE.sub("\r\n", text)


def _encode(text: str, encoding: str) -> bytes:
    # Characters the form's encoding lacks go as numeric character references, as browsers do.
    return text.encode(encoding, "xmlcharrefreplace")
