"""Service class descriptions (SCD): the model, and the loader that validates them.

A service class description (seed 004 section 2.3, appendix A) has three parts: type
definitions (``scd.types``), a control flow graph of the pages a member of the class
leads through (vertices typed by those types, from origin to result vertices), and
probing templates (``<examples>``): the arguments to fill a candidate's forms with, and
the type of the result to expect.

``load_scd`` validates a file against ``scd.xsd`` with xmlschema and then checks what a
schema cannot say; any problem refuses the file with an :class:`SCDError` whose lines read
``FILE:LINE: reason``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from functools import cache
from importlib.resources import files
from pathlib import Path
from typing import TYPE_CHECKING

from lxml import etree

from scd.types import (
    BUILTIN_TYPES,
    Choice,
    Element,
    PatternError,
    TypeCompiler,
    TypeDef,
    check_pattern,
    is_form_type,
    pattern_arguments,
)

if TYPE_CHECKING:
    import xmlschema

MAX_SCD_BYTES = 16 * 1024 * 1024  # a service class description is a few kilobytes


@dataclass(frozen=True)
class Vertex:
    """A state of the control flow graph: a page of type ``type``; a result vertex's
    ``result_type`` names the objects wanted from it."""

    name: str
    type: str
    origin: bool = False
    result: bool = False
    result_type: str | None = None
    post: bool = False  # an HTMLform vertex whose POST forms are queries (GET forms always are)
    allow: frozenset[str] = frozenset()  # "email", "upload": fields its query forms may carry


@dataclass(frozen=True)
class ControlFlow:
    name: str
    vertices: dict[str, Vertex]
    edges: list[tuple[str, str]]

    def origins(self) -> list[Vertex]:
        return [v for v in self.vertices.values() if v.origin]

    def results(self) -> list[Vertex]:
        return [v for v in self.vertices.values() if v.result]

    def successors(self, name: str) -> list[Vertex]:
        """The vertices an edge leads to from vertex ``name``, in the file's order."""
        return [self.vertices[dst] for src, dst in self.edges if src == name]


@dataclass(frozen=True)
class Argument:
    """An input of a probing template. ``value`` is the text to enter (for an iterator
    argument: a regex over the option values to try in turn); ``name_hints`` are regexes
    over form parameter names, ``input_types`` a regex over HTML input types; ``also`` the
    template's further ``<value>`` elements (webrace.dynabot.values tries them in turn)."""

    name: str
    type: str
    value: str
    required: bool = False
    user: bool = False
    iterator: bool = False
    name_hints: list[str] = field(default_factory=list)
    input_types: str | None = None
    also: tuple[str, ...] = ()  # further values, tried in turn when the earlier ones found nothing


@dataclass(frozen=True)
class Example:
    """A probing template: arguments and the type of the expected result."""

    arguments: list[Argument]
    result_type: str

    def values(self) -> dict[str, str]:
        """Argument name -> value, what ``{arg:NAME}`` in a pattern refers to."""
        return {a.name: a.value for a in self.arguments}


@dataclass(frozen=True)
class ServiceClass:
    name: str
    types: dict[str, TypeDef]
    controlflow: ControlFlow
    examples: list[Example]
    source: str = ""
    noresults: tuple[str, ...] = ()  # patterns of an answer that says nothing was found (<noresults>)
    _recognizer: list = field(default_factory=list, init=False, repr=False, compare=False)

    def recognizer(self) -> TypeCompiler:
        """The (shared) TypeCompiler of this class's types (and of its "no results" patterns)."""
        if not self._recognizer:
            self._recognizer.append(TypeCompiler({**self.types, **noresult_types(self.noresults)}))
        return self._recognizer[0]

    def no_results(self, text: str, values: dict[str, str] | None = None) -> str | None:
        """What ``text`` says that one of the ``<noresults>`` patterns describes ("No matches
        found."), or None."""
        recognizer = self.recognizer()
        for name in noresult_types(self.noresults):
            found = recognizer.find(name, text, values)
            if found is not None:
                return found.text
        return None

    def query_vertices(self) -> list[Vertex]:
        """The HTMLform vertices: where forms are submitted."""
        return [v for v in self.controlflow.vertices.values() if is_form_type(v.type)]


NORESULTS = "noresults:"  # the names of the "no results" patterns as types of the recogniser


def noresult_types(patterns: tuple[str, ...]) -> dict[str, TypeDef]:
    """The ``<noresults>`` patterns as atomic types (``noresults:1``...), so they run as types do."""
    return {f"{NORESULTS}{n}": TypeDef(f"{NORESULTS}{n}", "string", pattern, (), 0)
            for n, pattern in enumerate(patterns, 1)}


class SCDError(ValueError):
    """A service class description is invalid; ``problems`` holds ``file:line: reason`` lines."""

    def __init__(self, problems: Iterable[str]) -> None:
        self.problems = list(dict.fromkeys(problems))
        super().__init__("\n".join(self.problems))


def safe_parser() -> etree.XMLParser:
    return etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False, huge_tree=False)


@cache
def schema() -> xmlschema.XMLSchema:
    """``scd.xsd``, read as a package resource (found inside a zipped egg too)."""
    import xmlschema  # imported here: only loading an SCD file validates

    return xmlschema.XMLSchema(files("scd").joinpath("scd.xsd").read_text(encoding="utf-8"))


def load_scd(path_or_bytes: str | Path | bytes, source: str | None = None) -> ServiceClass:
    """Parse and validate a service class description (a file path, or the XML itself as
    bytes); raise :class:`SCDError` naming the file and line of every problem found."""
    if isinstance(path_or_bytes, bytes):
        data, source = path_or_bytes, source or "<bytes>"
    else:
        source = source or str(path_or_bytes)
        try:
            with open(path_or_bytes, "rb") as stream:
                data = stream.read(MAX_SCD_BYTES + 1)  # bounded: /dev/zero never ends
        except OSError as exc:
            raise SCDError([f"{source}: cannot read: {exc.strerror or exc}"]) from None
        if len(data) > MAX_SCD_BYTES:
            raise SCDError([f"{source}: more than {MAX_SCD_BYTES:,} bytes: no service class description is this large"])
    try:
        tree = etree.fromstring(data, safe_parser()).getroottree()
    except etree.XMLSyntaxError as exc:
        line = exc.lineno or (exc.position[0] if exc.position else 0)
        raise SCDError([f"{source}:{line}: not well-formed XML: {exc.msg}"]) from None
    if tree.docinfo.doctype:
        raise SCDError([f"{source}:1: DOCTYPE declarations (and so entities) are not allowed in SCD files"])
    problems = []
    for err in schema().iter_errors(tree):
        line = err.sourceline if err.sourceline is not None else "?"
        where = f" (at {err.path})" if err.path else ""
        problems.append(f"{source}:{line}: {err.reason or err.message}{where}")
    if problems:
        raise SCDError(problems)
    return _Builder(source).build(tree.getroot())


def _bool(element: etree._Element, attribute: str, default: bool = False) -> bool:
    value = element.get(attribute)
    return default if value is None else value.strip() in ("true", "1")


def _text(element: etree._Element | None) -> str | None:
    return None if element is None else (element.text or "").strip()


class _Builder:
    """Turns a schema-valid tree into a ServiceClass, collecting semantic problems."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.problems: list[str] = []

    def problem(self, line: int | None, reason: str) -> None:
        self.problems.append(f"{self.source}:{line or '?'}: {reason}")

    def build(self, root: etree._Element) -> ServiceClass:
        types = self.types(root.find("types"))
        flow_element = root.find("controlflow")
        raw_examples = list(root.iterfind("examples/example"))
        argument_names = {_text(a.find("name")) for a in root.iterfind("examples/example/arguments/argument")}
        types_ok = self.check_types(types, argument_names)
        controlflow = self.controlflow(flow_element, types)
        noresults = self.noresults(root.find("noresults"), argument_names)
        compiler = TypeCompiler({**types, **noresult_types(noresults)}) if types_ok else None
        examples = [self.example(e, types, compiler) for e in raw_examples]
        if self.problems:
            raise SCDError(self.problems)
        name = root.get("name") or controlflow.name or Path(self.source).stem
        service_class = ServiceClass(name, types, controlflow, examples, self.source, noresults)
        if compiler is not None:
            service_class._recognizer.append(compiler)
        return service_class

    # -- types

    def types(self, element: etree._Element) -> dict[str, TypeDef]:
        types: dict[str, TypeDef] = {}
        for node in element.iterfind("type"):
            typedef = self.typedef(node)
            if typedef.name in BUILTIN_TYPES:
                self.problem(node.sourceline, f"type {typedef.name!r} is built in and cannot be redefined")
            elif typedef.name in types:
                first = types[typedef.name].line
                self.problem(node.sourceline, f"type {typedef.name!r} is already defined at line {first}")
            else:
                types[typedef.name] = typedef
        return types

    def typedef(self, node: etree._Element) -> TypeDef:
        name = node.get("name")
        particles = []
        for child in node:
            if child.tag == "element":
                particles.append(self.element(child))
            elif child.tag == "choice":
                low, high = self.occurs(child, 1)
                particles.append(Choice(tuple(self.element(e) for e in child.iterfind("element")), low, high,
                                        child.sourceline))
        if particles and (node.get("type") or node.get("pattern") is not None):
            self.problem(node.sourceline, f"type {name!r} has elements: it takes no type or pattern attribute")
        return TypeDef(name, node.get("type"), node.get("pattern"), tuple(particles), node.sourceline)

    def element(self, node: etree._Element) -> Element:
        required = node.get("required")
        default_min = 0 if required is not None and not _bool(node, "required") else 1
        if default_min == 0 and int(node.get("minOccurs", "0")) > 0:
            self.problem(node.sourceline, 'required="false" contradicts minOccurs above 0')
        low, high = self.occurs(node, default_min)
        return Element(node.get("name"), node.get("type"), node.get("pattern"), low, high,
                       _bool(node, "compile", True), node.sourceline)

    def occurs(self, node: etree._Element, default_min: int) -> tuple[int, int | None]:
        low = int(node.get("minOccurs", default_min))
        high_text = node.get("maxOccurs", "").strip()
        high = None if high_text == "unbounded" else int(high_text) if high_text else max(low, 1)
        if high is not None and high < low:
            self.problem(node.sourceline, f"maxOccurs {high} is less than minOccurs {low}")
        return low, high

    def check_types(self, types: dict[str, TypeDef], argument_names: set[str | None]) -> bool:
        """Check references, cycles and patterns; True when the types can be compiled."""
        before = len(self.problems)
        for typedef in types.values():
            if not typedef.is_complex and typedef.base:
                self.check_reference(typedef.base, types, typedef.line, f"type {typedef.name!r}")
            for element in typedef.elements():
                if element.type:
                    what = f"type {typedef.name!r}: element" + (f" {element.name!r}" if element.name else "")
                    self.check_reference(element.type, types, element.line, what)
            patterns = [(typedef.pattern, typedef.line, f"type {typedef.name!r}")]
            patterns += [(e.pattern, e.line, f"type {typedef.name!r}: element" + (f" {e.name!r}" if e.name else ""))
                         for e in typedef.elements()]
            for pattern, line, what in patterns:
                if pattern is None:
                    continue
                try:
                    check_pattern(pattern)
                except PatternError as exc:
                    self.problem(line, f"{what}: pattern {pattern!r}: {exc}")
                for argument in sorted(pattern_arguments(pattern) - argument_names):
                    self.problem(line, f"{what}: pattern {pattern!r} refers to {{arg:{argument}}}, "
                                       "which no probing template defines")
        if len(self.problems) == before:
            self.check_cycles(types)
        if len(self.problems) == before:
            try:
                TypeCompiler(types).check()
            except PatternError as exc:
                self.problem(exc.line, str(exc))
        return len(self.problems) == before

    def check_reference(self, name: str, types: dict[str, TypeDef], line: int, what: str) -> None:
        if is_form_type(name):
            self.problem(line, f"{what}: {name} is recognised from a page's forms and cannot be part of a type")
        elif name not in types and name not in BUILTIN_TYPES:
            self.problem(line, f"{what} refers to undefined type {name!r}")

    def check_cycles(self, types: dict[str, TypeDef]) -> None:
        state: dict[str, int] = {}  # 1: being visited, 2: done
        path: list[str] = []

        def visit(name: str) -> None:
            state[name] = 1
            path.append(name)
            for ref in types[name].references():
                if ref not in types:
                    continue
                if state.get(ref) == 1:
                    cycle = " -> ".join([*path[path.index(ref):], ref])
                    self.problem(types[ref].line, f"type {ref!r} refers to itself: {cycle}")
                elif ref not in state:
                    visit(ref)
            path.pop()
            state[name] = 2

        for name in types:
            if name not in state:
                visit(name)

    def noresults(self, element: etree._Element | None, argument_names: set[str | None]) -> tuple[str, ...]:
        """The ``<noresults>`` patterns, each checked as a type's pattern is."""
        if element is None:
            return ()
        patterns = []
        for node in element.iterfind("pattern"):
            pattern = node.text or ""
            if not pattern.strip():
                self.problem(node.sourceline, "noresults: an empty pattern would match every answer")
                continue
            try:
                check_pattern(pattern)
            except PatternError as exc:
                self.problem(node.sourceline, f"noresults: pattern {pattern!r}: {exc}")
                continue
            for argument in sorted(pattern_arguments(pattern) - argument_names):
                self.problem(node.sourceline, f"noresults: pattern {pattern!r} refers to {{arg:{argument}}}, "
                                              "which no probing template defines")
            patterns.append(pattern)
        return tuple(patterns)

    # -- control flow

    def controlflow(self, node: etree._Element, types: dict[str, TypeDef]) -> ControlFlow:
        vertices: dict[str, Vertex] = {}
        lines: dict[str, int] = {}
        for v in node.iterfind("vertices/vertex"):
            vertex = Vertex(v.get("name"), v.get("type"), _bool(v, "origin"), _bool(v, "result"), v.get("resultType"),
                            _bool(v, "post"), frozenset((v.get("allow") or "").split()))
            if (vertex.post or vertex.allow) and not is_form_type(vertex.type):
                self.problem(v.sourceline, f"vertex {vertex.name!r}: post and allow describe forms; its type is "
                                           f"{vertex.type!r}, not HTMLform")
            if vertex.name in vertices:
                self.problem(v.sourceline, f"vertex {vertex.name!r} is already defined at line {lines[vertex.name]}")
                continue
            vertices[vertex.name], lines[vertex.name] = vertex, v.sourceline
            for attribute, type_name in (("type", vertex.type), ("resultType", vertex.result_type)):
                if type_name and type_name not in types and type_name not in BUILTIN_TYPES:
                    self.problem(v.sourceline, f"vertex {vertex.name!r}: {attribute} refers to undefined type "
                                               f"{type_name!r}")
        edges = []
        for e in node.iterfind("edges/edge"):
            edge = (e.get("origin"), e.get("destination"))
            unknown = [name for name in edge if name not in vertices]
            for name in dict.fromkeys(unknown):
                self.problem(e.sourceline, f"edge {edge[0]} -> {edge[1]} names unknown vertex {name!r}")
            if not unknown:
                edges.append(edge)
        flow = ControlFlow(node.get("name"), vertices, edges)
        if not flow.origins():
            self.problem(node.sourceline, f'control flow {flow.name!r} has no origin vertex (origin="true")')
        if not flow.results():
            self.problem(node.sourceline, f'control flow {flow.name!r} has no result vertex (result="true")')
        reachable = self.reachable(flow)
        for vertex in flow.results():
            if flow.origins() and vertex.name not in reachable:
                self.problem(lines[vertex.name], f"result vertex {vertex.name!r} cannot be reached from an origin")
        return flow

    @staticmethod
    def reachable(flow: ControlFlow) -> set[str]:
        seen = {v.name for v in flow.origins()}
        todo = list(seen)
        while todo:
            for vertex in flow.successors(todo.pop()):
                if vertex.name not in seen:
                    seen.add(vertex.name)
                    todo.append(vertex.name)
        return seen

    # -- probing templates

    def example(self, node: etree._Element, types: dict[str, TypeDef], compiler: TypeCompiler | None) -> Example:
        result = node.find("result")
        result_type = result.get("type")
        self.check_template_type(result_type, types, result.sourceline, "result")
        arguments = [self.argument(a, types) for a in node.iterfind("arguments/argument")]
        seen: set[str] = set()
        for argument, a in zip(arguments, node.iterfind("arguments/argument"), strict=True):
            if argument.name in seen:
                self.problem(a.sourceline, f"argument {argument.name!r} appears twice in this probing template")
            seen.add(argument.name)
        if compiler is not None:
            arguments = self.fit_values(arguments, list(node.iterfind("arguments/argument")), compiler)
        return Example(arguments, result_type)

    def argument(self, node: etree._Element, types: dict[str, TypeDef]) -> Argument:
        name = _text(node.find("name"))
        type_element = node.find("type")
        type_name = _text(type_element) or "string"
        line = type_element.sourceline if type_element is not None else node.sourceline
        self.check_template_type(type_name, types, line, f"argument {name!r}")
        hints = [h for h in node.iterfind("hints/hint")]
        input_type = node.find("hints/inputType")
        for hint in [*hints, *([input_type] if input_type is not None else [])]:
            self.check_regex(_text(hint), hint.sourceline, f"argument {name!r}: {hint.tag}")
        value_element = node.find("value")
        value = (value_element.text or "").strip()
        iterator = _bool(node, "iterator")
        if iterator:
            self.check_regex(value, value_element.sourceline, f"iterator argument {name!r}: value")
        further = ((e.text or "").strip() for e in node.findall("value")[1:])
        also = tuple(dict.fromkeys(v for v in further if v and v != value))
        if also and iterator:
            self.problem(value_element.sourceline, f"iterator argument {name!r}: one value (a regex over the options)")
        return Argument(name, type_name, value, _bool(node, "required"), _bool(node, "user"), iterator,
                        [_text(h) for h in hints], _text(input_type), also)

    def check_template_type(self, type_name: str, types: dict[str, TypeDef], line: int, what: str) -> None:
        if is_form_type(type_name):
            self.problem(line, f"{what}: type {type_name} describes pages, not values")
        elif type_name not in types and type_name not in BUILTIN_TYPES:
            self.problem(line, f"{what} refers to undefined type {type_name!r}")

    def check_regex(self, pattern: str, line: int, what: str) -> None:
        try:
            re.compile(pattern)
        except re.error as exc:
            self.problem(line, f"{what} {pattern!r}: not a valid regular expression: {exc}")

    def fit_values(self, arguments: list[Argument], nodes: list[etree._Element],
                   compiler: TypeCompiler) -> list[Argument]:
        """A value broken over lines (a long sequence in appendix A) loses its whitespace
        when only that makes it an instance of its type; a value still not an instance of
        its type is a problem."""
        values = {a.name: a.value for a in arguments}
        fitted = []
        for argument, node in zip(arguments, nodes, strict=True):
            line = node.find("value").sourceline
            if argument.iterator or is_form_type(argument.type) or argument.type not in compiler.types \
                    and argument.type not in BUILTIN_TYPES:
                fitted.append(argument)
                continue
            try:
                if not compiler.is_instance(argument.type, argument.value, values):
                    squeezed = "".join(argument.value.split())
                    if squeezed != argument.value and compiler.is_instance(argument.type, squeezed, values):
                        argument = replace(argument, value=squeezed)
                    else:
                        self.problem(line, f"argument {argument.name!r}: value {_short(argument.value)!r} is not "
                                           f"an instance of type {argument.type!r}")
                for other in argument.also:
                    if not compiler.is_instance(argument.type, other, {**values, argument.name: other}):
                        self.problem(line, f"argument {argument.name!r}: value {_short(other)!r} is not "
                                           f"an instance of type {argument.type!r}")
            except ValueError as exc:  # the type needs another argument's value
                self.problem(line, f"argument {argument.name!r}: {exc}")
            fitted.append(argument)
        return fitted


def _short(text: str, size: int = 60) -> str:
    return text if len(text) <= size else text[: size - 3] + "..."
