"""Writes the reference pages into the documentation site as it is built (the mkdocs-gen-files
plugin runs this script): commands, settings, the web API and the schemas, made from the code
by :mod:`webrace.reference`. Nothing is written into the checkout."""

import mkdocs_gen_files

from webrace.reference import files

for path, content in files().items():
    with mkdocs_gen_files.open(path, "w") as out:
        out.write(content)
    if path.endswith(".md"):
        mkdocs_gen_files.set_edit_path(path, "gen_reference.py")
