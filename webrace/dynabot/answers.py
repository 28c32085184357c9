"""Reading a service's answers: what DynaBot tries next when a probe's response is neither a
result nor an intermediate page (pure functions; no Scrapy here).

A real service that refuses a query usually says why ("Database swissprot is not a
nucleotide database", "input must be in FASTA format", "please give a job title"), and its
form offers what it wants instead. :func:`refinements` turns the words an answer adds to the
start page (:func:`said`) and the form's own options into the next probes, each a small
change to the probe just answered:

- a ``<select>``, radio group or checkbox group set to another option, when the option fits
  an argument of the probing template (its value, e.g. ``blastn``), when its words are words
  of the service class or its argument types (``Nucleotide collection``, ``DNA``), or when
  the answer names the option or the field (``... choose a nucleotide database``). Words the
  refused option shares with the answer do not count: they name the problem, not the cure;
- the sequence sent in FASTA form, when the answer asks for FASTA;
- a required argument moved into another field that the answer names ("no sequence given");
- an empty text field the answer names filled in (with the template's argument whose hints
  name it, else a neutral word); never a field for an e-mail address
  (:func:`webrace.dynabot.sideeffects.is_mail`): a service would write to it.

Every refinement carries its reason, for the trace. The caller drops refinements it has sent
already (:meth:`Probe.key`), so no identical probe goes out twice.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

import lxml.html
from lxml import etree

from scd import Argument, Example, ServiceClass
from webrace.dynabot.forms import TEXT_KINDS, Form, Parameter
from webrace.dynabot.sideeffects import is_mail

_WORD = re.compile(r"[A-Za-z][A-Za-z0-9]+")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
STOPWORDS = frozenset("""
    is in on of to at be by an or as it we no do if my me up so us am go he she
    the and for not you your please this that with are was were has have had from into can cannot could must
    should will would one all any but its our out use used using than then there their them they what when where
    which who how why may might also only more most some such very just been being did does done here other
    about above after again against before below between both each few further once over same under until
    while these those own off too yes via per try tried
    error errors sorry invalid wrong problem problems failed fail warning note
    """.split())
_CHOOSABLE = ("select", "radio", "checkbox")
MAX_MARKUP = 2_000_000  # characters of an answer read for what it says
MAX_REFINEMENTS = 12  # kept per answer
FILLER = "webrace"  # what goes into an empty text field the answer names, when no argument fits it


def words(*texts: str) -> set[str]:
    """Lower-case content words of ``texts``: camelCase and snake_case split, stop words and one-letter words
    dropped, a plural ``s`` taken off (``databases`` -> ``database``)."""
    found = set()
    for text in texts:
        for token in _WORD.findall(_CAMEL.sub(" ", text or "")):
            for part in token.lower().split("_"):
                if len(part) > 4 and part.endswith("s") and not part.endswith("ss"):
                    part = part[:-1]
                if len(part) >= 2 and part not in STOPWORDS and not part.isdigit():
                    found.add(part)
    return found


def prose(markup: str) -> str:
    """A page's text outside its forms, scripts and styles: what it says, not what it offers.
    (An answer that shows the form again must not seem to say every option's name.)"""
    if not markup.strip():
        return ""
    try:
        root = lxml.html.document_fromstring(markup[:MAX_MARKUP].encode("utf-8", "replace"),
                                             parser=lxml.html.HTMLParser(encoding="utf-8"))
    except (etree.ParserError, ValueError):
        return markup[:MAX_MARKUP]
    for element in list(root.iter("form", "select", "datalist", "script", "style", "noscript", "textarea")):
        if element.getparent() is not None:
            element.drop_tree()
    return root.text_content()


def said(answer_markup: str, page_markup: str) -> set[str]:
    """What an answer says that its source's start page does not: the words of its prose (see
    :func:`prose`) minus those of the page's."""
    return words(prose(answer_markup)) - words(prose(page_markup))


def class_words(service: ServiceClass) -> set[str]:
    """Words of the service class and of its arguments' types (``NucleotideBLAST``, ``DNASequence``)."""
    names = [service.name, service.controlflow.name]
    names += [a.type for e in service.examples for a in e.arguments if a.type]
    return words(*names) - {"string", "integer", "float", "type"}


def _full(pattern: str, text: str) -> bool:
    try:
        return re.fullmatch(pattern, text) is not None
    except re.error:
        return pattern == text


def specific(argument: Argument) -> bool:
    """An argument whose value picks some options and not others (``blastn``), not a wildcard
    that takes any option (the seed's iterator ``.*[^\\W]+.*``)."""
    return not any(_full(argument.value, probe) for probe in ("zq", "x9 q", "Zzzq"))


def fits(argument: Argument, option_value: str, option_label: str) -> bool:
    """Does an option (its value, else its label) take the argument's value? The value is a regex
    matched in full, in any case (``blastn`` names the ``BLASTN`` button as well)."""
    for text in (option_value, option_label):
        if not text:
            continue
        if text == argument.value or text.lower() == argument.value.lower():
            return True
        try:
            if re.fullmatch(argument.value, text, re.IGNORECASE):
                return True
        except re.error:
            continue
    return False


def _sent(probe: Any, parameter: Parameter) -> list[str]:
    """The values a probe sends for a choosable parameter: its assignment, else the defaults."""
    if parameter.name in probe.assignment:
        value = probe.assignment[parameter.name]
        return [value] if isinstance(value, str) else list(value or [])
    return [o.value for o in parameter.options if o.selected and not o.disabled]


def _field_words(parameter: Parameter) -> set[str]:
    return words(parameter.name, parameter.label)


def refinements(probe: Any, example: Example, service: ServiceClass, heard: set[str]) -> list[Any]:
    """The next probes after ``probe`` was answered with a page that says ``heard`` (see :func:`said`),
    best first, each with its reason in ``why``."""
    form: Form = probe.form
    taken = set(probe.arguments.values())  # parameters that carry an argument
    wanted = class_words(service)
    found: list[tuple[float, Any]] = []
    carriers = _carriers(form, example, heard, taken)
    for parameter in form.parameters:
        if parameter.disabled or not parameter.name or parameter.kind not in _CHOOSABLE:
            continue
        if parameter.name in taken and parameter.name not in _iterated(probe, example):
            continue
        found.extend(_option_changes(probe, example, parameter, heard, wanted, carriers.get(parameter.name, ())))
    found.extend(_text_changes(probe, example, heard))
    found.sort(key=lambda item: -item[0])
    return [p for _, p in found[:MAX_REFINEMENTS]]


def _carriers(form: Form, example: Example, heard: set[str], taken: set[str]) -> dict[str, tuple[Argument, ...]]:
    """For each optional argument the answer names ("no such database"), the one choosable field
    most likely to carry it: one its hints name, else one whose name or label says it, else the
    first whose options are words (not numbers: an Expect value is no database). Field name ->
    the arguments it carries."""
    found: dict[str, list[Argument]] = {}
    for argument in example.arguments:
        if argument.required or not words(argument.name) & heard:
            continue
        best, best_score = None, 0
        for parameter in form.parameters:
            if parameter.disabled or not parameter.name or parameter.kind not in _CHOOSABLE or parameter.name in taken:
                continue
            usable = [o for o in parameter.options if not o.disabled and o.value.strip()
                      and fits(argument, o.value, o.label)]
            worded = [o for o in usable if words(o.value, o.label)]  # words() has no numbers
            if not worded:
                continue
            score = 1 + (3 if _hinted(argument, parameter) else 0) + (
                2 if _field_words(parameter) & words(argument.name) else 0)
            if score > best_score:
                best, best_score = parameter, score
        if best is not None:
            found.setdefault(best.name, []).append(argument)
    return {name: tuple(arguments) for name, arguments in found.items()}


def _iterated(probe: Any, example: Example) -> set[str]:
    return {probe.arguments[a.name] for a in example.arguments if a.iterator and a.name in probe.arguments}


def _option_changes(probe, example: Example, parameter: Parameter, heard: set[str], wanted: set[str],
                    carried: tuple[Argument, ...] = ()):
    current = _sent(probe, parameter)
    refused = set()
    for option in parameter.options:
        if option.value in current:
            refused |= words(option.value, option.label)
    named = _field_words(parameter) & heard
    blamed = refused & heard  # the answer names what was sent: this field is the problem
    for option in parameter.options:
        if option.disabled or not option.value.strip() or option.value in current:
            continue
        own = words(option.value, option.label)
        score, reasons = 0.0, []
        if blamed:
            score += 1
            reasons.append("the answer names the value sent (" + ", ".join(sorted(blamed)) + ")")
        for argument in example.arguments:
            if not argument.iterator and specific(argument) and fits(argument, option.value, option.label):
                score += 4
                reasons.append(f"fits the argument {argument.name}")
                break
        told = (own & heard) - refused
        if told:
            score += 2 * min(3, len(told))
            reasons.append("the answer says " + ", ".join(repr(w) for w in sorted(told)))
        if named:
            score += 1
            reasons.append("the answer names the field (" + ", ".join(sorted(named)) + ")")
        else:
            for argument in carried:
                if fits(argument, option.value, option.label):
                    score += 1
                    reasons.append(f"the answer names the argument {argument.name} and the option fits it")
                    break
        if not score:  # the answer says nothing about this field: the class's words alone do not move it
            continue
        typed = own & wanted
        if typed:
            score += min(2, len(typed))
            reasons.append("its words are the class's: " + ", ".join(sorted(typed)))
        value: Any = [option.value] if parameter.kind == "checkbox" else option.value
        why = f"{parameter.name}={option.value}" + (f" ({option.label})" if option.label and option.label !=
                                                     option.value else "") + ": " + "; ".join(reasons)
        yield score, _changed(probe, {parameter.name: value}, why, score)


def _changed(probe, changes: dict[str, Any], why: str, score: float, arguments: dict[str, str] | None = None):
    return replace(probe, assignment={**probe.assignment, **changes}, why=why, score=score,
                   arguments=dict(arguments if arguments is not None else probe.arguments))


def _text_changes(probe, example: Example, heard: set[str]):
    form: Form = probe.form
    by_name = {p.name: p for p in form.parameters if p.name and not p.disabled}
    for argument in example.arguments:
        field_name = probe.arguments.get(argument.name)
        if not argument.required or field_name is None or by_name.get(field_name) is None:
            continue
        value = probe.assignment.get(field_name, "")
        if not isinstance(value, str):
            continue
        # the sequence as FASTA, when the answer asks for it
        if "fasta" in heard and not value.lstrip().startswith(">"):
            yield 6.0, _changed(probe, {field_name: f">query\n{value.strip()}\n"},
                                f"{field_name} in FASTA form: the answer says 'fasta'", 6.0)
        # the argument moved into a field the answer names
        for parameter in form.parameters:
            if parameter.name == field_name or parameter.name in probe.assignment or parameter.disabled:
                continue
            if parameter.kind not in TEXT_KINDS or not parameter.name:
                continue
            named = _field_words(parameter) & heard
            related = _hinted(argument, parameter) or _field_words(parameter) & words(argument.name, argument.type)
            if named and related and (not argument.input_types or _full(argument.input_types, parameter.kind)):
                arguments = {**probe.arguments, argument.name: parameter.name}
                assignment = {k: v for k, v in probe.assignment.items() if k != field_name}
                moved = replace(probe, assignment={**assignment, parameter.name: value}, arguments=arguments,
                                why=f"{argument.name} moved to {parameter.name}: the answer names it "
                                    f"({', '.join(sorted(named))})", score=3.0)
                yield 3.0, moved
    # an empty text field the answer names, filled in
    for parameter in form.parameters:
        if parameter.disabled or not parameter.name or parameter.name in probe.assignment:
            continue
        if parameter.kind not in TEXT_KINDS | {"url", "number"} or (parameter.value or "").strip():
            continue
        if is_mail(parameter):
            continue
        named = _field_words(parameter) & heard
        if not named:
            continue
        value, source = _filler(parameter, example)
        yield 2.0 + len(named), _changed(probe, {parameter.name: value},
                                         f"{parameter.name}={value!r} ({source}): the answer names the field "
                                         f"({', '.join(sorted(named))})", 2.0 + len(named))


def _hinted(argument: Argument, parameter: Parameter) -> bool:
    for hint in argument.name_hints:
        try:
            if re.search(hint, parameter.name) or parameter.label and re.search(hint, parameter.label):
                return True
        except re.error:
            continue
    return False


def _filler(parameter: Parameter, example: Example) -> tuple[str, str]:
    for argument in example.arguments:
        if not argument.required and specific(argument) and _hinted(argument, parameter):
            return argument.value, f"the argument {argument.name}"
    if parameter.kind == "number":
        return "1", "a number"
    return FILLER, "a neutral word"
