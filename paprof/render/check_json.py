"""The gate's verdict as data: ``paprof check --json FILE`` (schema ``paprof.check/1``).

For a CI bot or an agent: each compared (variant, shape, metric) with both sides' stats,
the change, the allowance and which rule set it, the outcome; and per entry that moved, the
cause from the warp-time decomposition (its terms and the counters behind them, with both
values). Fields are only ever added within a version; ``docs/ci-gpu-runner.md`` describes them.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Iterable

from paprof import outputs
from paprof._version import __version__
from paprof.explain.explanation import json_safe
from paprof.gate import Result, Verdict

SCHEMA = "paprof.check/1"

MARK = f'"schema": "{SCHEMA}"'
"""Near the top of every verdict file paprof writes: such a file is replaced without --force."""


def _stat(stat) -> dict:
    return {"value": stat.value, "spread": stat.spread, "n": stat.n}


def rule_that_set(r: Result) -> str:
    """What set the allowance: ``statistical`` (a decision on samples with a minimum
    effect), ``exact`` (a deterministic count), ``tolerance`` or ``spread`` (the two
    sides' measured spread was wider than the tolerance)."""
    if r.decision is not None:
        return "statistical"
    if r.rule.count:
        return "exact"
    return "tolerance" if r.allowed <= r.tolerance.allowed(r.baseline.value) else "spread"


def _result(r: Result) -> dict:
    d = r.decision
    return {
        "family": r.family, "variant": r.variant, "shape": r.shape, "shape_now": r.shape_now,
        "metric": r.metric, "label": r.rule.label, "unit": r.unit,
        "higher_is_better": r.rule.higher_is_better,
        "baseline": _stat(r.baseline), "now": _stat(r.now),
        "delta": r.delta,
        "delta_relative": r.delta / abs(r.baseline.value) if r.baseline.value else None,
        "allowed": r.allowed, "limit": r.limit, "tolerance": r.tolerance.spec(),
        "set_by": rule_that_set(r), "cannot_fail": r.cannot_fail,
        "status": r.status, "outcome": r.outcome,
        "decision": None if d is None else {
            "ratio": d.ratio, "low": d.low, "high": d.high, "p_worse": d.p_worse,
            "p_better": d.p_better, "min_effect": d.min_effect, "confidence": d.confidence,
            "n_base": d.n_base, "n_now": d.n_now, "rounds": d.rounds},
        "message": r.message,
    }


def verdict_json(verdict: Verdict) -> dict:
    """``verdict`` as the ``paprof.check/1`` document."""
    prov = verdict.provenance
    causes = [{"family": key[0], "variant": key[1], "shape": key[2], **c.to_dict(),
               "paragraph": c.line()}
              for key, c in verdict.causes.items()]
    return json_safe({
        "schema": SCHEMA,
        "paprof_version": __version__,
        "passed": verdict.passed,
        "exit_code": verdict.exit_code,
        "summary": verdict.summary,
        "provenance": {"gpu": prov.gpu, "ncu_version": prov.ncu_version,
                       "clock_control": prov.clock_control, "git_commit": prov.git_commit},
        "results": [_result(r) for r in verdict.results],
        "causes": causes,
        "notes": list(verdict.notes),
    })


def write_json(verdict: Verdict, path: str | os.PathLike, force: bool = False,
               inputs: Iterable = ()) -> Path:
    """Write ``verdict``'s JSON to ``path``, atomically; see ``paprof.outputs``."""
    check_target(path, force, inputs)
    return outputs.write(path, json.dumps(verdict_json(verdict), indent=1) + "\n", parents=True)


def check_target(path: str | os.PathLike, force: bool = False, inputs: Iterable = ()) -> None:
    """``UserError`` now when ``write_json`` would refuse ``path``."""
    outputs.check_target(path, what="a paprof check verdict", mark=MARK, force=force,
                         inputs=inputs, parents=True)
