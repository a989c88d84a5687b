"""Property: whatever bytes a ``.ncu-rep`` holds, ``paprof table`` never shows a traceback.

Random bytes, truncations and bit flips of the recorded reports (copied into a temporary
folder) either load as a valid table (exit 0) or give one ``paprof: error:`` line and
exit 2. The number of examples is bounded so that the whole module takes a few seconds.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from paprof.cli import main
from helpers import recorded

REPORTS = sorted(recorded("h200").rglob("*.ncu-rep"))
ORIGINALS = {f"{p.parent.name}/{p.name}": p.read_bytes() for p in REPORTS[:6]}
SIGNATURE = b"NVR\x00"

FUZZ = settings(max_examples=100, deadline=2000, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return tmp_path_factory.mktemp("fuzz")


@pytest.fixture
def native(capfd):
    """What C code wrote to file descriptors 1 and 2 (click's runner sees only Python's
    sys.stdout/sys.stderr), reset for each example."""
    capfd.readouterr()
    return capfd


def check_table(folder: Path, data: bytes, native) -> None:
    report = folder / "mangled.ncu-rep"
    report.write_bytes(data)
    native.readouterr()
    result = CliRunner().invoke(main, ["table", str(report), "--format", "csv"])
    assert native.readouterr().err == ""  # ncu_report's C++ complaints stay out of sight
    assert "Traceback" not in result.output, result.output
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception  # an uncaught error: the property fails with its traceback
    if result.exit_code == 0:
        header = result.stdout.splitlines()[0].split(",")
        assert header[:3] == ["variant", "family", "kernel"], result.stdout[:200]
        assert len(result.stdout.splitlines()) >= 2  # at least one kernel row
    else:
        assert result.exit_code == 2, result.output
        (line,) = result.stderr.splitlines()
        assert line.startswith("paprof: error: ")


originals = st.sampled_from(sorted(ORIGINALS))


@FUZZ
@given(data=st.binary(max_size=2048), signed=st.booleans())
def test_random_bytes(folder, native, data, signed):
    check_table(folder, (SIGNATURE if signed else b"") + data, native)


# Positions come from random.Random(seed): uniform over the file (hypothesis's own
# integers and randoms favour small values, i.e. the file header); a failure prints its seed.
seeds = st.integers(0, 2**32 - 1)


@FUZZ
@given(name=originals, seed=seeds)
def test_truncations(folder, native, name, seed):
    data = ORIGINALS[name]
    check_table(folder, data[: random.Random(seed).randrange(len(data))], native)


@FUZZ
@given(name=originals, seed=seeds, count=st.integers(1, 8))
@example(name="v2/b64_ctx4096_h32x8_d128_p16_fp32.ncu-rep", seed=87, count=8)  # ncu_report
def test_bit_flips(folder, native, name, seed, count):
    data, rnd = bytearray(ORIGINALS[name]), random.Random(seed)
    for _ in range(count):
        data[rnd.randrange(len(data))] ^= 1 << rnd.randrange(8)
    check_table(folder, bytes(data), native)
