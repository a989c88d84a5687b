"""scripts/gate_power.py's parts that need no GPU: the injected sources (they compile),
the spin calibration step and the decision accounting."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import pytest

from paprof.measure import static

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("gate_power", ROOT / "scripts" / "gate_power.py")
gate_power = importlib.util.module_from_spec(spec)
spec.loader.exec_module(gate_power)


def test_each_injection_changes_the_source_once():
    source = (gate_power.EXAMPLE / "softmax_fused.cu").read_text()
    assert "waits for this load" in gate_power.serialized_loads(source)
    assert gate_power.extra_barrier(source).count("__syncthreads();  // injected") == 1
    spun = gate_power.spin(source)
    assert spun.rstrip().endswith("}") and "PAPROF_SPIN" in spun
    with pytest.raises(ValueError, match="anchor"):
        gate_power.extra_barrier("__global__ void k() {}")


def test_spin_calibration_and_tally():
    assert gate_power.spin_for(1.10, 1.05, 1000) == pytest.approx(2000)
    assert gate_power.spin_for(1.03, 1.0, 1000) == 2000
    t = gate_power.tally(["regressed"] * 15 + ["ambiguous"] * 3 + ["same"] * 2)
    assert t == {"checks": 20, "same": 2, "regressed": 15, "improved": 0, "ambiguous": 3,
                 "regressed_rate": 0.75}


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")
def test_injected_copies_compile_and_move_the_counts(tmp_path):
    copies = gate_power.write_copies(tmp_path)
    nvcc = static.find_nvcc()
    counts = {}
    for name, path in copies.items():
        defines = {"THREADS": 128, "VPT": 8, **({"PAPROF_SPIN": 1000} if name == "spin" else {})}
        (kernel,) = static.kernel_counts(static.CompileUnit((path,), defines, "sm_90"), nvcc,
                                         static.find_cuobjdump()).values()
        counts[name] = kernel
    if "sass_bar" in counts["unchanged"]:
        assert counts["extra-barrier"]["sass_bar"] > counts["unchanged"]["sass_bar"]
