"""paprof calibrate: the noise of repeated (A/A) runs, written as a versioned file; check
--calibration gates above max(tolerance, k x noise) and says which set the limit."""

from __future__ import annotations

import json
import shutil
import statistics

import pytest
from click.testing import CliRunner

from paprof.gate import calibration
from paprof.cli import main
from paprof.measure import provenance

from helpers import EXAMPLES

RUN = EXAMPLES / "nvidia-h200" / "paged_decode"
SLUG = "b64_ctx4096_h32x8_d128_p16_fp32"


def _run(root, variant, scale):
    """A copy of a shipped run whose CUDA-event samples are ``scale`` times the shipped ones."""
    folder = root / "nvidia-h200" / "paged_decode" / variant
    folder.mkdir(parents=True)
    shutil.copy(RUN / variant / f"{SLUG}.ncu-rep", folder)
    side = json.loads((RUN / variant / f"{SLUG}.json").read_text())
    side["duration_us_event_all"] = [v * scale for v in side["duration_us_event_all"]]
    side["duration_us_event"] = statistics.median(side["duration_us_event_all"])
    (folder / f"{SLUG}.json").write_text(json.dumps(side))
    return root


@pytest.fixture
def aa(tmp_path):
    """Three A/A runs of v3 and v4: medians 1.00, 1.01, 0.99 of the shipped ones."""
    return [_run(_run(tmp_path / name, "v3", s), "v4", s)
            for name, s in (("a", 1.0), ("b", 1.01), ("c", 0.99))]


def _cli(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def test_calibrate_from_repeated_runs_writes_the_measured_noise(aa, tmp_path):
    out = tmp_path / "noise.json"
    result = _cli("calibrate", *[x for r in aa for x in ("--runs", r)], "--metric",
                  "duration_us_event", "--out", out)
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())
    assert data["kind"] == "paprof-calibration" and data["schema"] == 1 and data["k"] == 3
    (noise,) = data["noise"]
    assert (noise["gpu"], noise["family"], noise["metric"]) == ("NVIDIA H200", "paged_decode",
                                                                "duration_us_event")
    assert noise["relative"] == pytest.approx(statistics.stdev([1.0, 1.01, 0.99]), rel=1e-6)
    assert noise["repeats"] == 3 and sorted(v.split("@")[0] for v in noise["variants"]) == ["v3", "v4"]
    assert "noise 1 %" in result.output and "limit 3 x = 3 %" in result.output
    again = _cli("calibrate", "--runs", aa[0], "--runs", aa[1], "--out", out)
    assert again.exit_code == 2 and "--force" in again.output
    assert json.loads(out.read_text()) == data  # untouched
    assert _cli("calibrate", "--runs", aa[0], "--runs", aa[1], "--out", out, "--force").exit_code == 0


def test_calibrate_out_dash_prints_the_file(aa, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = _cli("calibrate", *[x for r in aa for x in ("--runs", r)], "--metric",
                  "duration_us_event", "--out", "-")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["kind"] == "paprof-calibration"
    assert "noise 1 %" in result.stderr and not (tmp_path / "-").exists()


def test_without_repeats_or_a_gpu_it_is_one_line_and_exit_2(aa, tmp_path, monkeypatch):
    one = _cli("calibrate", "--runs", aa[0], "--out", tmp_path / "n.json")
    assert one.exit_code == 2 and "no variant was run 2 or more times" in one.output
    assert len(one.output.strip().splitlines()) == 1 and not (tmp_path / "n.json").exists()
    monkeypatch.setattr(provenance, "query_gpus", lambda *a: [])
    none = _cli("calibrate", "--family", "paged_decode", "--out", tmp_path / "n.json")
    assert none.exit_code == 2 and "no GPU here" in none.output
    assert len(none.output.strip().splitlines()) == 1


def test_check_gates_above_k_times_the_measured_noise(aa, tmp_path):
    noise = tmp_path / "noise.json"
    assert _cli("calibrate", *[x for r in aa for x in ("--runs", r)], "--out", noise).exit_code == 0
    base = tmp_path / "base.json"
    made = _cli("baseline", "update", "--runs", aa[0], "--metric", "duration_us_event",
                "--out", base)
    assert made.exit_code == 0, made.output
    slower = _run(_run(tmp_path / "now", "v3", 1.025), "v4", 1.025)  # +2.5 %: past 2 %, within 3 %
    plain = _cli("check", "--baseline", base, "--runs", slower)
    assert plain.exit_code == 1, plain.output
    calibrated = _cli("check", "--baseline", base, "--runs", slower, "--calibration", noise)
    assert calibrated.exit_code == 0, calibrated.output
    assert "the limit is 3 x measured noise 1 % = 3 % (3 A/A runs on NVIDIA H200), above the " \
           "tolerance 2 %" in calibrated.output.replace("\n", " ")
    much = _run(_run(tmp_path / "much", "v3", 1.06), "v4", 1.06)
    assert _cli("check", "--baseline", base, "--runs", much, "--calibration", noise).exit_code == 1


def test_a_noise_below_the_tolerance_leaves_the_tolerance(aa, tmp_path):
    cal = calibration.make([calibration.Noise("NVIDIA H200", "paged_decode", "duration_us_event",
                                              0.001, 5, ("v3@x",))], "test")
    path = calibration.save(cal, tmp_path / "quiet.json")
    base = tmp_path / "base.json"
    assert _cli("baseline", "update", "--runs", aa[0], "--metric", "duration_us_event",
                "--out", base).exit_code == 0
    result = _cli("check", "--baseline", base, "--runs", aa[0], "--calibration", path)
    assert result.exit_code == 0
    assert "the limit is the tolerance 2 %, above 3 x measured noise 0.1 % = 0.3 %" in \
        result.output.replace("\n", " ")


@pytest.mark.parametrize("text, message", [
    ("nope", "not JSON"),
    ('{"kind": "x"}', "not a paprof calibration"),
    ('{"kind": "paprof-calibration", "schema": 9, "noise": []}', "schema 9"),
    ('{"kind": "paprof-calibration", "schema": 1, "noise": []}', "non-empty"),
    ('{"kind": "paprof-calibration", "schema": 1, "k": -1, "noise": [{}]}', "k must be"),
    ('{"kind": "paprof-calibration", "schema": 1, "noise": [{"gpu": "g"}]}', "missing field"),
])
def test_a_bad_calibration_file_is_exit_2(aa, tmp_path, text, message):
    path = tmp_path / "bad.json"
    path.write_text(text)
    base = tmp_path / "b.json"
    assert _cli("baseline", "update", "--runs", aa[0], "--out", base).exit_code == 0
    result = _cli("check", "--baseline", base, "--runs", aa[0], "--calibration", path)
    assert result.exit_code == 2 and "calibration" in result.output
    assert len(result.output.strip().splitlines()) == 1
    with pytest.raises(Exception, match=message):
        calibration.load(path)


@pytest.mark.lab
def test_on_a_gpu_each_repeat_is_a_fresh_measurement(tmp_path, monkeypatch):
    """The GPU path profiles the variants --repeats times (profile_current, faked here with
    shipped runs at 1.00, 1.02, 0.98 of their time) and measures the noise of those runs."""
    from paprof.measure import recheck
    from paprof import gate

    scales = iter((1.0, 1.02, 0.98))
    asked = []

    def profile_current(baseline, **kw):
        asked.append([(e.family, e.variant, e.shape) for e in baseline.entries])
        root = _run(tmp_path / f"r{len(asked)}", "v3", next(scales))
        return gate.load_table(root)

    monkeypatch.setattr(recheck, "profile_current", profile_current)
    monkeypatch.setattr(provenance, "query_gpus", lambda *a: [("NVIDIA H200", "580")])
    out = tmp_path / "gpu.json"
    result = _cli("calibrate", "--family", "paged_decode", "--variant", "v3", "--shape",
                  "batch=64,context=4096", "--repeats", "3", "--metric", "duration_us_event",
                  "--out", out)
    assert result.exit_code == 0, result.output
    assert len(asked) == 3 and asked[0][0][:2] == ("paged_decode", "v3")
    (noise,) = json.loads(out.read_text())["noise"]
    assert noise["relative"] == pytest.approx(statistics.stdev([1.0, 1.02, 0.98]), rel=1e-6)
    assert json.loads(out.read_text())["source"].startswith("gpu: 3 A/A runs")
