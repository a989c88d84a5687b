"""Print one Markdown table from ``paprof bench --json`` files (for kernels/NOTES.md).

    python3 kernels/scripts/bench_table.py FILE...           TB/s against the read ceiling
    python3 kernels/scripts/bench_table.py --flops FILE...   TFLOP/s against the GEMM ceiling (flash_fwd)
"""

import json
import sys

args = sys.argv[1:]
flops = bool(args) and args[0] == "--flops"
if flops:
    args = args[1:]
    print("| shape | variant | median us | TFLOP/s | % of GEMM ceiling | round spread % | rel error | skipped |")
else:
    print("| shape | variant | median us | TB/s | % of read ceiling | round spread % | rel error |")
print("|---|---|---|---|---|---|---|" + ("---|" if flops else ""))
for path in args:
    try:
        data = json.load(open(path))
    except (OSError, ValueError) as err:
        print(f"| {path} | unreadable: {err} |||||")
        continue
    ceiling = data["read_ceiling_tbs"]
    gemm = data.get("gemm_ceiling_tflops")
    for row in data["rows"]:
        if flops and row["skipped"]:
            print(f"| {data['shape_slug']} | {row['variant']} |||||| {row['skipped'][:80]} |")
            continue
        if row["skipped"] or row["median_us"] is None:
            why = f"skipped: {row['skipped']}" if row["skipped"] else "VERIFICATION FAILED"
            print(f"| {data['shape_slug']} | {row['variant']} | {why} |||||")
            continue
        if flops:
            share = f"{row['pct_of_gemm_ceiling']:.1f} (of {gemm:.0f})" if row.get("pct_of_gemm_ceiling") else "-"
            print(f"| {data['shape_slug']} | {row['variant']} | {row['median_us']:.1f} | {row['tflops']:.1f} | "
                  f"{share} | {row['round_spread_pct'] or 0:.2f} | {row['rel_error']:.1e} | |")
        else:
            print(f"| {data['shape_slug']} | {row['variant']} | {row['median_us']:.1f} | {row['tbs']:.2f} | "
                  f"{row['pct_of_ceiling']:.1f} (of {ceiling:.2f}) | {row['round_spread_pct'] or 0:.2f} | "
                  f"{row['rel_error']:.1e} |")
