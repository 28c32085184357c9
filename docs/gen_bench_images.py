"""The benchmarks' plots into the site (mkdocs-gen-files): each bench/*.py writes its PNG beside
itself, and the benchmark pages show them as img/bench/NAME.png, so the site has no copy to
keep in step."""

from pathlib import Path

import mkdocs_gen_files

BENCH = Path(__file__).resolve().parent.parent / "bench"

for image in sorted(BENCH.glob("*.png")):
    with mkdocs_gen_files.open(f"img/bench/{image.name}", "wb") as copy:
        copy.write(image.read_bytes())
