"""The documentation's reference, made from the code so that it cannot drift from it
(Diátaxis's reference: described, not explained). Each module returns Markdown:

- ``commands``  every ``scrapy`` command of ``webrace.commands``: syntax, options, exit statuses
- ``settings``  every setting of ``webrace/settings.py``, with its default and comment
- ``api``       the web app's OpenAPI description (``webrace.web.openapi``), and its pages
- ``schemas``   the XML Schemas (URD, SCD, ACI, meta-info, rules template), element by element

``docs/gen_reference.py`` writes them into the site (mkdocs-gen-files) when it is built;
:func:`files` is everything it writes.
"""

from __future__ import annotations

from webrace.reference.api import api_page, openapi_json
from webrace.reference.commands import commands_page
from webrace.reference.schemas import schema_files, schemas_page
from webrace.reference.settings import settings_page


def files() -> dict[str, str]:
    """Path in the documentation -> its text: the four pages, the OpenAPI document, the schemas."""
    made = {
        "reference/commands.md": commands_page(),
        "reference/settings.md": settings_page(),
        "reference/api.md": api_page(),
        "reference/openapi.json": openapi_json(),
        "reference/schemas.md": schemas_page(),
    }
    made.update({f"reference/schemas/{name}": source for name, source in schema_files().items()})
    return made


__all__ = ["files"]
