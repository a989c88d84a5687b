"""Shared test configuration: the gpu marker skips itself where CuPy or a GPU is missing."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "h200"


@functools.lru_cache(maxsize=None)
def _gpu_reason() -> str | None:
    try:
        import cupy  # noqa: F401
    except ImportError:
        return "CuPy is not installed"
    try:
        if cupy.cuda.runtime.getDeviceCount() == 0:
            return "no CUDA GPU"
    except Exception as err:  # no driver
        return f"no usable CUDA GPU ({type(err).__name__})"
    return None


def pytest_collection_modifyitems(config, items):
    for item in items:
        if "gpu" in item.keywords:
            reason = _gpu_reason()
            if reason:
                item.add_marker(pytest.mark.skip(reason=f"gpu test: {reason}"))


@pytest.fixture(scope="session", autouse=True)
def _cubin_cache(tmp_path_factory):
    """The static gate's cubin cache in a folder of the test session, never the user's
    ``~/.cache`` (``paprof.static.cache_dir``); shared by the session's tests, as a user's
    would be. A test that needs its own sets ``PAPROF_CUBIN_CACHE`` itself."""
    import os

    saved = os.environ.get("PAPROF_CUBIN_CACHE")
    os.environ["PAPROF_CUBIN_CACHE"] = str(tmp_path_factory.mktemp("cubins"))
    yield
    if saved is None:
        os.environ.pop("PAPROF_CUBIN_CACHE", None)
    else:
        os.environ["PAPROF_CUBIN_CACHE"] = saved


@pytest.fixture(scope="session")
def unpacked(tmp_path_factory):
    """``unpacked(archive)``: the folder a shipped ``.tar.xz`` of runs is extracted into,
    once a session whichever tests ask; read it, never change it (a test that changes the
    runs extracts its own copy: ``archives.extract``)."""
    from archives import extract

    done: dict[Path, Path] = {}

    def unpack(archive: Path) -> Path:
        archive = Path(archive).resolve()
        if archive not in done:
            done[archive] = extract(archive, tmp_path_factory.mktemp(archive.name.split(".")[0]))
        return done[archive]

    return unpack
