"""A whole program nobody here wrote the kernels of (``examples/mlp``: a bf16 MLP block,
eager against ``torch.compile``), profiled on the H200 with ``paprof run --cmd ...
--nvtx-range step``: each step is every launch of one push of ``step``, and the verdict
agrees with the program's own CUDA-event timing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers import unpacked

MLP = Path(__file__).resolve().parents[1] / "examples" / "mlp"
ARCHIVE = MLP / "runs.tar.xz"

pytestmark = pytest.mark.skipif(not ARCHIVE.is_file(), reason="examples/mlp/runs.tar.xz is not there")


@pytest.fixture(scope="module")
def built():
    from paprof.api import write_report

    return write_report(["eager", "compiled"], runs=unpacked(ARCHIVE) / "runs", out=None,
                        markdown="-")


def test_each_step_is_one_push_of_the_programs_range(built):
    from paprof.model.load import load_reports

    df = load_reports([Path(v.report_path) for v in built.comparison.variants])
    for name, rows in df.groupby("variant"):
        assert set(rows["steps_from"]) == {"range"}, name
        per_step = rows.groupby("step").size()
        assert len(per_step) == 3 and per_step.nunique() == 1, (name, per_step.to_dict())


def test_the_verdict_is_the_programs_own_timing(built):
    times = json.loads((MLP / "times.json").read_text())
    faster = times["eager_ms"] > times["compiled_ms"]
    (step,) = built.comparison.steps
    assert (step.speedup > 1) == faster, (step.headline, times)
    assert step.headline.startswith("compiled is ") and ("faster" if faster else "slower") in step.headline


def test_the_fused_kernels_are_named(built):
    (step,) = built.comparison.steps
    pairing = step.decomposition.pairing
    assert any(k.kernel.startswith("triton") for k in pairing.new)
    assert pairing.gone  # eager's separate element-wise and reduction kernels
    assert "| new |" in built.markdown_text and "| gone |" in built.markdown_text
