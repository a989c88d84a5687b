"""The stories of `paprof compare` over two run stores of the same variants, side by side:
for each step (baseline -> v1 -> ...), its cause's kind (the words before its numbers), the
bottleneck before and after, and the largest term of its decomposition. Prints both and
"same stories" or each difference (exit 1).

    python3 scripts/story_lines.py STORE_A STORE_B
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path


def stories(store: Path) -> list[tuple]:
    variants = sorted({p.parent.name for p in store.rglob("*.ncu-rep")},
                      key=lambda v: (v != "baseline", v != "handbook", v))
    with tempfile.TemporaryDirectory() as scratch:  # (the page: not in the store)
        out = subprocess.run([sys.executable, "-m", "paprof", "compare", "--runs", str(store), *variants,
                              "--json", "-", "--out", str(Path(scratch) / "compare.html")],
                             capture_output=True, text=True, check=True).stdout
    rows = []
    for t in json.loads(out)["transitions"]:
        cause = t.get("cause") or ""
        kind = re.split(r"[:(0-9]", cause, maxsplit=1)[0].strip()
        terms = (t.get("decomposition") or {}).get("terms") or []
        largest = max(terms, key=lambda x: abs(x.get("us") or 0), default={}).get("key")
        rows.append((t.get("before"), t.get("after"), kind, t.get("bottleneck_before"),
                     t.get("bottleneck_after"), largest))
    return rows


def main() -> int:
    a, b = stories(Path(sys.argv[1])), stories(Path(sys.argv[2]))
    for ra, rb in zip(a, b):
        print(("  " if ra == rb else "! ") + " | ".join(map(str, ra)) + ("" if ra == rb else "   <>   " + " | ".join(map(str, rb))))
    same = a == b
    print("same stories" if same else f"stories differ ({sum(x != y for x, y in zip(a, b))} of {len(a)} steps)")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
