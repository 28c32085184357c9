"""Placeholder for the reference pages (mkdocs-gen-files): another change replaces this script
with one that generates them from the commands, settings.py, the web API and the schemas. Until
then each page is its heading, so the site's navigation builds."""

import mkdocs_gen_files

PAGES = {
    "reference/commands.md": "Commands",
    "reference/settings.md": "Settings",
    "reference/api.md": "Web API",
    "reference/schemas.md": "URD and SCD schemas",
}

for path, title in PAGES.items():
    with mkdocs_gen_files.open(path, "w") as page:
        page.write(f"# {title}\n")
