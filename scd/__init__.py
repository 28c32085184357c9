"""Service class descriptions for DynaBot (seed 004 section 2.3, appendix A).

A service class description names the types a member of a class of Deep Web services
reads and writes, the pages it leads through (a control flow graph) and the probes that
tell a member from a non-member. This package is a library: it imports neither Scrapy
nor Twisted.

    >>> sc = load_scd("serviceclasses/nucleotide_blast.xml")
    >>> sc.recognizer().find("AlignmentSequence", "Query: 280 TGGCAGGCGTCCT 292").elements["m"]
    ['280']
"""

from scd.model import Argument, ControlFlow, Example, SCDError, ServiceClass, Vertex, load_scd
from scd.types import (
    BUILTIN_TYPES,
    Choice,
    Element,
    Match,
    PatternError,
    TypeCompiler,
    TypeDef,
    is_form_type,
)

__all__ = [
    "BUILTIN_TYPES",
    "Argument",
    "Choice",
    "ControlFlow",
    "Element",
    "Example",
    "Match",
    "PatternError",
    "SCDError",
    "ServiceClass",
    "TypeCompiler",
    "TypeDef",
    "Vertex",
    "is_form_type",
    "load_scd",
]
