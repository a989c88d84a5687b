"""Provenance probes, with a fake nvidia-smi and ncu, and without them."""

from __future__ import annotations

import subprocess

import pytest

from paprof import __version__
from paprof import names
from paprof.measure import provenance



@pytest.mark.parametrize(
    "name, expected",
    [("NVIDIA H200", "nvidia-h200"), ("NVIDIA H100 80GB HBM3", "nvidia-h100-80gb-hbm3"),
     ("  NVIDIA GeForce RTX 4090 ", "nvidia-geforce-rtx-4090"), ("", "unknown")],
)  # fmt: skip
def test_slug(name, expected):
    assert names.slug(name) == expected


def test_gpus_and_ncu_version_from_fakes(fake_bin, monkeypatch):
    monkeypatch.setenv("FAKE_NVIDIA_SMI", r"NVIDIA H200, 580.159.04\nNVIDIA H100 80GB HBM3, 580.159.04")
    assert provenance.query_gpus() == [("NVIDIA H200", "580.159.04"), ("NVIDIA H100 80GB HBM3", "580.159.04")]
    assert provenance.ncu_version(str(fake_bin / "ncu")) == "2025.3.1.0"


def test_absent_or_failing_tools_give_none(fake_bin, monkeypatch, tmp_path):
    monkeypatch.setenv("FAKE_NVIDIA_SMI", "fail")
    assert provenance.query_gpus() == []
    assert provenance.query_gpus(str(tmp_path / "no-smi")) == []
    assert provenance.ncu_version(str(tmp_path / "no-ncu")) is None
    assert provenance.git_state(tmp_path) == (None, None)


def test_git_state_of_a_repository(tmp_path):
    def git(*args):
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)

    try:
        git("init", "-q")
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("git is not installed")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "x")
    commit, dirty = provenance.git_state(tmp_path)
    assert commit and len(commit) >= 7 and dirty is False
    (tmp_path / "new.cu").write_text("")
    assert provenance.git_state(tmp_path)[1] is True


def test_collect_prefers_the_launchers_gpu(fake_bin, monkeypatch, tmp_path):
    monkeypatch.setenv("FAKE_NVIDIA_SMI", r"NVIDIA H100 80GB HBM3, 570.1\nNVIDIA H200, 580.159.04")
    prov = provenance.collect(str(fake_bin / "ncu"), gpu="NVIDIA H200", repo=tmp_path)
    assert (prov.gpu, prov.gpu_slug, prov.driver) == ("NVIDIA H200", "nvidia-h200", "580.159.04")
    assert prov.ncu_version == "2025.3.1.0" and prov.paprof_version == __version__
    assert prov.created.endswith("+00:00")
    first = provenance.collect(str(fake_bin / "ncu"), repo=tmp_path)
    assert first.gpu == "NVIDIA H100 80GB HBM3" and first.driver == "570.1"


def test_collect_without_any_tool(tmp_path):
    prov = provenance.collect(str(tmp_path / "ncu"), nvidia_smi=str(tmp_path / "smi"), repo=tmp_path)
    assert (prov.gpu, prov.gpu_slug, prov.driver, prov.ncu_version, prov.git_commit) == (
        "unknown GPU", "unknown-gpu", None, None, None,
    )  # fmt: skip


def test_git_commit_from_the_environment_outside_a_checkout(tmp_path):
    from paprof.measure import provenance

    assert provenance.git_state(tmp_path, environ={"PAPROF_GIT_COMMIT": "abc1234"}) == ("abc1234", None)
    assert provenance.git_state(tmp_path, environ={}) == (None, None)


def test_git_commit_from_the_environment_wins_over_a_stale_checkout():
    """The GPU machine's copy of the tree can hold an older .git than the tree it runs."""
    from paprof.measure import provenance

    assert provenance.git_state(provenance.REPO_ROOT, environ={"PAPROF_GIT_COMMIT": "abc1234"}) == ("abc1234", None)
    commit, _ = provenance.git_state(provenance.REPO_ROOT, environ={})
    assert commit != "abc1234"
