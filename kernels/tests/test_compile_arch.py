"""A variant compiled for its own target (``CudaVariant.arch``, wgmma's sm_90a), without a
GPU: CuPy, the device and NVRTC replaced by stand-ins that record what they are asked."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest

from paprof.errors import ShapeError, UserError
from paprof_kernels.flash_fwd import FAMILY
from paprof.measure.kernels import gpu


def test_arch_capability():
    assert gpu.arch_capability("sm_90a") == "9.0"
    assert gpu.arch_capability("sm_90") == "9.0"
    assert gpu.arch_capability("sm_100a") == "10.0"


class FakeNvrtc(types.ModuleType):
    class NVRTCError(Exception):
        pass

    def __init__(self, fail=False):
        super().__init__("cupy_backends.cuda.libs.nvrtc")
        self.fail, self.compiled, self.destroyed = fail, [], 0

    def getVersion(self):
        return (13, 0)

    def createProgram(self, code, name, headers, names):
        return code

    def compileProgram(self, prog, options):
        if self.fail:
            raise self.NVRTCError("NVRTC_ERROR_COMPILATION")
        self.compiled.append(tuple(options))

    def getCUBIN(self, prog):
        return b"cubin of " + prog.encode()[:20]

    def getProgramLog(self, prog):
        return "error: something"

    def destroyProgram(self, prog):
        self.destroyed += 1


@pytest.fixture
def fake_gpu(monkeypatch, tmp_path):
    """A CuPy whose RawModule records its arguments, a device of compute capability 9.0."""
    loaded = []

    class RawModule:
        def __init__(self, **kw):
            loaded.append(kw)

        def compile(self):
            pass

    cp = types.SimpleNamespace(RawModule=RawModule, cuda=types.SimpleNamespace(
        compiler=types.SimpleNamespace(CompileException=RuntimeError)))
    monkeypatch.setattr(gpu, "cupy", lambda: cp)
    device = types.SimpleNamespace(compute_capability="9.0", name="NVIDIA H200")
    monkeypatch.setattr(gpu, "current_device", lambda: device)
    monkeypatch.setenv("PAPROF_CUBIN_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(gpu, "_MODULES", {})
    nvrtc = FakeNvrtc()
    for name in ("cupy_backends", "cupy_backends.cuda", "cupy_backends.cuda.libs"):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    monkeypatch.setattr(sys.modules["cupy_backends.cuda.libs"], "nvrtc", nvrtc, raising=False)
    monkeypatch.setitem(sys.modules, "cupy_backends.cuda.libs.nvrtc", nvrtc)
    return types.SimpleNamespace(loaded=loaded, device=device, nvrtc=nvrtc, cache=tmp_path / "cache")


def wgmma_sources(vid="wgmma"):
    variant = FAMILY.variant(vid)
    return variant.source_paths(), variant.defines(FAMILY.parse("dtype=bf16")), variant.arch


@pytest.mark.parametrize("vid", ["wgmma", "wgmma2"])
def test_arch_compiles_through_nvrtc_once(fake_gpu, vid):
    sources, defines, arch = wgmma_sources(vid)
    assert arch == "sm_90a"
    gpu.compile_module(sources, defines, arch=arch)
    (options,) = fake_gpu.nvrtc.compiled
    assert options[-1] == "-arch=sm_90a" and "-DHEAD_DIM=128" in options and "-std=c++17" in options
    if vid == "wgmma2":  # its knobs reach NVRTC as -D values
        assert {"-DBC=128", "-DOVERLAP=1", "-DPINGPONG=1", "-DSETMAXNREG=1"} <= set(options), options
    (cubin,) = fake_gpu.cache.glob("*.cubin")
    assert fake_gpu.loaded == [{"path": str(cubin)}] and fake_gpu.nvrtc.destroyed == 1
    gpu._MODULES.clear()  # a second process: the cached cubin, no compile
    gpu.compile_module(sources, defines, arch=arch)
    assert len(fake_gpu.nvrtc.compiled) == 1 and len(fake_gpu.loaded) == 2


def test_arch_on_another_gpu_is_a_shape_error(fake_gpu):
    fake_gpu.device.compute_capability = "8.0"
    sources, defines, arch = wgmma_sources()
    with pytest.raises(ShapeError, match="sm_90a only .* is 8.0"):
        gpu.compile_module(sources, defines, arch=arch)
    assert not fake_gpu.nvrtc.compiled


def test_nvrtc_errors_name_the_source_and_the_log(fake_gpu, monkeypatch):
    fake_gpu.nvrtc.fail = True
    sources, defines, arch = wgmma_sources()
    with pytest.raises(UserError, match=r"compiling wgmma.cu for sm_90a failed.*\n.*something"):
        gpu.compile_module(sources, defines, arch=arch)
    assert fake_gpu.nvrtc.destroyed == 1 and not list(Path(fake_gpu.cache).glob("*.cubin"))


def test_without_arch_cupy_picks(fake_gpu):
    variant = FAMILY.variant("mma")
    gpu.compile_module(variant.source_paths(), variant.defines(FAMILY.parse("dtype=bf16")))
    assert not fake_gpu.nvrtc.compiled and "code" in fake_gpu.loaded[0]
