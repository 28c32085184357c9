"""Scrapy's HttpCompressionMiddleware, recording what it undid.

Scrapy decodes a gzip/deflate/br/zstd body and removes ``Content-Encoding``, while the
``Content-Length`` it leaves is the compressed one (and Twisted has already removed
``Transfer-Encoding``): the stored header text would then describe neither the stored body
nor how it came over the wire. Here, after decoding, the response's headers are made true of
the decoded body and keep the wire's story (:func:`webrace.store.warc.decoded_headers`):
``X-WebRACE-Orig-Content-Encoding`` (the server's value), ``X-WebRACE-Orig-Content-Length``
(its length, or the bytes received for a chunked answer), ``Content-Length`` the decoded
length. The meta-info store, the WARC export and the crawl's own WARC files read them there.
"""

from __future__ import annotations

from scrapy import Request
from scrapy.downloadermiddlewares.httpcompression import HttpCompressionMiddleware as ScrapyHttpCompression
from scrapy.http import Response

from webrace.store.warc import decoded_headers


class HttpCompressionMiddleware(ScrapyHttpCompression):
    def process_response(self, request: Request, response: Response) -> Request | Response:
        wire = response.headers.getlist(b"Content-Encoding")
        if not wire or request.method == "HEAD":
            return super().process_response(request, response)
        fields = [(name.decode("latin-1"), value.decode("latin-1"))
                  for name, values in response.headers.items() for value in values]
        decoded = super().process_response(request, response)
        if not isinstance(decoded, Response):
            return decoded
        left = [value.decode("latin-1") for value in _tokens(decoded.headers.getlist(b"Content-Encoding"))]
        if len(left) >= len(_tokens(wire)):
            return decoded  # nothing undone (an encoding Scrapy cannot decode): the body is as sent
        decoded.headers.clear()
        for name, value in decoded_headers(fields, len(decoded.body), len(response.body), left):
            decoded.headers.appendlist(name, value)
        return decoded


def _tokens(values: list[bytes]) -> list[bytes]:
    return [token.strip() for value in values for token in value.split(b",") if token.strip()]
