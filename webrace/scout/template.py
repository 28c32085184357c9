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
from webrace.xmlutil import safe_parser, schema

_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_.\-]*)\}")


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


def load_template(path: str | Path) -> Template:
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise TemplateError([f"{path}: cannot read: {exc.strerror or exc}"]) from None
    return parse_template(data, str(path))


def parse_template(data: bytes, source: str = "<template>") -> Template:
    try:
        tree = etree.fromstring(data, safe_parser()).getroottree()
    except etree.XMLSyntaxError as exc:
        raise TemplateError([f"{source}:{exc.lineno or 0}: not well-formed XML: {exc.msg}"]) from None
    if tree.docinfo.doctype:
        raise TemplateError([f"{source}:1: DOCTYPE declarations are not allowed in templates"])
    problems = [f"{source}:{e.sourceline or '?'}: {e.reason or e.message}" + (f" (at {e.path})" if e.path else "")
                for e in schema("template").iter_errors(tree)]
    if problems:
        raise TemplateError(problems)
    variables: dict[str, str] = {}
    specs: list[RuleSpec] = []
    for el in tree.getroot():
        if not isinstance(el.tag, str):
            continue
        where = f"{source}:{el.sourceline}"
        if el.tag == "var":
            try:
                variables[el.get("name")] = expand(el.text or "", variables)
            except KeyError as exc:
                problems.append(f"{where}: variable {el.get('name')!r} uses ${{{exc.args[0]}}}, "
                                "which is not declared before it")
            continue
        name = el.get("name")
        params: dict[str, str] = {}
        for param in el.iterfind("param"):
            try:
                params[param.get("name")] = expand(param.text or "", variables)
            except KeyError as exc:
                problems.append(f"{source}:{param.sourceline}: rule {name!r}, parameter {param.get('name')!r}: "
                                f"${{{exc.args[0]}}} is not a declared variable")
        cls, problem = import_rule(el.get("class"))
        if problem:
            problems.append(f"{where}: rule {name!r}: {problem}")
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
    return Template(source, variables, specs)


def expand(text: str, variables: dict[str, str]) -> str:
    """``${NAME}`` replaced by the variable's value; KeyError(NAME) when undeclared."""
    return _VAR.sub(lambda m: variables[m.group(1)], text)


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
