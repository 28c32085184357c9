"""The service class type system (seed 004 section 2.3.1) and its bounded recogniser.

Types are regular: an *atomic* type is a built-in type or a restriction of one by a
pattern; a *complex* type is a sequence of elements and ``<choice>`` groups, each element
a reference to another type or an inline pattern, repeated ``minOccurs``..``maxOccurs``
times. A type compiles to ONE regular expression (references inlined, repetitions as
``{m,n}``, choices as alternations) and the recogniser searches a page with it.

Patterns are Python regular expressions, with these additions and limits:

- ``[:alpha:]``, ``[:digit:]``, ``[:alnum:]``, ``[:space:]`` (and ``upper``, ``lower``,
  ``xdigit``, ``word``, ``blank``) are POSIX classes inside brackets (``[[:alpha:]_]``);
  written alone (``[:alpha:]+:``, as in the seed's Figure 2) they are the class itself;
- ``{arg:NAME}`` stands for the value of the probing argument ``NAME`` in the current
  probe: it is replaced, at match time, by that value escaped (runs of whitespace in it
  match any run of whitespace);
- capturing groups are only groups (elements, not groups, are what a match reports), so
  backreferences are refused; a leading ``(?i)`` applies to the pattern only;
- ``\\d``, ``\\s``, ``\\w`` and ``\\b`` are ASCII, ``.`` does not match a newline (Python's
  semantics): a pattern that must span lines says so (``[\\s\\S]``).

Element ``compile="false"`` makes a *landmark*: it is separated from its neighbours (and,
repeated, from its own next occurrence) by any text, matched lazily, e.g. the ``Score =``
line of a BLAST alignment somewhere after its subject line.

Element values: the expression a type compiles to has no groups at all, so RE2 finds
matches with its fast DFA (capturing groups would make it run its NFA over the whole match
to report them). A match is then taken apart level by level, over its own text only: a
sequence is re-matched with one group per part, a repetition is split by scanning for
successive instances of its piece, so a repeated element reports every value it took,
not only the last as a regex group would. Element names are free text (``start-align-pos``)
and the same name may appear at several places; ``Match.elements`` lists all their values.

A hostile page cannot stall the recogniser: patterns run on RE2, which is linear in the
text, and only a pattern RE2 refuses (lookarounds...) runs on Python's ``re`` (ASCII
classes too), over at most the first ``fallback_max_text`` characters (64 KB): Python's
engine backtracks, and the small cap bounds how long that can take. RE2 refuses repetition counts above
1000, so larger ``minOccurs``/``maxOccurs`` and ``{m,n}`` bounds are capped at 1000 (a
``{2000}`` means ``{1000}``); the product of nested counts must stay within 1000 too, or
the type runs on the capped Python fallback. The scanned text is capped (2 MB) and so is
the number of matches returned; empty matches (of a type that can match nothing) are not
reported.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import re2

FORM_TYPE = "HTMLform"
BUILTIN_PATTERNS = {
    "string": r"[\s\S]*?",  # any text (lazily: as an element, the shortest that fits)
    "integer": r"[-+]?\d+",
    "float": r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?",
    "whitespace": r"\s+",
}
BUILTIN_TYPES = frozenset([*BUILTIN_PATTERNS, FORM_TYPE])

GAP = r"[\s\S]*?"  # what separates a landmark (compile="false") from its neighbours
RE2_MAX_REPEAT = 1000  # RE2's largest repetition count
RE2_MAX_MEM = 64 << 20  # room for the DFA of a whole inlined page type
MAX_TEXT = 2 * 1024 * 1024  # characters of a page scanned
FALLBACK_MAX_TEXT = 64 * 1024  # characters scanned by a pattern only Python's re can run
MAX_VALUES = 10_000  # element values reported per match

_MARK = "\x00"  # brackets an argument name in a translated pattern (XML text cannot hold NUL)
_ARG = re.compile(r"\{arg:([A-Za-z_][\w.-]*)\}")
_MARKED_ARG = re.compile("\x00([^\x00]*)\x00")
_QUANTIFIER = re.compile(r"\{(\d*)(,?)(\d*)\}")
_LEADING_FLAGS = re.compile(r"\(\?([a-zA-Z]+)\)")
_POSIX_NAME = re.compile(r"\[:([a-z]+):\]")
_POSIX = {
    "alpha": "a-zA-Z",
    "digit": "0-9",
    "alnum": "a-zA-Z0-9",
    "space": r"\s",
    "upper": "A-Z",
    "lower": "a-z",
    "xdigit": "0-9A-Fa-f",
    "word": r"\w",
    "blank": r" \t",
}


def is_form_type(name: str) -> bool:
    """True for the types the analyzer recognises from a page's forms, not from its text."""
    return name == FORM_TYPE


def is_builtin(name: str) -> bool:
    return name in BUILTIN_TYPES


class PatternError(ValueError):
    """A type or pattern that cannot be compiled; ``line`` is where it is defined (0: unknown)."""

    def __init__(self, message: str, line: int = 0) -> None:
        super().__init__(message)
        self.line = line


@dataclass(frozen=True)
class Element:
    """One element of a complex type: a reference to a type, or an inline pattern
    (restricting ``type``, ``string`` when absent). ``max_occurs`` None is unbounded."""

    name: str | None = None
    type: str | None = None
    pattern: str | None = None
    min_occurs: int = 1
    max_occurs: int | None = 1
    compile: bool = True  # False: a landmark, separated from its neighbours by any text
    line: int = field(default=0, compare=False, repr=False)


@dataclass(frozen=True)
class Choice:
    """Exactly one of ``elements``, repeated ``min_occurs``..``max_occurs`` times."""

    elements: tuple[Element, ...]
    min_occurs: int = 1
    max_occurs: int | None = 1
    line: int = field(default=0, compare=False, repr=False)


@dataclass(frozen=True)
class TypeDef:
    """A named type: atomic (``base`` restricted by ``pattern``) or complex (``particles``)."""

    name: str
    base: str | None = None
    pattern: str | None = None
    particles: tuple[Element | Choice, ...] = ()
    line: int = field(default=0, compare=False, repr=False)

    @property
    def is_complex(self) -> bool:
        return bool(self.particles)

    def elements(self) -> Iterator[Element]:
        for particle in self.particles:
            yield from particle.elements if isinstance(particle, Choice) else (particle,)

    def references(self) -> list[str]:
        """The names of the types this one is built from, in order."""
        if not self.is_complex:
            return [self.base] if self.base else []
        return [element.type for element in self.elements() if element.type]


@dataclass(frozen=True)
class Match:
    """An instance of ``type`` at ``text[start:end]`` of the scanned text; ``elements``
    maps each named element to the values it took, in document order."""

    type: str
    start: int
    end: int
    text: str
    elements: dict[str, list[str]]


# -- patterns ------------------------------------------------------------------------------


def translate_pattern(pattern: str) -> str:
    """``pattern`` as a group-free regex fragment both RE2 and Python read alike
    (POSIX classes expanded, ``{arg:NAME}`` marked, counts capped); raises PatternError."""
    flags = _LEADING_FLAGS.match(pattern)
    if flags:  # a global flag would be illegal once the pattern is embedded in a type
        return f"(?{flags[1]}:{translate_pattern(pattern[flags.end():])})"
    out: list[str] = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            if i + 1 == len(pattern):
                raise PatternError("ends with a lone backslash")
            if pattern[i + 1] in "123456789":
                raise PatternError(f"backreferences (\\{pattern[i + 1]}) are not supported: types are regular")
            out.append(pattern[i : i + 2])
            i += 2
        elif c == "[":
            i = _bracket(pattern, i, out)
        elif c == "(":
            i = _group(pattern, i, out)
        elif c == "{":
            i = _brace(pattern, i, out)
        else:
            out.append(c)
            i += 1
    return "".join(out)


def pattern_arguments(pattern: str) -> set[str]:
    """The probing arguments a pattern refers to with ``{arg:NAME}``."""
    return set(_ARG.findall(pattern))


def check_pattern(pattern: str) -> str:
    """Translate and compile ``pattern`` as Python would; return the translation or raise
    PatternError naming what is wrong."""
    translated = translate_pattern(pattern)
    try:
        re.compile(_fill(translated, None, dummy=True), re.ASCII)
    except re.error as exc:
        raise PatternError(f"not a valid regular expression: {exc}") from None
    return translated


def _checked(pattern: str) -> str:
    try:
        return check_pattern(pattern)
    except PatternError as exc:
        raise PatternError(f"pattern {pattern!r}: {exc}") from None


def escape_value(value: str) -> str:
    """A probing argument's value as a literal regex fragment: letters and digits as they
    are, other ASCII characters as ``\\xHH``, runs of whitespace as ``\\s+``."""
    parts = []
    for run in re.split(r"(\s+)", value.strip()):
        if run.isspace():
            parts.append(r"\s+")
        else:
            parts.append("".join(ch if ch.isalnum() or not ch.isascii() else f"\\x{ord(ch):02x}" for ch in run))
    return "".join(parts)


def _bracket(pattern: str, i: int, out: list[str]) -> int:
    alone = _POSIX_NAME.match(pattern, i)
    if alone and alone[1] in _POSIX:  # "[:alpha:]+" (Figure 2) means the class itself
        out.append(f"[{_POSIX[alone[1]]}]")
        return alone.end()
    j = i + 1
    body = ["["]
    if pattern.startswith("^", j):
        body.append("^")
        j += 1
    if pattern.startswith("]", j):
        body.append(r"\]")
        j += 1
    while j < len(pattern) and pattern[j] != "]":
        c = pattern[j]
        if c == "\\":
            body.append(pattern[j : j + 2])
            j += 2
        elif c == "[":
            posix = _POSIX_NAME.match(pattern, j)
            if posix:
                if posix[1] not in _POSIX:
                    raise PatternError(f"unknown POSIX class [:{posix[1]}:]")
                body.append(_POSIX[posix[1]])
                j = posix.end()
            else:
                body.append(r"\[")
                j += 1
        elif c in "&~|":  # doubled, these are set operations to future Pythons
            body.append("\\" + c)
            j += 1
        else:
            body.append(c)
            j += 1
    if j >= len(pattern):
        raise PatternError("unterminated character class '['")
    out.append("".join(body) + "]")
    return j + 1


def _group(pattern: str, i: int, out: list[str]) -> int:
    if pattern.startswith("(?P=", i):
        raise PatternError("backreferences ((?P=name)) are not supported: types are regular")
    if pattern.startswith(("(?P<", "(?<"), i) and pattern[i + 3 : i + 4] not in ("=", "!"):
        end = pattern.find(">", i)
        if end < 0:
            raise PatternError("unterminated group name")
        out.append("(?:")
        return end + 1
    if pattern.startswith("(?#", i):
        end = pattern.find(")", i)
        return len(pattern) if end < 0 else end + 1
    if pattern.startswith("(?", i):
        out.append("(?")
        return i + 2
    out.append("(?:")
    return i + 1


def _brace(pattern: str, i: int, out: list[str]) -> int:
    arg = _ARG.match(pattern, i)
    if arg:
        out.append(f"{_MARK}{arg[1]}{_MARK}")
        return arg.end()
    count = _QUANTIFIER.match(pattern, i)
    if count and (count[1] or count[3]) and out:
        low, comma, high = count[1], count[2], count[3]
        low = str(min(int(low or 0), RE2_MAX_REPEAT))
        high = str(min(int(high), RE2_MAX_REPEAT)) if high else ""
        out.append("{" + low + ("," + high if comma else "") + "}")
        return count.end()
    out.append(r"\{")  # a literal brace (RE2 and Python disagree on "{,n}" and stray braces)
    return i + 1


def _fill(regex: str, values: Mapping[str, str] | None, dummy: bool = False, type_name: str = "") -> str:
    """Replace argument marks by the (escaped) values of the current probe."""

    def value(match: re.Match) -> str:
        if dummy:
            return "x"
        if values is None or match[1] not in values:
            raise ValueError(f"type {type_name!r} needs the value of probing argument {match[1]!r} (pass values=)")
        return escape_value(values[match[1]])

    return _MARKED_ARG.sub(value, regex) if _MARK in regex else regex


@lru_cache(maxsize=512)
def compile_regex(regex: str) -> tuple[Any, bool]:
    """``(compiled, is_re2)``: RE2 when it accepts the regex, else Python's re (ASCII)."""
    options = re2.Options()
    options.log_errors = False
    options.max_mem = RE2_MAX_MEM
    try:
        return re2.compile(regex, options=options), True
    except re2.error:
        pass
    try:
        return re.compile(regex, re.ASCII), False
    except re.error as exc:
        raise PatternError(f"not a valid regular expression: {exc}") from None


# -- compiling types -----------------------------------------------------------------------


@dataclass(frozen=True)
class _Node:
    """A compiled piece of a type: ``regex`` is group-free and matches the piece alone;
    ``children`` let a match be taken apart again to report element values."""

    kind: str  # leaf | element | seq | alt | rep
    regex: str
    children: tuple[_Node, ...] = ()
    name: str | None = None
    loose_start: bool = False  # begins with a landmark: whatever precedes it is separated by a gap
    loose_end: bool = False
    named: bool = False  # contains a named element

    @property
    def loose(self) -> bool:
        return self.loose_start or self.loose_end


def _leaf(regex: str) -> _Node:
    return _Node("leaf", f"(?:{regex})")


def _element(child: _Node, name: str | None, landmark: bool) -> _Node:
    if name is None and not landmark:
        return child
    return _Node(
        "element", child.regex, (child,), name,
        landmark or child.loose_start, landmark or child.loose_end, name is not None or child.named,
    )


def _joined(children: Sequence[_Node], wrap: str = "{}") -> str:
    parts = [wrap.format(children[0].regex)]
    for before, after in zip(children, children[1:], strict=False):
        if before.loose_end or after.loose_start:
            parts.append(GAP)
        parts.append(wrap.format(after.regex))
    return "".join(parts)


def _seq(children: Sequence[_Node]) -> _Node:
    if len(children) == 1:
        return children[0]
    return _Node(
        "seq", f"(?:{_joined(children)})", tuple(children), None,
        children[0].loose_start, children[-1].loose_end, any(c.named for c in children),
    )


def _alt(children: Sequence[_Node]) -> _Node:
    if len(children) == 1:
        return children[0]
    return _Node(
        "alt", "(?:" + "|".join(c.regex for c in children) + ")", tuple(children), None,
        any(c.loose_start for c in children), any(c.loose_end for c in children), any(c.named for c in children),
    )


def _quantifier(low: int, high: int | None) -> str:
    if high is None:
        return {0: "*", 1: "+"}.get(low, f"{{{low},}}")
    if low == high:
        return "" if low == 1 else f"{{{low}}}"
    return "?" if (low, high) == (0, 1) else f"{{{low},{high}}}"


def _rep(child: _Node, low: int, high: int | None) -> _Node:
    low = min(low, RE2_MAX_REPEAT)
    high = None if high is None else min(high, RE2_MAX_REPEAT)
    if (low, high) == (1, 1):
        return child
    if high == 0:
        return _leaf("")
    x = child.regex
    if child.loose:  # landmarks: occurrences are separated by any text
        more = _quantifier(max(low - 1, 0), None if high is None else high - 1)
        regex = x + (f"(?:{GAP}{x}){more}" if more != "{0}" else "")
        regex = f"(?:{regex})" if low else f"(?:{regex})?"
    else:
        regex = f"(?:{x}){_quantifier(low, high)}"
    return _Node("rep", regex, (child,), None, child.loose_start, child.loose_end, child.named)


class TypeCompiler:
    """Compiles the types of a service class and recognises their instances in text.

    ``TypeCompiler(service_class)`` (anything with a ``types`` mapping, or the mapping
    itself). Types are compiled on first use; ``check()`` compiles them all.
    """

    def __init__(self, service_class: Any, *, max_text: int = MAX_TEXT,
                 fallback_max_text: int = FALLBACK_MAX_TEXT, max_values: int = MAX_VALUES) -> None:
        types = service_class.types if hasattr(service_class, "types") else service_class
        self.types: dict[str, TypeDef] = dict(types)
        self.max_text = max_text
        self.fallback_max_text = fallback_max_text
        self.max_values = max_values
        self._nodes: dict[str, _Node] = {}

    # -- compiling

    def check(self) -> None:
        """Compile every type; raise PatternError (with the defining line) at the first
        that cannot be."""
        for name in self.types:
            self._node(name)

    def pattern(self, type_name: str) -> str:
        """The type's regular expression, ``{arg:NAME}`` left in place."""
        return _MARKED_ARG.sub(r"{arg:\1}", self._node(type_name).regex)

    def arguments(self, type_name: str) -> set[str]:
        """The probing arguments whose values the type's patterns need."""
        return set(_MARKED_ARG.findall(self._node(type_name).regex))

    def compiled(self, type_name: str, values: Mapping[str, str] | None = None) -> Any:
        """The compiled expression the recogniser runs for the type: an RE2 object
        (``re2._Regexp``) unless RE2 refused it, then a ``re.Pattern``."""
        return self._engine(self._node(type_name), values, type_name)[0]

    def uses_re2(self, type_name: str, values: Mapping[str, str] | None = None) -> bool:
        """True when the type runs on RE2 (linear time, the whole capped text scanned)."""
        return self._engine(self._node(type_name), values, type_name)[1]

    def _node(self, name: str, stack: tuple[str, ...] = ()) -> _Node:
        node = self._nodes.get(name)
        if node is not None:
            return node
        if is_form_type(name):
            raise PatternError(f"type {name} is recognised from a page's forms, not from its text")
        if name in BUILTIN_PATTERNS:
            node = _leaf(BUILTIN_PATTERNS[name])
        elif name not in self.types:
            raise PatternError(f"undefined type {name!r}")
        elif name in stack:
            cycle = " -> ".join([*stack[stack.index(name):], name])
            raise PatternError(f"type {name!r} refers to itself: {cycle}", self.types[name].line)
        else:
            node = self._type(self.types[name], (*stack, name))
        self._nodes[name] = node
        return node

    def _type(self, typedef: TypeDef, stack: tuple[str, ...]) -> _Node:
        try:
            if not typedef.is_complex:
                base = self._node(typedef.base or "string", stack)
                if typedef.pattern is None:
                    return base
                if self._is_complex(typedef.base or "string"):
                    raise PatternError(f"a pattern cannot restrict the complex type {typedef.base!r}")
                return _leaf(_checked(typedef.pattern))
            return _seq([self._particle(p, stack) for p in typedef.particles])
        except PatternError as exc:
            if exc.line:
                raise
            raise PatternError(f"type {typedef.name!r}: {exc}", typedef.line) from None

    def _particle(self, particle: Element | Choice, stack: tuple[str, ...]) -> _Node:
        if isinstance(particle, Choice):
            node = _alt([self._particle(e, stack) for e in particle.elements])
            return _rep(node, particle.min_occurs, particle.max_occurs)
        try:
            if particle.pattern is not None:
                if particle.type and self._is_complex(particle.type):
                    raise PatternError(f"a pattern cannot restrict the complex type {particle.type!r}")
                child = _leaf(_checked(particle.pattern))
            else:
                child = self._node(particle.type or "string", stack)
        except PatternError as exc:
            if exc.line:
                raise
            what = f"element {particle.name!r}" if particle.name else "element"
            raise PatternError(f"{what}: {exc}", particle.line) from None
        return _rep(_element(child, particle.name, not particle.compile), particle.min_occurs, particle.max_occurs)

    def _is_complex(self, name: str) -> bool:
        typedef = self.types.get(name)
        return typedef is not None and typedef.is_complex

    def _engine(self, node: _Node, values: Mapping[str, str] | None, type_name: str) -> tuple[Any, bool, int]:
        compiled, is_re2 = compile_regex(_fill(node.regex, values, type_name=type_name))
        return compiled, is_re2, self.max_text if is_re2 else self.fallback_max_text

    # -- recognising

    def find(self, type_name: str, text: str, values: Mapping[str, str] | None = None) -> Match | None:
        """The first instance of the type in ``text`` (empty instances do not count)."""
        found = self.find_all(type_name, text, values, limit=1)
        return found[0] if found else None

    def find_all(self, type_name: str, text: str, values: Mapping[str, str] | None = None,
                 limit: int = 100) -> list[Match]:
        """Up to ``limit`` non-overlapping instances of the type, left to right, in the
        first ``max_text`` characters of ``text`` (``fallback_max_text`` for a type RE2
        cannot run). ``values`` gives the probing arguments ``{arg:NAME}`` refers to."""
        node = self._node(type_name)
        compiled, _, cap = self._engine(node, values, type_name)
        text = text[:cap]
        matches: list[Match] = []
        empties = 0
        for found in compiled.finditer(text):
            start, end = found.span()
            if start == end:
                empties += 1
                if empties > 10 * limit + 1000:  # a type that matches nothing everywhere
                    break
                continue
            budget = [self.max_values]
            elements: dict[str, list[str]] = {}
            self._take_apart(node, text[start:end], values, type_name, elements, budget)
            matches.append(Match(type_name, start, end, text[start:end], elements))
            if len(matches) >= limit:
                break
        return matches

    def is_instance(self, type_name: str, value: str, values: Mapping[str, str] | None = None) -> bool:
        """True when the whole of ``value`` is an instance of the type (and, for a
        restriction, of its base type too)."""
        if is_form_type(type_name):
            return False
        compiled, _, cap = self._engine(self._node(type_name), values, type_name)
        if len(value) > cap or compiled.fullmatch(value) is None:
            return False
        typedef = self.types.get(type_name)
        if typedef is not None and not typedef.is_complex and typedef.pattern is not None and typedef.base:
            return self.is_instance(typedef.base, value, values)
        return True

    def _take_apart(self, node: _Node, text: str, values: Mapping[str, str] | None, type_name: str,
                    out: dict[str, list[str]], budget: list[int]) -> None:
        """Record the values of the named elements inside ``text``, a whole instance of
        ``node``. Repetitions are split by scanning for successive instances of the
        repeated piece; at most ``max_values`` values are recorded per match."""
        if not node.named or budget[0] <= 0:
            return
        if node.kind == "element":
            if node.name is not None:
                out.setdefault(node.name, []).append(text)
                budget[0] -= 1
            self._take_apart(node.children[0], text, values, type_name, out, budget)
        elif node.kind == "seq":
            split = self._run(f"(?:{_joined(node.children, '({})')})", values, type_name, text, "fullmatch")
            if split is not None:
                for index, child in enumerate(node.children, start=1):
                    if child.named and split.start(index) >= 0:
                        start, end = split.span(index)
                        self._take_apart(child, text[start:end], values, type_name, out, budget)
        elif node.kind == "alt":
            for child in node.children:
                if self._run(child.regex, values, type_name, text, "fullmatch") is not None:
                    self._take_apart(child, text, values, type_name, out, budget)
                    break
        elif node.kind == "rep":
            child = node.children[0]
            for piece in self._run(child.regex, values, type_name, text, "finditer") or ():
                if budget[0] <= 0:
                    break
                if piece.end() > piece.start():
                    self._take_apart(child, piece.group(), values, type_name, out, budget)

    def _run(self, regex: str, values: Mapping[str, str] | None, type_name: str, text: str, how: str) -> Any:
        compiled, is_re2 = compile_regex(_fill(regex, values, type_name=type_name))
        if not is_re2 and len(text) > self.fallback_max_text:
            return None
        return getattr(compiled, how)(text)
