"""Rules templates (seed 001): variables and named rule instances, validated against
``webrace/schemas/template.xsd``, then each rule's class imported and its parameters checked.
Any problem refuses the whole template with ``file:line: what is wrong``, before a crawl
sends a request."""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass
from pathlib import Path

from lxml import etree

from rules.base import Rule, RuleConfigError
from webrace.xmlutil import MAX_XML_BYTES, XmlTooLarge, check_size, read_limited, safe_parser, schema

_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_.\-]*)\}")
# The default of WEBRACE_TEMPLATE_MAX_EXPANSION (webrace/settings.py), in characters.
MAX_EXPANSION = 1024 * 1024


class TemplateError(ValueError):
    """The template cannot be used; ``problems`` holds ``file:line: message`` lines."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("\n".join(problems))


@dataclass(frozen=True)
class RuleSpec:
    name: str
    cls: type[Rule]
    params: dict[str, str]


@dataclass(frozen=True)
class Template:
    source: str
    variables: dict[str, str]
    specs: list[RuleSpec]

    def instantiate(self) -> list[Rule]:
        """Fresh rule instances (their parameters were checked when the template loaded)."""
        return [spec.cls(spec.name, spec.params) for spec in self.specs]


def load_template(path: str | Path, max_expansion: int = MAX_EXPANSION, max_bytes: int = MAX_XML_BYTES) -> Template:
    """The template in ``path`` (refused unread when over ``max_bytes``; ``max_expansion``:
    see :func:`parse_template`)."""
    path = Path(path)
    try:
        data = read_limited(path, max_bytes)
    except XmlTooLarge as exc:
        raise TemplateError([f"{path}: {exc}"]) from None
    except OSError as exc:
        raise TemplateError([f"{path}: cannot read: {exc.strerror or exc}"]) from None
    return parse_template(data, str(path), max_expansion, max_bytes)


def parse_template(data: bytes, source: str = "<template>", max_expansion: int = MAX_EXPANSION,
                   max_bytes: int = MAX_XML_BYTES) -> Template:
    """Every variable and parameter expands to at most ``max_expansion`` characters (a few
    doubling variables would otherwise fill the memory)."""
    try:
        check_size(len(data), max_bytes)
        tree = etree.fromstring(data, safe_parser()).getroottree()
    except XmlTooLarge as exc:
        raise TemplateError([f"{source}: {exc}"]) from None
    except etree.XMLSyntaxError as exc:
        raise TemplateError([f"{source}:{exc.lineno or 0}: not well-formed XML: {exc.msg}"]) from None
    if tree.docinfo.doctype:
        raise TemplateError([f"{source}:1: DOCTYPE declarations are not allowed in templates"])
    problems = [f"{source}:{e.sourceline or '?'}: {e.reason or e.message}" + (f" (at {e.path})" if e.path else "")
                for e in schema("template").iter_errors(tree)]
    if problems:
        raise TemplateError(problems)
    variables = _Variables(source, max_expansion, problems)
    specs: list[RuleSpec] = []
    for el in tree.getroot():
        if not isinstance(el.tag, str):
            continue
        if el.tag == "var":
            variables.declare(el)
            continue
        name = el.get("name")
        where = f"{source}:{el.sourceline}"
        params = {param.get("name"): variables.expand_param(name, param) for param in el.iterfind("param")}
        cls, problem = import_rule(el.get("class"))
        if problem:
            problems.append(f"{where}: rule {name!r}: {problem}")
            continue
        if None in params.values():  # a parameter that could not be expanded (said above)
            continue
        try:
            cls(name, params)  # checks the parameters now, before any request
        except RuleConfigError as exc:
            problems.append(f"{where}: rule {name!r} ({el.get('class')}): {exc}")
            continue
        except Exception as exc:  # a rule's own constructor failed
            problems.append(f"{where}: rule {name!r} ({el.get('class')}): cannot be created: "
                            f"{type(exc).__name__}: {exc}")
            continue
        specs.append(RuleSpec(name, cls, params))
    if problems:
        raise TemplateError(problems)
    return Template(source, variables.values, specs)


class _Variables:
    """A template's variables as they are declared, each expanded at most ``limit``
    characters long. A variable refused is said once: those that use it are not."""

    def __init__(self, source: str, limit: int, problems: list[str]) -> None:
        self.source, self.limit, self.problems = source, limit, problems
        self.values: dict[str, str] = {}
        self.refused: set[str] = set()

    def declare(self, el: etree._Element) -> None:
        name = el.get("name")
        try:
            self.values[name] = expand(el.text or "", self.values, self.limit)
        except KeyError as exc:
            if exc.args[0] not in self.refused:
                self.problems.append(f"{self.source}:{el.sourceline}: variable {name!r} uses ${{{exc.args[0]}}}, "
                                     "which is not declared before it")
            self.refused.add(name)
        except ExpansionTooLarge:
            self.refused.add(name)
            self.problems.append(f"{self.source}:{el.sourceline}: variable {name!r} expands to more than "
                                 f"{self.limit} characters (WEBRACE_TEMPLATE_MAX_EXPANSION)")

    def expand_param(self, rule: str, param: etree._Element) -> str | None:
        where = f"{self.source}:{param.sourceline}: rule {rule!r}, parameter {param.get('name')!r}"
        try:
            return expand(param.text or "", self.values, self.limit)
        except KeyError as exc:
            if exc.args[0] not in self.refused:
                self.problems.append(f"{where}: ${{{exc.args[0]}}} is not a declared variable")
        except ExpansionTooLarge:
            self.problems.append(f"{where}: expands to more than {self.limit} characters "
                                 "(WEBRACE_TEMPLATE_MAX_EXPANSION)")
        return None


class ExpansionTooLarge(ValueError):
    """An expansion would pass its limit (found before it is built)."""


def expand(text: str, variables: dict[str, str], limit: int | None = None) -> str:
    """``${NAME}`` replaced by the variable's value; KeyError(NAME) when undeclared,
    :class:`ExpansionTooLarge` when the result would be longer than ``limit`` characters
    (counted as the pieces are found, before they are joined)."""
    pieces, size, at = [], 0, 0
    for match in _VAR.finditer(text):
        value = variables[match.group(1)]
        pieces += (text[at:match.start()], value)
        size += match.start() - at + len(value)
        at = match.end()
        if limit is not None and size > limit:
            raise ExpansionTooLarge(size)
    if limit is not None and size + len(text) - at > limit:
        raise ExpansionTooLarge(size + len(text) - at)
    pieces.append(text[at:])
    return "".join(pieces)


def import_rule(dotted: str) -> tuple[type[Rule] | None, str | None]:
    """The class at ``package.module.Class`` (or ``package.Class``), or why not."""
    module_name, _, attr = dotted.rpartition(".")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:
        return None, f"cannot import module {module_name!r} for class {dotted!r}: {type(exc).__name__}: {exc}"
    cls = getattr(module, attr, None)
    if cls is None:
        return None, f"module {module_name!r} has no class {attr!r}"
    if not (isinstance(cls, type) and issubclass(cls, Rule)):
        return None, f"{dotted!r} is not a subclass of rules.Rule"
    return cls, None
