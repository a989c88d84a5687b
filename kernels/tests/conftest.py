"""The kernel lab's tests: the gpu marker skips itself where paprof finds no usable GPU
(``paprof.measure.kernels.gpu.cupy``'s own one-line reason), and the static gate's cubins go to
a folder of the session, never the user's cache."""

from __future__ import annotations

import functools
import os

import pytest

from paprof.errors import UserError


@functools.lru_cache(maxsize=None)
def _gpu_reason() -> str | None:
    from paprof.measure.kernels import gpu

    try:
        gpu.cupy()
    except UserError as err:
        return str(err)
    return None


def pytest_collection_modifyitems(config, items):
    for item in items:
        if "gpu" in item.keywords and _gpu_reason():
            item.add_marker(pytest.mark.skip(reason=f"gpu test: {_gpu_reason()}"))


@pytest.fixture(scope="session", autouse=True)
def _cubin_cache(tmp_path_factory):
    saved = os.environ.get("PAPROF_CUBIN_CACHE")
    os.environ["PAPROF_CUBIN_CACHE"] = str(tmp_path_factory.mktemp("cubins"))
    yield
    if saved is None:
        os.environ.pop("PAPROF_CUBIN_CACHE", None)
    else:
        os.environ["PAPROF_CUBIN_CACHE"] = saved
