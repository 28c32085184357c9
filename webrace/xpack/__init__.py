"""XPack (seed 004, chapter IV): XML packed into separately compressed containers that can be
questioned without unpacking the whole document. Pure library: no Scrapy.

    from webrace import xpack
    packed = xpack.pack(xml_bytes)
    xpack.stat(packed)          # {"nodes": ..., "tags": [...], "containers": {...}}
    xml_again = xpack.unpack(packed)   # equal to xml_bytes under C14N
"""

from webrace.xpack.format import PackedDocument, canonical, pack, stat, unpack
from webrace.xpack.operators import XPackError

__all__ = ["PackedDocument", "XPackError", "canonical", "pack", "stat", "unpack"]
