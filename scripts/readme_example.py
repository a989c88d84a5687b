"""Write the files of the README's "Profile your own kernels" section into a folder.

    python3 scripts/readme_example.py DEST      # DEST/my-kernels/{vadd.cu,vadd_family.py,pyproject.toml}

Each file is the fenced block after a ``<!-- file: PATH -->`` line of README.md, so the
test and the GPU check run exactly what a newcomer copies.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"
_BLOCK = re.compile(r"<!-- file: (?P<path>[^ ]+) -->\n```[a-z]*\n(?P<body>.*?)\n```", re.S)


def files(readme: Path = README) -> dict[str, str]:
    """Relative path -> text of every file the README shows."""
    return {m["path"]: m["body"] + "\n" for m in _BLOCK.finditer(readme.read_text())}


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
