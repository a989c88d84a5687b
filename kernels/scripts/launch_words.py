"""Give paged_decode runs recorded before ``launch_words`` existed their words.

    PYTHONPATH=$PWD:$PWD/kernels python3 kernels/scripts/launch_words.py examples [--check]

Since the family says its launch choices in words (``paprof_kernels.paged_decode.words``,
recorded by ``paprof run`` as the sidecar's ``launch_words``), paprof's reports read those
words and no longer decode paged_decode's ``launch_details`` themselves. A run recorded
earlier has only the details: the reports then say them raw ("v6 chose num_splits 16").
This script writes each such sidecar's words once, from what the run recorded: the
details and the profiled kernels of its sidecar, the first kernel's grid and the GPU's SM
count as its ``.ncu-rep`` holds them (read with paprof's own report reader), the same
inputs the launcher hands ``words.launch_words`` at launch. A sidecar that has words, has
no details, belongs to another family or has no report beside it is left as it is.
``--check`` writes nothing and exits 1 when a sidecar would change.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from paprof.model.load import load_reports
from paprof.read.record import RunRecord
from paprof_kernels.paged_decode.words import launch_words

FAMILY = "paged_decode"


def words_of(sidecar: Path) -> dict | None:
    """The ``launch_words`` of the run at ``sidecar``, from what it recorded (whether or not
    it has words already); None for a run of another family, without details or report."""
    record = RunRecord.read(sidecar)
    if record is None or record.data.get("family") != FAMILY or not record.launch_details:
        return None
    report = sidecar.with_name(record.data.get("report") or sidecar.stem + ".ncu-rep")
    if not report.is_file():
        return None
    rows = load_reports([report])
    first = rows[rows["kernel"] == record.kernels[0]].iloc[0] if record.kernels else None
    grid = int(first["grid_size"]) if first is not None and first["grid_size"] == first["grid_size"] else None
    sms = rows["sm_count"].dropna()
    said, why = launch_words(record.launch_details, record.kernels, grid, int(sms.iloc[0]) if len(sms) else None)
    if not said:
        return None
    return {"said": said, **({"why": why} if why else {})}


def with_words(data: dict, words: dict) -> dict:
    """The sidecar's keys in their order, ``launch_words`` right after ``launch_details``."""
    out = {}
    for key, value in data.items():
        out[key] = value
        if key == "launch_details":
            out["launch_words"] = words
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("folders", nargs="+", type=Path, help="folders searched for run sidecars (*.json)")
    p.add_argument("--check", action="store_true", help="write nothing; exit 1 when a sidecar would change")
    args = p.parse_args(argv)
    changed = 0
    for folder in args.folders:
        for sidecar in sorted(folder.rglob("*.json")):
            if not sidecar.with_suffix(".ncu-rep").is_file():
                continue  # not a run's sidecar (a sweep record, a bench record)
            if "launch_words" in json.loads(sidecar.read_text()):
                continue  # recorded at launch, or given already
            words = words_of(sidecar)
            if words is None:
                continue
            changed += 1
            print(f"{sidecar}: {'; '.join(words['said'])}" + (f" | why: {words['why']}" if "why" in words else ""))
            if not args.check:
                data = json.loads(sidecar.read_text())
                sidecar.write_text(json.dumps(with_words(data, words), indent=2) + "\n")
    print(f"{changed} sidecar(s) {'would change' if args.check else 'given their words'}", file=sys.stderr)
    return 1 if args.check and changed else 0


if __name__ == "__main__":
    raise SystemExit(main())
