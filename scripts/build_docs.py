"""Write the documentation pages that code generates (docs/configuration.md, docs/results.md and the README's
results table; see grasp.lab.pages), or with --check only say which are stale.

    python scripts/build_docs.py [--check]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from grasp.lab.pages import pages
from grasp.storage import atomic_file

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="write nothing; exit 1 when a page differs from its source")
    args = ap.parse_args()
    stale = []
    for path, text in pages(REPO).items():
        if path.exists() and path.read_text(encoding="utf-8") == text:
            continue
        stale.append(path.relative_to(REPO).as_posix())
        if not args.check:
            with atomic_file(path, "w", encoding="utf-8") as f:
                f.write(text)
    verb = "stale" if args.check else "written"
    print(f"{verb}: {', '.join(stale)}" if stale else "every generated page is current")
    sys.exit(1 if args.check and stale else 0)


if __name__ == "__main__":
    main()
