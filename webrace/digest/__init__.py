"""Page Digest (seed 004, chapter III): documents as separate containers of structure, tags,
attributes and content; a binary form that loads without parsing; Sdiff between versions.

    from webrace import digest
    d = digest.encode(html_bytes)
    d2 = digest.loads(digest.dumps(d))
    ann = digest.sdiff(old, new)

Pure library: no Scrapy.
"""

from webrace.digest.binary import dumps, loads
from webrace.digest.core import DigestError, PageDigest, decode, encode, from_tree, parse, signature
from webrace.digest.sdiff import ATTRIBUTES, BELOW, CONTENT, STRUCTURE, Annotation, edit_script, mask, sdiff

__all__ = ["ATTRIBUTES", "BELOW", "CONTENT", "STRUCTURE", "Annotation", "DigestError", "PageDigest", "decode",
           "dumps", "edit_script", "encode", "from_tree", "loads", "mask", "parse", "sdiff", "signature"]
