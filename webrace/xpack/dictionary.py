"""The preset dictionary of XPack's codec 5 (raw deflate primed with common labels), and
the table of common element names the header's tag list is written with.

A small document's label dictionary (element name plus attribute names, see
:mod:`webrace.xpack.format`) is a few hundred bytes that a general compressor cannot shrink
much on its own; primed with the labels HTML and XHTML pages most often use (written from
the HTML elements and their usual attributes, not from any benchmark document), deflate
halves it (measured: gtk-doc XHTML 4,059 -> 2,139 bytes over 22 pages; 114 other Debian
HTML pages 8,982 -> 5,858). The dictionary is part of the format: changing it needs a new
magic number.

:data:`TAG_NAMES` lets the header carry a document's tag list uncompressed at one byte per
common name (a gtk-doc page: about 24 tags in 26 bytes), so that the tag list is read without
decompressing anything (see :mod:`webrace.xpack.format`). It is part of the format too:
names are only ever appended, below :data:`MAX_TAG_CODES` entries.
"""

from __future__ import annotations

SEP = "\x01"
_ELEMENTS = """html head title body div p br hr h1 h2 h3 h4 h5 h6 ul ol li dl dt dd table thead tbody tfoot tr th td col
colgroup caption pre code tt em strong b i u s small big sup sub blockquote cite q abbr kbd var samp dfn address
center font nav header footer main section article aside figure figcaption noscript form fieldset legend label
select option optgroup textarea button iframe object param embed map area span img a link meta script style
base""".split()
_ATTRIBUTES = {
    "meta": ["charset", "name content", "http-equiv content", "property content", "content name"],
    "link": ["rel href", "rel type href", "href rel type", "rel href type", "rel title href", "rel type title href",
             "type rel href"],
    "script": ["src", "type src", "type", "src type", "language type"],
    "style": ["type"], "html": ["lang", "xmlns", "xml:lang lang", "lang xml:lang"],
    "div": ["class", "id", "id class", "class id", "align", "style", "class style"],
    "span": ["class", "id", "style", "title"], "p": ["class", "align", "id"],
    "a": ["href", "name", "id", "class href", "href class", "href title", "title href", "href target", "accesskey href",
          "href rel", "rel href", "name href"],
    "img": ["src alt", "alt src", "src width height alt", "src alt width height", "class src alt",
            "width height src alt", "src border alt", "src"],
    "table": ["class", "width border cellpadding cellspacing", "border", "class width", "width", "summary",
              "cellpadding cellspacing border width", "width cellpadding cellspacing border", "class summary", "id"],
    "td": ["class", "align", "valign", "colspan", "width", "nowrap", "class colspan", "align valign", "width align"],
    "th": ["class", "align", "colspan", "scope", "width"], "tr": ["class", "valign", "id"],
    "col": ["width", "class"], "colgroup": ["span"], "h1": ["class", "id"], "h2": ["class", "id"],
    "h3": ["class", "id"], "ul": ["class", "id", "type"], "ol": ["class", "type", "start"], "li": ["class", "id"],
    "pre": ["class"], "code": ["class"],
    "form": ["action method", "method action", "action", "id action method", "name action method"],
    "input": ["type name value", "type name", "name type", "type value", "type name size", "type name id",
              "type name value checked"],
    "select": ["name", "name id"], "option": ["value", "value selected", "selected value"],
    "textarea": ["name rows cols", "name"], "button": ["type", "type class"], "label": ["for"],
    "iframe": ["src", "src width height"], "abbr": ["title"],
    "body": ["class", "bgcolor text link vlink alink", "id", "onload"], "font": ["size", "color", "face"],
    "dt": ["id"], "acronym": ["title"], "h4": ["class"], "em": ["class"], "strong": ["class"], "tt": ["class"],
    "i": ["class"], "b": ["class"],
}


def _labels() -> list[str]:
    labels = ["#document", "#ws", "#text", "#comment", "#pi"]
    for name in _ELEMENTS:
        labels.append(name)
        labels.extend(SEP.join([name, *attributes.split()]) for attributes in _ATTRIBUTES.get(name, []))
    return labels


# deflate prefers near matches: the plain names last, nearest the data
DICTIONARY = "\x00".join(["{http://www.w3.org/1999/xhtml}" + label for label in _labels() if label[0] != "#"]
                         + _labels()).encode()


XHTML = "http://www.w3.org/1999/xhtml"
MAX_TAG_CODES = 0xFD  # codes 0xFD-0xFF are the tag list's escapes
TAG_NAMES = tuple(_ELEMENTS + """input acronym ins del strike wbr time mark source picture video audio canvas
template details summary dialog menu dir frame frameset noframes applet nobr svg path g rect circle line
polyline polygon text defs use symbol math mi mo mn mrow msup msub mfrac rss channel item description guid
pubDate feed entry id updated published author name email uri content category rdf""".split())
if len(TAG_NAMES) >= MAX_TAG_CODES:  # the format's limit: a tag code must not collide with an escape
    raise RuntimeError(f"{len(TAG_NAMES)} tag names leave no room for the escapes {MAX_TAG_CODES:#x}-0xff")
