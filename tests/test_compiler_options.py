"""Per-variant compiler options and a kernel the parameters pick (issue 29): both reach the
run's NVRTC, the static gate's nvcc (so the SASS hash) and ncu's kernel filter alike."""

from __future__ import annotations

import shutil
from dataclasses import dataclass

import pytest

from paprof.measure import static
from paprof.errors import UserError
from paprof.family import CudaVariant
from paprof.measure.argv import NcuSettings, ncu_argv

# Many live accumulators: ptxas gives the kernel more than 24 registers (ptxas's least on sm_90) unless told.
SOURCE = r"""
extern "C" __global__ void wide_fp32(const float* x, float* out, int n) {
  float acc[24];
  for (int j = 0; j < 24; ++j) acc[j] = x[j];
  for (int i = threadIdx.x; i < n; i += blockDim.x)
    for (int j = 0; j < 24; ++j) acc[j] = acc[j] * x[i] + acc[(j + 7) % 24];
  float s = 0.f;
  for (int j = 0; j < 24; ++j) s += acc[j] * acc[(j * 5) % 24];
  out[threadIdx.x] = s;
}
extern "C" __global__ void wide_fp64(const double* x, double* out, int n) {
  out[threadIdx.x] = x[threadIdx.x] * n;
}
"""


@dataclass(frozen=True)
class P:
    dtype: str = "fp32"

    def spec(self) -> str:
        return f"dtype={self.dtype}"

    def slug(self) -> str:
        return self.dtype


def _variant(tmp_path, **kw) -> CudaVariant:
    (tmp_path / "wide.cu").write_text(SOURCE)
    base = dict(id="wide", idea="many accumulators", sources=("wide.cu",), folder=tmp_path,
                kernel="wide_fp32", grid=(1, 1, 1), block=(128, 1, 1),
                args=lambda p, i, o: ())
    return CudaVariant(**{**base, **kw})


def test_options_are_checked_when_the_variant_is_made_and_when_parameters_pick_them(tmp_path):
    assert _variant(tmp_path, options=("-maxrregcount=32", "--use_fast_math")).compiler_options(P()) \
        == ("-maxrregcount=32", "--use_fast_math")
    with pytest.raises(UserError, match=r"compiler option '-DFOO=1' is not one paprof passes"):
        _variant(tmp_path, options=("-DFOO=1",))
    picked = _variant(tmp_path, options=lambda p: ("--ftz=true",) if p.dtype == "fp32" else ())
    assert picked.compiler_options(P()) == ("--ftz=true",) and picked.compiler_options(P("fp64")) == ()
    bad = _variant(tmp_path, options=lambda p: ("-G",))
    with pytest.raises(UserError, match="'-G'"):
        bad.compiler_options(P())
    assert _variant(tmp_path).to_dict()["options"] == []


def test_the_static_gate_compiles_with_the_options(tmp_path, monkeypatch):
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc is not on PATH")
    monkeypatch.setenv("PAPROF_CUBIN_CACHE", "off")
    free = _variant(tmp_path)
    capped = _variant(tmp_path, options=("-maxrregcount=24",))
    (unit,) = static.compile_units(capped, P(), "sm_90")
    assert unit.flags == ("-maxrregcount=24",) and "-maxrregcount=24" in unit.options()
    regs = {}
    for name, v in (("free", free), ("capped", capped)):
        (u,) = static.compile_units(v, P(), "sm_90")
        regs[name] = static.kernel_counts(u, nvcc, None)["wide_fp32"]["registers_per_thread"]
    assert regs["capped"] <= 24 < regs["free"], regs


def test_a_kernel_the_parameters_pick_reaches_the_filter_and_the_gate(tmp_path):
    v = _variant(tmp_path, kernel=lambda p: f"wide_{p.dtype}")
    assert v.kernel_regex is None  # no fixed name
    assert v.kernel_regex_for(P()) == "^wide_fp32$" and v.kernel_regex_for(P("fp64")) == "^wide_fp64$"
    argv = ncu_argv(NcuSettings(ncu="ncu"), v, P("fp64"), tmp_path / "r.ncu-rep", None)
    assert argv[argv.index("-k") + 1] == "regex:^wide_fp64$"
    with pytest.raises(UserError, match="not a C identifier"):
        _variant(tmp_path, kernel=lambda p: "wide fp32").kernel_name(P())
