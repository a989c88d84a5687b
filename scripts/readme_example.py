"""Write the files of the "Your own kernels" page (docs/your-kernels.md) into a folder.

    python3 scripts/readme_example.py DEST      # DEST/my-kernels/{vadd.cu,vadd_family.py,pyproject.toml}

Each file is the fenced block after a ``<!-- file: PATH -->`` line of that page, so the
test and the GPU check run exactly what a newcomer copies.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

PAGE = Path(__file__).resolve().parents[1] / "docs" / "your-kernels.md"
_BLOCK = re.compile(r"<!-- file: (?P<path>[^ ]+) -->\n```[a-z]*\n(?P<body>.*?)\n```", re.S)


def files(page: Path = PAGE) -> dict[str, str]:
    """Relative path -> text of every file the page shows."""
    return {m["path"]: m["body"] + "\n" for m in _BLOCK.finditer(page.read_text())}


def write(dest: Path) -> list[Path]:
    out = []
    for rel, text in files().items():
        path = Path(dest) / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        out.append(path)
    return out


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__.strip().splitlines()[2].strip())
    for path in write(Path(sys.argv[1])):
        print(path)
