"""Print one Markdown table from ``paprof bench --json`` files (for docs/NOTES.md)."""

import json
import sys

print("| shape | variant | median us | TB/s | % of read ceiling | round spread % | rel error |")
print("|---|---|---|---|---|---|---|")
for path in sys.argv[1:]:
    try:
        data = json.load(open(path))
    except (OSError, ValueError) as err:
        print(f"| {path} | unreadable: {err} |||||")
        continue
    ceiling = data["read_ceiling_tbs"]
    for row in data["rows"]:
        if row["skipped"] or row["median_us"] is None:
            why = f"skipped: {row['skipped']}" if row["skipped"] else "VERIFICATION FAILED"
            print(f"| {data['shape_slug']} | {row['variant']} | {why} |||||")
            continue
        print(f"| {data['shape_slug']} | {row['variant']} | {row['median_us']:.1f} | {row['tbs']:.2f} | "
              f"{row['pct_of_ceiling']:.1f} (of {ceiling:.2f}) | {row['round_spread_pct'] or 0:.2f} | "
              f"{row['rel_error']:.1e} |")
