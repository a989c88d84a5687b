"""The run store: layout, temp-then-rename, refusal to overwrite, lookup by id."""

from __future__ import annotations

import json

import pytest

from paprof.errors import UserError
from paprof.read import store

SHAPE = "b64_ctx4096_h32x8_d128_p16_fp32"


def put_run(root, variant, created, shape=SHAPE, gpu="nvidia-h200", family="paged_decode", sidecar=True):
    paths = store.run_paths(root, gpu, family, variant, shape)
    paths.folder.mkdir(parents=True, exist_ok=True)
    paths.report.write_bytes(b"report")
    if sidecar:
        store.write_sidecar(
            paths.sidecar,
            {"schema": 1, "family": family, "variant": variant, "shape_slug": shape,
             "gpu": "NVIDIA H200", "gpu_slug": gpu, "created": created},
        )  # fmt: skip
    return paths


def listing(folder):
    return sorted(p.name for p in folder.iterdir())


def test_run_paths_layout(tmp_path):
    paths = store.run_paths(tmp_path, "nvidia-h200", "paged_decode", "v3", SHAPE)
    assert paths.report == tmp_path / "nvidia-h200/paged_decode/v3" / f"{SHAPE}.ncu-rep"
    assert paths.sidecar == tmp_path / "nvidia-h200/paged_decode/v3" / f"{SHAPE}.json"
    assert paths.log == tmp_path / "nvidia-h200/paged_decode/v3" / f"{SHAPE}.ncu.log"


def test_writing_uses_temp_names_then_renames(tmp_path):
    paths = store.run_paths(tmp_path, "g", "f", "v3", SHAPE)
    with store.writing(paths) as pending:
        # in a private folder at the store's top (one file system: the moves are renames)
        private = pending.report.parent
        assert private.parent == tmp_path and private.name.startswith(".paprof-run.tmp-")
        assert (private.stat().st_mode & 0o777) == 0o700 and pending.report.name.startswith(".")
        assert pending.report.name.endswith(".ncu-rep") and pending.log.parent == private
        pending.report.write_bytes(b"rep")
        store.write_sidecar(pending.sidecar, {"variant": "v3"})
        pending.scratch("result.json").write_text("{}")
        assert not paths.report.exists()
    assert listing(paths.folder) == [f"{SHAPE}.json", f"{SHAPE}.ncu-rep"]
    assert not private.exists()
    assert paths.report.read_bytes() == b"rep"
    assert json.loads(paths.sidecar.read_text()) == {"variant": "v3", store.REPORT_BYTES: 3}

@pytest.mark.parametrize("error", [KeyboardInterrupt, UserError, RuntimeError])
def test_interrupted_or_failed_run_leaves_nothing(tmp_path, error):
    paths = store.run_paths(tmp_path, "g", "f", "v3", SHAPE)
    with pytest.raises(error):
        with store.writing(paths) as pending:
            pending.report.write_bytes(b"half a rep")
            pending.scratch("result.json").write_text("{")
            raise error("stop")
    assert listing(paths.folder) == []


def test_a_run_missing_its_sidecar_is_not_stored(tmp_path):
    paths = store.run_paths(tmp_path, "g", "f", "v3", SHAPE)
    with pytest.raises(RuntimeError, match="incomplete"):
        with store.writing(paths) as pending:
            pending.report.write_bytes(b"rep")
    assert listing(paths.folder) == []


def test_existing_run_is_kept_unless_replace(tmp_path):
    paths = put_run(tmp_path, "v3", "2026-11-29T10:00:00+00:00")
    with pytest.raises(UserError, match="already exists.*--force"):
        with store.writing(paths):
            pytest.fail("must refuse before the body runs")
    assert paths.report.read_bytes() == b"report"
    with store.writing(paths, replace=True) as pending:
        pending.report.write_bytes(b"new")
        store.write_sidecar(pending.sidecar, {"variant": "v3"})
    assert paths.report.read_bytes() == b"new"
    assert listing(paths.folder) == [f"{SHAPE}.json", f"{SHAPE}.ncu-rep"]


def test_failed_replace_keeps_the_old_run(tmp_path):
    paths = put_run(tmp_path, "v3", "2026-11-29T10:00:00+00:00")
    with pytest.raises(KeyboardInterrupt):
        with store.writing(paths, replace=True) as pending:
            pending.report.write_bytes(b"new")
            raise KeyboardInterrupt
    assert paths.report.read_bytes() == b"report"
    assert listing(paths.folder) == [f"{SHAPE}.json", f"{SHAPE}.ncu-rep"]


def test_find_runs_skips_temp_files_and_reads_sidecars(tmp_path):
    put_run(tmp_path, "v3", "2026-11-29T10:00:00+00:00")
    put_run(tmp_path, "v2", "2026-11-29T09:00:00+00:00", sidecar=False)
    (tmp_path / "nvidia-h200/paged_decode/v3" / f".{SHAPE}.tmp-1-abc.ncu-rep").write_bytes(b"x")
    (tmp_path / "foreign.ncu-rep").write_bytes(b"x")
    runs = store.find_runs(tmp_path)
    assert [(r.name, r.gpu_slug, r.sidecar is not None) for r in runs] == [
        ("foreign", None, False),
        ("paged_decode/v2", "nvidia-h200", False),
        ("paged_decode/v3", "nvidia-h200", True),
    ]
    assert store.find_runs(tmp_path / "foreign.ncu-rep")[0].variant == "foreign"


def test_latest_by_created(tmp_path):
    put_run(tmp_path, "v3", "2026-11-29T10:00:00+00:00", shape="b64_a")
    newest = put_run(tmp_path, "v3", "2026-11-29T12:00:00+00:00", shape="b64_b")
    put_run(tmp_path, "v3", "2026-11-29T11:00:00+00:00", shape="b64_c", gpu="nvidia-h100")
    assert store.latest(tmp_path, "v3").report == newest.report
    assert store.latest(tmp_path, "paged_decode/v3").report == newest.report
    assert store.latest(tmp_path, "v3", shape_slug="b64_a").shape_slug == "b64_a"
    assert store.latest(tmp_path, "v3", gpu="NVIDIA H100").gpu_slug == "nvidia-h100"
    assert store.latest(tmp_path, "v3", gpu="nvidia-h100").shape_slug == "b64_c"


def test_latest_without_a_match_lists_what_is_there(tmp_path):
    put_run(tmp_path, "v2", "2026-11-29T10:00:00+00:00")
    put_run(tmp_path, "v3", "2026-11-29T10:00:00+00:00")
    with pytest.raises(UserError) as err:
        store.latest(tmp_path, "v9")
    message = str(err.value)
    assert "no run of v9" in message and "paged_decode/v2" in message and "paged_decode/v3" in message
    with pytest.raises(UserError, match="no run of other/v3"):
        store.latest(tmp_path, "other/v3")
    (tmp_path / "empty").mkdir()
    with pytest.raises(UserError, match="holds no runs"):
        store.latest(tmp_path / "empty", "v1")


def test_missing_runs_folder_is_a_user_error(tmp_path):
    with pytest.raises(UserError, match="no such run store or report"):
        store.find_runs(tmp_path / "nope")


def test_a_scan_reads_each_folder_once_and_answers_as_find_runs(tmp_path, monkeypatch):
    put_run(tmp_path, "v3", "2026-11-29T12:00:00+00:00")
    put_run(tmp_path, "v2", "2026-11-29T13:00:00+00:00")
    bare = put_run(tmp_path, "v1", "2026-11-29T14:00:00+00:00", sidecar=False)
    reads = []
    real = store._read_sidecar
    monkeypatch.setattr(store, "_read_sidecar", lambda report: reads.append(report) or real(report))
    scan = store.Scan()
    runs = scan.find_runs(tmp_path)
    assert scan.find_runs(tmp_path) is runs and len(reads) == 3
    for run in runs:  # a report of the scanned folder, by itself: as find_runs makes it
        assert scan.find_runs(run.report) == store.find_runs(run.report)
    assert len(reads) == 3 + 3  # find_runs above read them again; the scan did not
    assert runs == store.find_runs(tmp_path)
    assert [r.layout for r in runs if r.report == bare.report] == [
        {"gpu_slug": "nvidia-h200", "family": "paged_decode", "variant": "v1"}]
    assert scan.find_runs(bare.report)[0].layout == {}  # no layout for a report alone
    other = store.Scan()  # another command's scan reads the store again
    other.find_runs(tmp_path)
    assert len(reads) == 6 + 3 + 3


def test_gc_paused_nests_and_resumes_as_it_was():
    import gc

    assert gc.isenabled()
    with store.gc_paused():
        with store.gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:
        with store.gc_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
