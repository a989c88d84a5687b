"""What a lighter preset would change in the explanations, without a GPU.

Reads the shipped H200 chain and the zoo's recorded pairs (examples/zoo) twice: as they
are, and as a run under PRESET would have them (every catalogue column the preset does
not collect dropped, as a report without the metric gives it, and every ncu rule of a
section it leaves out gone), then prints each step whose cause, limit or next-move line
changed, and the counts. ``--opcodes`` keeps the per-opcode instruction counts whatever
the preset's sections: ncu 2025.3.1's sections of ``basic`` collect them
(``sass__inst_executed_per_opcode``), though the catalogue files them under
InstructionStats (kernels/NOTES.md, 2026-12-06 late night).

    python scripts/emulate_preset.py basic --opcodes

Run from the repository root with the test requirements installed (it unpacks the
archives as the tests do).
"""

from __future__ import annotations

import argparse
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from helpers import preset_readers, recorded, unpacked  # noqa: E402

from paprof.api import write_report  # noqa: E402
from paprof.measure.presets import get_preset  # noqa: E402
from paprof.model import load  # noqa: E402

ZOO = ROOT / "examples" / "zoo"
CHAIN = ["baseline", "v1", "v2", "v3", "v4", "handbook", "v5", "v6"]


def _lines(steps) -> list[tuple]:
    return [(s.before, s.after, s.cause, s.limit, s.next_move) for s in steps()]


def _shipped():
    return write_report(CHAIN, runs=recorded("h200"), out=None, markdown=None).comparison.steps


def _zoo(which: str, archive: str):
    runs = unpacked(ZOO / archive) / "runs"
    if which == "h200":
        cases = tomllib.loads((ZOO / "causes.toml").read_text())["pair"]
    else:
        cases = [c for c in tomllib.loads((ZOO / "expected.toml").read_text())["case"]
                 if c["family"] == "zoo"]
    pairs = [p for p in cases if any(runs.glob(f"*/*/{p['slow']}/*.json"))]
    return lambda: [s for p in pairs for s in write_report(
        [p["slow"], p["fast"]], runs=runs, out=None, markdown=None,
        shape=p["shape"].replace(" ", "")).comparison.steps]


def _as_preset(preset, opcodes: bool) -> None:
    """Make the loader read every report as a run under ``preset`` would hold it."""
    load._metrics, load.read_rules = preset_readers(preset, load._metrics, load.read_rules, opcodes)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("preset")
    parser.add_argument("--opcodes", action="store_true",
                        help="keep the per-opcode instruction counts (as ncu 2025.3.1's basic sections do)")
    args = parser.parse_args()
    groups = {"shipped": _shipped, "zoo-h200": _zoo("h200", "runs.tar.xz"),
              "zoo-h100": _zoo("h100", "runs-h100.tar.xz")}
    before = {name: _lines(steps) for name, steps in groups.items()}
    _as_preset(get_preset(args.preset), args.opcodes)
    after = {name: _lines(steps) for name, steps in groups.items()}
    total = changed = 0
    for name in groups:
        moved = 0
        for b, a in zip(before[name], after[name]):
            total += 1
            if a == b:
                continue
            changed += 1
            moved += 1
            for i, what in ((2, "cause"), (3, "limit"), (4, "next move")):
                if a[i] != b[i]:
                    print(f"[{name}] {b[0]} -> {b[1]}, {what}:\n  was: {b[i]}\n  now: {a[i]}")
        print(f"{name}: {moved} of {len(before[name])} steps changed")
    print(f"all: {changed} of {total} steps changed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
