"""DynaBot's service analyzer (seed 004, section 2.4.2), as plain functions over a page's
forms and a service class description: no Scrapy here, the spider sends what this plans.

- :func:`form_filter` (Algorithm 1): a form stays only if, for some example (probing
  template), every required argument has a parameter that can take it, and it has no
  password field;
- :func:`plan_probes` (Algorithm 2, ordered): the probes for a source, likeliest first. An
  argument goes into a parameter its hints name (earlier hints, whole-name matches and
  label matches weigh more), of an input type its ``inputType`` hint accepts; a select or a
  radio group takes it only through an option that matches its value. Optional arguments
  are filled only where a hint names a parameter; an iterator argument turns into one probe
  per matching option. The button is the one a person would click (not "Clear" or "Reset").
  Budgets cap the probes per form and per source;
- :func:`next_step` (the response matcher): a response is compared with the successors of
  the current vertex of the control flow graph: a result vertex whose type is found in the
  page (its markup, then its text) ends the analysis with a match; an intermediate
  ``HTMLform`` vertex is followed by submitting the page's new form with its defaults; an
  intermediate vertex of another type is followed through the links inside the matched
  text (a "your results are ready" page).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from html import escape
from typing import Any
from urllib.parse import urldefrag, urljoin

import lxml.html
from lxml import etree
from w3lib.html import get_meta_refresh, strip_html5_whitespace

from scd import Argument, Example, Match, ServiceClass, Vertex, is_form_type
from webrace.dynabot.answers import class_words, fits, specific, words
from webrace.dynabot.forms import TEXT_KINDS, Form, Parameter, base_url
from webrace.dynabot.sideeffects import is_mail
from webrace.urls import in_scope

# what people click to send a form, and what they do not
_GO = re.compile(r"search|submit|run|blast|go\b|find|query|send|start|view|ok\b|align|compute|execute", re.I)
_STOP = re.compile(r"clear|reset|cancel|back|delete|remove|help|login|log in|sign", re.I)
LINKS_PER_PAGE = 3  # links of an intermediate page followed, at most
TEXTAREA_FITS = 0.25  # added for a textarea taking a long or multi-line value
OPTION_FITS = 0.5  # score of an optional argument in a choosable parameter no hint names, whose option fits it
FILE_COST = 0.5  # taken off a file input's score: a value is typed before it is uploaded


@dataclass(frozen=True)
class Probe:
    """One way to query a source: a form, the example it comes from, which parameter each
    argument went into, and the values sent (the other parameters keep their defaults)."""

    form: Form
    example: int  # index in the service class's examples
    arguments: dict[str, str]  # argument name -> parameter name
    assignment: dict[str, str]  # parameter name -> value
    button: Parameter | None
    score: float
    why: str = ""  # why this probe was chosen, for the trace
    control: bool = False  # the control probe of a claim: a value that cannot match (webrace.dynabot.evidence)

    def key(self) -> tuple:
        """What makes two probes the same request: form, values sent, button."""
        sent = tuple(sorted((k, v if isinstance(v, str) else tuple(v or ())) for k, v in self.assignment.items()))
        button = (self.button.name, self.button.value) if self.button else None
        return self.form.index, self.form.action, self.form.method, sent, button

    def values(self, example: Example) -> dict[str, str]:
        """Argument name -> the value sent (what ``{arg:NAME}`` in a type refers to)."""
        sent = {a.name: value for a in example.arguments if (p := self.arguments.get(a.name))
                and isinstance(value := self.assignment.get(p), str)}
        return {**example.values(), **sent}


def _search(pattern: str, text: str) -> re.Match | None:
    try:
        return re.search(pattern, text)
    except re.error:
        return None


def _full(pattern: str, text: str) -> bool:
    try:
        return re.fullmatch(pattern, text) is not None
    except re.error:
        return pattern == text


def hint_score(argument: Argument, parameter: Parameter) -> float:
    """How strongly the argument's name hints point at this parameter (0: not at all).
    Earlier hints weigh more; a hint matching the whole name more than a part of it; the
    parameter's label counts too, a little less."""
    best = 0.0
    count = len(argument.name_hints)
    for rank, hint in enumerate(argument.name_hints):
        weight = 2.0 * (count - rank)
        if parameter.name and _full(hint, parameter.name):
            best = max(best, weight + 1.0)
        elif parameter.name and _search(hint, parameter.name):
            best = max(best, weight)
        elif parameter.label and _search(hint, parameter.label):
            best = max(best, weight - 0.5)
    return best


def choose_option(argument: Argument, parameter: Parameter) -> list[str]:
    """The options of a select, radio or checkbox group that take the argument's value (its value
    is a regex over them, as appendix A writes iterator and program arguments; see ``fits``)."""
    found = []
    for option in parameter.options:
        if option.disabled or not option.value.strip():
            continue
        if fits(argument, option.value, option.label):
            found.append(option.value)
    return found


def accepts(argument: Argument, parameter: Parameter) -> bool:
    """Can this parameter take the argument at all (kind and options; not the hints)."""
    if parameter.disabled or not parameter.name or parameter.kind in ("hidden", "submit", "image", "reset", "button"):
        return False
    if parameter.kind in ("select", "radio", "checkbox"):
        return bool(choose_option(argument, parameter))
    if parameter.kind == "file":  # a long text can be uploaded as a file, where nothing else takes it
        return argument.required and (not argument.input_types or _full(argument.input_types, "textarea"))
    if parameter.kind == "password" or is_mail(parameter):  # never credentials, never an address to write to
        return False
    if argument.input_types:
        return _full(argument.input_types, parameter.kind)
    return parameter.kind in TEXT_KINDS or parameter.kind in ("email", "url", "tel", "number")


def candidates(argument: Argument, form: Form) -> list[tuple[float, Parameter]]:
    """The parameters an argument may go into, best first (a required argument may go into
    any that accepts it; an optional one where a hint names it or, for a value that picks some
    options and not others (``blastn``), into a select, radio or checkbox group offering it,
    whatever its name)."""
    found = []
    for parameter in form.parameters:
        if accepts(argument, parameter):
            score = hint_score(argument, parameter)
            if score > 0 or argument.required:
                if parameter.kind == "textarea" and ("\n" in argument.value.strip() or len(argument.value) > 80):
                    score += TEXTAREA_FITS  # a long value goes where a person would type it, names being equal
                elif parameter.kind == "file":
                    score -= FILE_COST  # typed in, where a field takes it, before uploaded
                found.append((score, parameter))
            elif parameter.kind in ("select", "radio", "checkbox") and specific(argument):
                found.append((OPTION_FITS, parameter))
    found.sort(key=lambda item: -item[0])
    return found


def form_filter(forms: list[Form], service: ServiceClass) -> list[tuple[Form, list[int]]]:
    """Algorithm 1: each form that some example can probe, with those examples. A form with
    a password field is never probed (a login form is nobody's search service, and we do
    not try credentials)."""
    kept = []
    for form in forms:
        if any(p.kind == "password" for p in form.parameters):
            continue
        usable = [n for n, example in enumerate(service.examples)
                  if all(candidates(a, form) for a in example.arguments if a.required)]
        if usable:  # no submit button: a browser still sends it when Enter is pressed in a field
            kept.append((form, usable))
    return kept


def wizard_step(forms: list[Form], service: ServiceClass) -> tuple[Form, dict, Parameter | None, str] | None:
    """A form that takes none of the required arguments but looks like the first step towards
    one (a wizard: "1. choose the program, 2. paste the sequence"): its options fit an argument
    of a probing template (``blastn``), or its words are the service class's. What to submit:
    (form, assignment, button, why); None when no form looks like that (a browse form, a login)."""
    wanted = class_words(service)
    best, best_score = None, 0.0
    for form in forms:
        if any(p.kind == "password" for p in form.parameters) or not form.submit_buttons():
            continue
        for example in service.examples:
            assignment, reasons, score = {}, [], 0.0
            for parameter in form.parameters:
                if parameter.disabled or not parameter.name or parameter.kind not in ("select", "radio", "checkbox"):
                    continue
                for argument in example.arguments:
                    if argument.required or not specific(argument):
                        continue
                    found = choose_option(argument, parameter)
                    if found:
                        assignment[parameter.name] = [found[0]] if parameter.kind == "checkbox" else found[0]
                        reasons.append(f"{argument.name}->{parameter.name}={found[0]}")
                        score += 2
                        break
            shown = words(*(f"{p.name} {p.label} " + " ".join(f"{o.value} {o.label}" for o in p.options)
                            for p in form.parameters), *(f"{b.value or ''} {b.label}" for b in form.buttons))
            typed = shown & wanted
            score += min(2, len(typed))
            if typed:
                reasons.append("its words are the class's: " + ", ".join(sorted(typed)))
            if score > best_score:
                button = submit_button(form, example)
                best, best_score = (form, assignment, button, "a first step (no field takes the required "
                                    "arguments): " + "; ".join(reasons)), score
    return best


def submit_button(form: Form, example: Example | None = None) -> Parameter | None:
    """The button a person would click: one whose caption or value fits an argument of the
    probing template (a "BLASTN" button among "TBLASTX" and "BLASTP"), else one that says
    search/submit/run..., never one that says clear/reset/cancel; else the first submit button."""
    buttons = form.submit_buttons()
    if not buttons:
        return None
    fitting = [a for a in (example.arguments if example else []) if not a.required and specific(a)]

    def score(button: Parameter) -> int:
        words = f"{button.name} {button.value or ''} {button.label}"
        fit = any(fits(a, button.value or "", button.label) for a in fitting)
        return (4 if fit else 0) + (2 if _GO.search(words) else 0) - (3 if _STOP.search(words) else 0)

    return max(buttons, key=score)  # max keeps the first of equals: the default button


def _place(argument: Argument, parameter: Parameter, fixed: dict[str, str],
           iterate: list[tuple[Parameter, list[str]]]) -> None:
    """Put an argument's value into a parameter: typed into a field, chosen among a select's
    or radio group's options, or (an iterator argument) every matching option in turn."""
    if parameter.kind not in ("select", "radio", "checkbox"):
        fixed[parameter.name] = argument.value
        return
    values = choose_option(argument, parameter)
    if parameter.kind == "checkbox":  # one box of the group checked: the others left off
        values = [[v] for v in values]  # type: ignore[misc]
    if argument.iterator:
        iterate.append((parameter, values))
    else:
        fixed[parameter.name] = values[0]


def _form_probes(form: Form, number: int, example: Example, use_hints: bool = True) -> Iterator[Probe]:
    required = [a for a in example.arguments if a.required]
    optional = [a for a in example.arguments if not a.required] if use_hints else []
    options = [candidates(a, form) for a in required]
    if not use_hints:  # the seed's plain E x P: parameters in page order, no optional arguments
        options = [[(0.0, p) for p in form.parameters if any(p is q for _, q in found)] for found in options]
    combos = []
    for picked in itertools.product(*options):
        parameters = [p.name for _, p in picked]
        if len(set(parameters)) == len(parameters):
            combos.append((sum(s for s, _ in picked), [p for _, p in picked]))
    combos.sort(key=lambda item: -item[0])
    button = submit_button(form, example) if use_hints else next(iter(form.submit_buttons()), None)
    for score, chosen in combos:
        arguments = {a.name: p.name for a, p in zip(required, chosen, strict=True)}
        fixed: dict[str, str] = {}
        iterate: list[tuple[Parameter, list[str]]] = []
        why = []
        for (hint, parameter), argument in zip(picked_scores(options, chosen), required, strict=True):
            _place(argument, parameter, fixed, iterate)
            why.append(f"{argument.name}->{parameter.name} ({_reason(argument, parameter, hint)})")
        taken = set(arguments.values())
        for argument in optional:
            for hint, parameter in candidates(argument, form):
                if parameter.name in taken:
                    continue
                arguments[argument.name] = parameter.name
                taken.add(parameter.name)
                score += hint / 10  # optional arguments in place make a probe likelier
                _place(argument, parameter, fixed, iterate)
                why.append(f"{argument.name}->{parameter.name} ({_reason(argument, parameter, hint)})")
                break
        axes = [[(p.name, v) for v in values] for p, values in iterate]
        typed = [p for p in chosen if p.kind in TEXT_KINDS]
        settings = filter_settings(form, typed[0], taken) if use_hints and typed else []
        for rank, (extra, said) in enumerate(settings or [({}, "")]):
            for choice in itertools.product(*axes):
                assignment = {**fixed, **extra, **dict(choice)}
                told = "; ".join(why + ([said] if said else []) + [f"{name}={value} (next option)"
                                                                   for name, value in choice])
                yield Probe(form, number, dict(arguments), assignment, button, score - rank / 100, f"plan: {told}")


# A filter row (a column, an operator, a value), as people fill one: the column chosen when the
# form's default is a placeholder ("- column -": the server drops a filter without one), a
# "contains" operator when the default compares the whole value ("=").
_CONTAINS = re.compile(r"^\s*(contains|icontains|includes|has|has words?|like|matches|match|~)\s*$", re.I)
_PLACEHOLDER = re.compile(r"^[\W_]*$|^[\W_]*(column|field|attribute|property|choose|select|pick|please)\b", re.I)
_ALL = re.compile(r"\b(any|all|every)\b", re.I)
_COLUMN = re.compile(r"(?:^|[_\-.\[])(?:col|column|field|attr|attribute|property|searchby|search_by|where)"
                     r"(?:[_\-.\]]|$)", re.I)
_GROUP = re.compile(r"^(.*?[A-Za-z0-9])[_\-.\[\]]+[A-Za-z0-9]+\]?$")
TEXT_COLUMNS = ("description", "summary", "text", "content", "body", "abstract", "title", "subject", "name",
                "keywords", "comment", "message", "note")  # columns that hold words, likeliest first
FILTER_COLUMNS = 3  # columns tried, at most, for a filter whose form names none


def _prefix(name: str) -> str | None:
    """A field's group: its name without its last word (``_filter`` for ``_filter_value``)."""
    group = _GROUP.match(name)
    return group.group(1) if group else None


def filter_settings(form: Form, field: Parameter, taken: set[str]) -> list[tuple[dict[str, str], str]]:
    """The selects that decide what the text ``field`` filters, set as a person would: each
    alternative (a column to try) with its reason; [] when nothing needs setting. The selects
    are those of the field's own group (``_filter_column`` and ``_filter_op`` for
    ``_filter_value``) and those named like a column (``field``, ``searchby``)."""
    prefix = _prefix(field.name)
    others = {_prefix(p.name) for p in form.text_inputs() if p.name != field.name} - {None}  # other filter rows
    selects = [p for p in form.parameters if p.kind == "select" and p.name and not p.disabled and not p.multiple
               and p.name not in taken and p.name != field.name
               and ((prefix and _prefix(p.name) == prefix)
                    or (_COLUMN.search(p.name) and _prefix(p.name) not in others))]
    fixed: dict[str, str] = {}
    said: list[str] = []
    columns: list[tuple[str, str]] = []
    column_name = ""
    for select in selects:
        usable = [o for o in select.options if not o.disabled]
        current = next((o for o in usable if o.selected), None)
        contains = next((o for o in usable if _CONTAINS.match(o.value) or _CONTAINS.match(o.label)), None)
        if contains is not None:
            if current is None or not (_CONTAINS.match(current.value) or _CONTAINS.match(current.label)):
                fixed[select.name] = contains.value
                said.append(f"{select.name}={contains.value} (an operator: "
                            f"{current.label if current else 'none'!r} compares whole values)")
            continue
        if current is not None and not current.value.strip() and _PLACEHOLDER.match(current.label) \
                and not _ALL.search(current.label) and not columns:
            choices = [o for o in usable if o.value.strip()]
            choices.sort(key=lambda o: next((n for n, c in enumerate(TEXT_COLUMNS) if c in o.value.lower()
                                             or c in o.label.lower()), len(TEXT_COLUMNS)))
            columns = [(o.value, o.label) for o in choices[:FILTER_COLUMNS]]
            column_name = select.name
            said.append(f"a column for the filter (its default {current.label!r} applies none)")
    if not columns:
        return [(fixed, "; ".join(said))] if fixed else []
    return [({**fixed, column_name: value}, f"{column_name}={value}: " + "; ".join(said)) for value, _ in columns]


def picked_scores(options: list[list[tuple[float, Parameter]]],
                  chosen: list[Parameter]) -> list[tuple[float, Parameter]]:
    """The (score, parameter) pairs of a combination, for its reasons."""
    return [next(pair for pair in found if pair[1] is parameter) for found, parameter in zip(options, chosen,
                                                                                              strict=True)]


def _reason(argument: Argument, parameter: Parameter, score: float) -> str:
    if score == OPTION_FITS:
        return "an option fits its value"
    return "a hint names it" if hint_score(argument, parameter) > 0 else "accepts it"


def plan_probes(forms: list[Form], service: ServiceClass, per_form: int = 20, per_source: int = 60,
                use_hints: bool = True) -> list[Probe]:
    """Algorithm 2's probes for a source, likeliest first, within the budgets. Probes of
    all examples are interleaved by score, so a second example's best probe comes before a
    first example's tenth; duplicates (the same request) are dropped. ``use_hints=False``
    is the seed's Algorithm 2 without its heuristics (the benchmark's baseline): required
    arguments into parameters in page order, optional ones left out, the default button."""
    planned: list[Probe] = []
    for form, examples in form_filter(forms, service):
        probes = [probe for n in examples for probe in _form_probes(form, n, service.examples[n], use_hints)]
        order = sorted(range(len(probes)), key=lambda i: (-probes[i].score, i))
        seen = set()
        kept = []
        for i in order:
            key = probes[i].key()
            if key not in seen:
                seen.add(key)
                kept.append(probes[i])
            if len(kept) >= per_form:
                break
        planned.extend(kept)
    planned.sort(key=lambda p: -p.score)  # stable: forms in page order among equals
    return planned[:per_source]


@dataclass
class Step:
    """What a response means at the current vertex."""

    kind: str  # "result", "form" (an intermediate form page), "links" (an intermediate page with links), "none"
    vertex: Vertex | None = None
    match: Match | None = None
    forms: list[Form] = field(default_factory=list)
    links: list[str] = field(default_factory=list)


def same_form(a: Form, b: Form) -> bool:
    return a.action == b.action and [p.name for p in a.parameters] == [p.name for p in b.parameters]


def next_step(service: ServiceClass, vertex: str, url: str, markup: str, text: str, forms: list[Form],
              values: dict[str, str], submitted: Form | None = None) -> Step:
    """Match a response against the successors of ``vertex``: result vertices first (their
    type in the markup, then in the text), then intermediate ones, ``vertex`` itself last when
    it is intermediate (a "still running" page leading to another; the hop budget bounds it)."""
    recognizer = service.recognizer()
    successors = service.controlflow.successors(vertex)
    current = service.controlflow.vertices.get(vertex)
    if current is not None and not current.result and not current.origin and current not in successors:
        successors = [*successors, current]  # an intermediate page may lead to another like it (polling)
    for successor in successors:
        if successor.result and not is_form_type(successor.type):
            found = recognizer.find(successor.type, markup, values) or recognizer.find(successor.type, text, values)
            if found:
                return Step("result", successor, found)
    for successor in successors:
        if successor.result:
            continue
        if is_form_type(successor.type):
            fresh = [f for f in forms if f.submit_buttons() and not (submitted and same_form(f, submitted))]
            if fresh:
                return Step("form", successor, forms=fresh)
        else:
            found = recognizer.find_all(successor.type, markup, values, limit=4 * LINKS_PER_PAGE)
            if found:
                base = page_base(markup, url)
                links: list[str] = []
                for match in found:  # every link the type finds, in page order
                    links += [link for link in anchors(match.text, base) if same_site(link, url) and link not in links]
                if links:
                    return Step("links", successor, found[0], links=links[:LINKS_PER_PAGE])
    return Step("none")


def page_base(markup: str, url: str) -> str:
    """The URL relative links of a page resolve against: its ``<base href>``, else its own."""
    root = _root(markup)
    return base_url(root, url) if root is not None else url


def _root(markup: str):
    try:
        return lxml.html.document_fromstring(markup.encode("utf-8", "replace"),
                                             parser=lxml.html.HTMLParser(encoding="utf-8"))
    except (etree.ParserError, ValueError):
        return None


def anchors(fragment: str, base: str) -> list[str]:
    """The absolute http(s) URLs of the links (``<a>``, ``<area>``) in a piece of markup, as a
    browser reads them: entities decoded, whitespace stripped, resolved against ``base``."""
    try:
        root = lxml.html.fragment_fromstring(fragment, create_parent="div")
    except (etree.ParserError, ValueError):
        return []
    found: list[str] = []
    for element in root.iter("a", "area"):
        href = strip_html5_whitespace(element.get("href") or "")
        if not href or href.startswith("#"):
            continue
        absolute = urldefrag(urljoin(base, href))[0]
        if absolute.startswith(("http://", "https://")) and absolute not in found:
            found.append(absolute)
    return found


def same_site(url: str, other: str) -> bool:
    """Same host, or hosts under the same registered domain (``www.x.org`` and ``blast.x.org``)."""
    return in_scope(url, other, "domain")


# What a script does when it reloads its page or sends the browser on (a job page polling for
# its results): read from the script's text, as no parser short of a browser can run it. A
# URL the script builds (``location.href = "search.html?q=" + box.value``: a search box's
# Enter handler) is no move the page makes on its own: only a whole literal URL counts.
_JS_RELOAD = re.compile(r"\blocation\.reload\s*\(")
_JS_GO = re.compile(r"""\blocation(?:\.href)?\s*=\s*(["'])([^"'\s]+)\1(?!\s*[+\[.(])"""
                    r"""|\blocation\.(?:replace|assign)\s*\(\s*(["'])([^"'\s]+)\3\s*\)""")
_JS_DELAY = re.compile(r"\bsetTimeout\s*\([\s\S]{0,500}?,\s*(\d{1,6})\s*\)")
JS_WAIT = 2.0  # seconds before a script's reload, when the script does not say


@dataclass(frozen=True)
class Onward:
    """Where a browser goes on by itself from a page that is neither a result nor what the class
    calls an intermediate page: a refresh (after ``wait`` seconds), a ``Location`` of a 201/202
    answer, or the documents of its frames."""

    how: str  # "refresh", "location", "frame"
    urls: list[str]
    wait: float = 0.0


def onward(markup: str, url: str, status: int = 200, location: str | None = None) -> Onward | None:
    """The page a browser would show next on its own (see :class:`Onward`), on the same site."""
    if location and status in (201, 202):
        target = urljoin(url, strip_html5_whitespace(location))
        if same_site(target, url):
            return Onward("location", [target])
    root = _root(markup) if markup.strip() else None
    if root is None:
        return None
    base = base_url(root, url)
    for meta in root.iter("meta"):
        if (meta.get("http-equiv") or "").strip().lower() != "refresh":
            continue
        if any(parent.tag == "noscript" for parent in meta.iterancestors()):
            continue
        content = meta.get("content") or ""
        wait, target = get_meta_refresh(f'<meta http-equiv="refresh" content="{escape(content)}">', baseurl=base)
        if target is None:  # "N" alone: the page itself again, after N seconds
            try:
                wait, target = float(content.strip().rstrip(";")), url
            except ValueError:
                continue
        if same_site(target, url):
            return Onward("refresh", [target], float(wait or 0))
    for script in root.iter("script"):  # a page that reloads itself, or moves on, by script
        code = (script.text or "")[:20_000]
        moved_to = _JS_GO.search(code)
        if moved_to or _JS_RELOAD.search(code):
            delay = _JS_DELAY.search(code)
            wait = min(float(delay.group(1)) / 1000, 60.0) if delay else JS_WAIT
            href = (moved_to.group(2) or moved_to.group(4)) if moved_to else None
            target = urldefrag(urljoin(base, href))[0] if href else url
            if target.startswith(("http://", "https://")) and same_site(target, url):
                return Onward("refresh", [target], wait)
    frames = []
    for frame in root.iter("iframe", "frame"):
        src = strip_html5_whitespace(frame.get("src") or "")
        if src and not src.startswith(("javascript:", "about:", "data:")):
            target = urldefrag(urljoin(base, src))[0]
            if target.startswith(("http://", "https://")) and same_site(target, url) and target not in frames:
                frames.append(target)
    if frames:
        return Onward("frame", frames[:LINKS_PER_PAGE])
    return None


def extract(service: ServiceClass, vertex: Vertex, markup: str, text: str, values: dict[str, str],
            limit: int = 20) -> list[dict[str, Any]]:
    """The result vertex's ``resultType`` objects found in the page (markup, else text):
    each one's text and named elements."""
    if not vertex.result_type:
        return []
    recognizer = service.recognizer()
    found = recognizer.find_all(vertex.result_type, markup, values, limit=limit) or \
        recognizer.find_all(vertex.result_type, text, values, limit=limit)
    return [{"text": m.text[:2000], "elements": {k: v[:20] for k, v in m.elements.items()}} for m in found]
