"""How often does the gate catch a real regression, and how often does it cry wolf?

Run on the GPU, from the repository root (about 1-2 minutes on an H200):

    python3 scripts/gate_power.py [--checks 20] [--launches 30] [--json FILE]

It takes the softmax example's ``fused`` variant (examples/custom_family, rows=16384,
cols=4096), makes injected copies of its .cu file and builds them through the family
interface (a ``dataclasses.replace``'d ``CudaVariant`` with another source and defines):

- ``serialized-loads``: fewer bytes in flight, each float4 load's address depends on the
  previous load (1 float4 in flight per thread instead of VPT = 8);
- ``extra-barrier``: a ``__syncthreads()`` in the exp loop;
- ``slow-3%`` / ``slow-10%``: a ``clock64()`` spin by one thread at the end of each CTA,
  its length calibrated against the measured baseline to 3 % and 10 % slower;
- ``unchanged``: the variant itself, for the false-alarm rate.

For each config it runs ``--checks`` independent checks, each on fresh CUDA-event-timed
samples (``--launches`` each side) through the gate's own decision
(``gate.assess`` on ``duration_us_event``: its minimum effect, confidence and
re-measurement rounds), and prints per config the verdict counts, the detection rate
(false-alarm rate for ``unchanged``), the measured slowdown, and the total time.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "custom_family"
SHAPE = "rows=16384,cols=4096"

_LOAD = """        const int i = t + k * THREADS;
        v[k] = i < nvec ? xv[i] : make_float4(NEG_INF, NEG_INF, NEG_INF, NEG_INF);
    }"""
_EXP = "        v[k] = exp4(v[k], m);  // padding (-inf) becomes 0"
_SPIN = """#ifdef PAPROF_SPIN  // injected: one thread spins, holding the CTA's slot
    if (threadIdx.x == 0) {
        const long long t0 = clock64();
        while (clock64() - t0 < (long long)PAPROF_SPIN) {
        }
    }
#endif
"""


def _replace_once(text: str, anchor: str, new: str, what: str) -> str:
    if text.count(anchor) != 1:
        raise ValueError(f"{what}: the anchor is not in the source exactly once")
    return text.replace(anchor, new)


def serialized_loads(source: str) -> str:
    """Each load's address depends on the previous load's value (never taken: a row max
    of FLT_MAX), so a thread has one float4 in flight instead of VPT."""
    chained = """        const int i = t + k * THREADS + (m == 3.402823466e38f ? 1 : 0);
        v[k] = i < nvec ? xv[i] : make_float4(NEG_INF, NEG_INF, NEG_INF, NEG_INF);
        m = fmaxf(m, max4(v[k]));  // injected: the next address waits for this load
    }"""
    return _replace_once(source, _LOAD, chained, "serialized-loads")


def extra_barrier(source: str) -> str:
    """A block barrier in every step of the exp loop."""
    return _replace_once(source, _EXP, "        __syncthreads();  // injected\n" + _EXP,
                         "extra-barrier")


def spin(source: str) -> str:
    """A ``clock64()`` spin of ``-DPAPROF_SPIN`` cycles by thread 0 at the kernel's end."""
    end = source.rstrip().rfind("}")
    if end < 0:
        raise ValueError("spin: no closing brace")
    return source[:end] + _SPIN + source[end:]


def spin_for(target: float, measured: float, cycles: float) -> float:
    """The next spin length (secant on a line through 0): ``cycles`` gave ``measured``
    (a ratio to the baseline); aim at ``target``."""
    if measured <= 1.0:
        return cycles * 2
    return max(1.0, cycles * (target - 1.0) / (measured - 1.0))


def tally(verdicts: list[str]) -> dict:
    """Counts per verdict and the share called ``regressed``."""
    counts = Counter(verdicts)
    n = len(verdicts)
    return {"checks": n, **{v: counts.get(v, 0) for v in ("same", "regressed", "improved",
                                                          "ambiguous")},
            "regressed_rate": counts.get("regressed", 0) / n if n else 0.0}


def write_copies(folder: Path) -> dict[str, Path]:
    """The injected copies of softmax_fused.cu (with its headers) in ``folder``."""
    source = (EXAMPLE / "softmax_fused.cu").read_text()
    for header in EXAMPLE.glob("*.cuh"):
        shutil.copy(header, folder / header.name)
    made = {}
    for name, transform in (("unchanged", lambda s: s), ("serialized-loads", serialized_loads),
                            ("extra-barrier", extra_barrier), ("spin", spin)):
        path = folder / f"softmax_fused_{name}.cu"
        path.write_text(transform(source))
        made[name] = path
    return made


def _variant(base, name: str, path: Path, extra: dict):
    defines = base.defines

    def with_extra(params):
        return {**(defines(params) if callable(defines) else dict(defines or {})), **extra}

    return dataclasses.replace(base, id=f"fused-{name}", sources=(str(path),),
                               defines=with_extra)


def main(argv=None) -> int:  # pragma: no cover - needs the GPU
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--checks", type=int, default=20)
    p.add_argument("--launches", type=int, default=30)
    p.add_argument("--json", default=None, help="also write the table as JSON here")
    args = p.parse_args(argv)
    started = time.monotonic()
    sys.path.insert(0, str(EXAMPLE))
    sys.path.insert(0, str(ROOT))
    from softmax_family import family

    from paprof import gate
    from paprof.measure.kernels import gpu, harness

    params = family.parse(SHAPE)
    fused = family.variant("fused")
    sets = harness.input_sets_for(family.work(params).bytes, gpu.current_device().l2_bytes)
    settings = gate.Settings()

    def prepared(variant):
        prep = harness.prepare(family, variant, params, input_sets=sets)
        check = harness.verify(prep)
        return prep, check.passed

    def times(prep):
        return harness.time_steps(prep, args.launches)

    with tempfile.TemporaryDirectory(prefix="gate-power-") as scratch:
        copies = write_copies(Path(scratch))
        base_prep, _ = prepared(fused)
        base_us = statistics.median(times(base_prep))
        configs = {name: _variant(fused, name, copies[name], {})
                   for name in ("unchanged", "serialized-loads", "extra-barrier")}
        for target in (1.03, 1.10):  # calibrate the spin against the baseline
            cycles, ratio = 2000.0, 1.0
            for _ in range(5):
                v = _variant(fused, f"slow{target}", copies["spin"], {"PAPROF_SPIN": int(cycles)})
                prep, _ = prepared(v)
                ratio = statistics.median(times(prep)) / statistics.median(times(base_prep))
                if abs(ratio - target) < 0.004:
                    break
                cycles = spin_for(target, ratio, cycles)
            print(f"calibrated slow-{round((target - 1) * 100)}%: {int(cycles)} cycles "
                  f"-> x{ratio:.3f}", flush=True)
            configs[f"slow-{round((target - 1) * 100)}%"] = v
        rows = []
        for name, variant in configs.items():
            prep, correct = prepared(variant)
            verdicts, ratios = [], []
            for _ in range(args.checks):
                base = gate.Stat.of(times(base_prep))
                now = gate.Stat.of(times(prep))
                _, _, verdict, decision = gate.assess(
                    base, now, "duration_us_event", settings, remeasure=lambda: times(prep))
                verdicts.append(verdict)
                ratios.append(decision.ratio)
            row = {"config": name, "correct": correct, **tally(verdicts),
                   "slowdown_pct": (statistics.median(ratios) - 1) * 100}
            rows.append(row)
            print(json.dumps(row), flush=True)
    total = time.monotonic() - started
    print(f"\nbaseline fused at {SHAPE}: {base_us:.1f} us; {args.checks} checks a config, "
          f"{args.launches} launches a side, min effect "
          f"{gate.GATE_RULES['duration_us_event'].min_effect * 100:g} %, confidence "
          f"{settings.confidence}, up to {settings.rounds} measurements")
    print(f"{'config':18} {'slowdown':>9} {'same':>5} {'regr.':>5} {'impr.':>5} {'ambig.':>6}  rate")
    for r in rows:
        label = "false alarms" if r["config"] == "unchanged" else "detected"
        print(f"{r['config']:18} {r['slowdown_pct']:+8.1f}% {r['same']:5} {r['regressed']:5} "
              f"{r['improved']:5} {r['ambiguous']:6}  {r['regressed_rate'] * 100:.0f} % {label}")
    print(f"total {total:.0f} s")
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, "seconds": total}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
