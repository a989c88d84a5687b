"""Issue 38, item 1: no code from files others can write, wherever on the import path of a
``[tool.paprof]`` family it lies: a package folder, its ``__init__.py``, a subpackage, a
``__pycache__`` and its ``.pyc`` files. Each refusal is one line naming the file and
``PAPROF_TRUST``; the planted code never runs."""

from __future__ import annotations

import os
import py_compile
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from paprof import registry
from paprof.errors import UserError

FAMILY = '''
from pathlib import Path
Path({marker!r}).write_text({says!r})
from dataclasses import dataclass
from paprof.family import Family, Params, Work
@dataclass(frozen=True)
class P(Params):
    pass
family = Family(name={name!r}, params=P, inputs=None, output=None, reference=None,
                work=lambda p: Work(bytes=1), variants=[])
'''

posix_owners = pytest.mark.skipif(not hasattr(os, "getuid"), reason="no file owners")


def _project(repo: Path, ref: str, files: dict[str, str]) -> Path:
    """A repository whose ``[tool.paprof]`` names the family ``ref``; ``files``: path ->
    text, under the repository."""
    repo.mkdir(parents=True, exist_ok=True)
    (repo / "pyproject.toml").write_text(f'[tool.paprof]\nfamilies = ["{ref}"]\npath = ["."]\n')
    for name, text in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    return repo


def _family(marker: Path, name: str = "fam_x", says: str = "ran") -> str:
    return FAMILY.format(marker=str(marker), says=says, name=name)


def _refused(repo: Path, monkeypatch, names: str) -> str:
    """discover() from ``repo`` refuses, in one line naming ``names`` and PAPROF_TRUST."""
    monkeypatch.chdir(repo)
    with pytest.raises(UserError) as err:
        registry.discover()
    text = str(err.value)
    assert "\n" not in text and names in text and f"PAPROF_TRUST={repo}" in text, text
    return text


@posix_owners
@pytest.mark.parametrize("mode", [0o777, 0o1777])  # the sticky bit does not make it safe
def test_a_package_folder_others_may_write_is_refused(tmp_path, monkeypatch, clean_registry, mode):
    marker = tmp_path / "ran"
    repo = _project(tmp_path / "repo", "fam_pkg:family", {"fam_pkg/__init__.py": _family(marker)})
    (repo / "fam_pkg").chmod(mode)
    text = _refused(repo, monkeypatch, f"{repo / 'fam_pkg'} is writable by group or others")
    assert not marker.exists()
    monkeypatch.setenv(registry.TRUST_ENV, str(repo))  # trusted: it loads
    registry.clear()
    assert "fam_x" in registry.discover() and marker.exists(), text


@posix_owners
@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0,
                    reason="giving a file to another user needs root (CI runs as root)")
def test_an_init_owned_by_another_user_is_refused(tmp_path, monkeypatch, clean_registry):
    marker = tmp_path / "ran"
    repo = _project(tmp_path / "repo", "fam_pkg:family", {"fam_pkg/__init__.py": _family(marker)})
    os.chown(repo / "fam_pkg" / "__init__.py", 4243, -1)
    _refused(repo, monkeypatch, f"{repo / 'fam_pkg' / '__init__.py'} is owned by another user (uid 4243)")
    assert not marker.exists()


@posix_owners
def test_an_init_owned_by_another_user_is_refused_without_root(tmp_path, monkeypatch, clean_registry):
    """Where chown is impossible: the same ``__init__.py`` reads as another user's."""
    marker = tmp_path / "ran"
    repo = _project(tmp_path / "repo", "fam_pkg:family", {"fam_pkg/__init__.py": _family(marker)})
    init = repo / "fam_pkg" / "__init__.py"
    real_stat = Path.stat

    def stat(self, *args, **kwargs):
        st = real_stat(self, *args, **kwargs)
        if self == init:
            return os.stat_result((st.st_mode, st.st_ino, st.st_dev, st.st_nlink, 4243,
                                   *tuple(st)[5:]))
        return st

    monkeypatch.setattr(Path, "stat", stat)
    _refused(repo, monkeypatch, f"{init} is owned by another user (uid 4243)")
    assert not marker.exists()


@posix_owners
@pytest.mark.parametrize("writable", ["fam_pkg/sub", "fam_pkg/sub/mod.py", "fam_pkg/sub/__init__.py"])
def test_a_module_in_a_subpackage_is_checked(tmp_path, monkeypatch, clean_registry, writable):
    marker = tmp_path / "ran"
    repo = _project(tmp_path / "repo", "fam_pkg.sub.mod:family",
                    {"fam_pkg/__init__.py": "", "fam_pkg/sub/__init__.py": "",
                     "fam_pkg/sub/mod.py": _family(marker)})
    (repo / writable).chmod(0o777 if (repo / writable).is_dir() else 0o666)
    _refused(repo, monkeypatch, f"{repo / writable} is writable by group or others")
    assert not marker.exists()


def _planted_pyc(repo: Path, module: str, source: str) -> Path:
    """A ``.pyc`` of ``source`` in ``repo/__pycache__`` for ``module.py``, of the kind
    Python loads without looking at the source (unchecked hash)."""
    pyc = Path(__import__("importlib.util").util.cache_from_source(str(repo / f"{module}.py")))
    evil = repo.parent / "evil.py"
    evil.write_text(source)
    py_compile.compile(str(evil), cfile=str(pyc), doraise=True,
                       invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)
    return pyc


@posix_owners
def test_a_planted_pyc_in_a_world_writable_pycache_is_refused(tmp_path, monkeypatch, clean_registry):
    marker = tmp_path / "ran"
    repo = _project(tmp_path / "repo", "fam_plain:family", {"fam_plain.py": _family(marker)})
    pyc = _planted_pyc(repo, "fam_plain", _family(marker, says="planted"))
    pyc.parent.chmod(0o777)  # anyone could have put it there
    monkeypatch.chdir(repo)
    monkeypatch.setenv(registry.TRUST_ENV, str(repo))  # trusted: Python runs the planted code
    assert "fam_x" in registry.discover() and marker.read_text() == "planted"
    marker.unlink()
    del sys.modules["fam_plain"]
    monkeypatch.delenv(registry.TRUST_ENV)
    registry.clear()
    _refused(repo, monkeypatch, f"{pyc.parent} is writable by group or others")
    assert not marker.exists()
    pyc.parent.chmod(0o755)  # the folder is safe, the .pyc in it is not
    pyc.chmod(0o666)
    _refused(repo, monkeypatch, f"{pyc} is writable by group or others")
    assert not marker.exists()


@posix_owners
def test_a_package_reached_through_a_link_is_checked_where_it_leads(tmp_path, monkeypatch, clean_registry):
    marker = tmp_path / "ran"
    shared = tmp_path / "shared"
    (shared / "fam_pkg").mkdir(parents=True)
    (shared / "fam_pkg" / "__init__.py").write_text(_family(marker))
    shared.chmod(0o777)  # anyone may swap the package the link leads to
    repo = _project(tmp_path / "repo", "fam_pkg:family", {})
    (repo / "fam_pkg").symlink_to(shared / "fam_pkg")
    _refused(repo, monkeypatch, f"{shared} is writable by group or others")
    assert not marker.exists()


def test_a_package_of_ones_own_still_loads_with_its_pycache(tmp_path, monkeypatch, clean_registry, paprof_cli):
    marker = tmp_path / "ran"
    repo = _project(tmp_path / "repo", "fam_pkg.sub.mod:family",
                    {"fam_pkg/__init__.py": "", "fam_pkg/sub/__init__.py": "",
                     "fam_pkg/sub/mod.py": _family(marker), "fam_pkg/data.txt": "x"})
    (repo / "fam_pkg" / "data.txt").chmod(0o666)  # not code: not the rule's business
    import compileall

    assert compileall.compile_dir(str(repo / "fam_pkg"), quiet=1)  # its own __pycache__ folders
    assert (repo / "fam_pkg" / "sub" / "__pycache__").is_dir()
    monkeypatch.chdir(repo)
    result = CliRunner().invoke(paprof_cli, ["list"], catch_exceptions=False)
    assert result.exit_code == 0 and "fam_x" in result.output, result.output
    assert marker.exists()


@posix_owners
def test_list_refuses_in_one_line_exit_2(tmp_path, monkeypatch, clean_registry, paprof_cli):
    marker = tmp_path / "ran"
    repo = _project(tmp_path / "repo", "fam_pkg:family", {"fam_pkg/__init__.py": _family(marker)})
    (repo / "fam_pkg" / "__init__.py").chmod(0o646)
    monkeypatch.chdir(repo)
    result = CliRunner().invoke(paprof_cli, ["list"], catch_exceptions=False)
    assert result.exit_code == 2 and len(result.stderr.strip().splitlines()) == 1, result.output
    assert "__init__.py is writable by group or others" in result.stderr
    assert "PAPROF_TRUST" in result.stderr and not marker.exists()


@posix_owners
@pytest.mark.parametrize("init", [True, False])  # a regular package, a namespace package
def test_a_helper_package_the_family_imports_is_checked(tmp_path, monkeypatch, clean_registry, init):
    """The family module is the user's, but it imports a package beside it (``helpers``,
    not named in [tool.paprof]) whose folder others may write: refused before any import."""
    marker = tmp_path / "ran"
    files = {"fam_h.py": "import helpers\n" + _family(tmp_path / "fam"),
             "helpers/impl.py": ""}
    if init:
        files["helpers/__init__.py"] = f"open({str(marker)!r}, 'w').write('planted')\n"
    repo = _project(tmp_path / "repo", "fam_h:family", files)
    (repo / "helpers").chmod(0o777)
    _refused(repo, monkeypatch, str(repo / "helpers"))
    assert not marker.exists() and not (tmp_path / "fam").exists()


@posix_owners
@pytest.mark.parametrize("mode", [0o777, 0o1777])
def test_a_project_in_a_folder_others_may_rename_in_is_refused(tmp_path, monkeypatch, clean_registry, mode):
    """Issue 38: a folder above the project that others may write without the sticky bit
    lets them move the checked project aside and put their own in its place between the
    check and the import. With the sticky bit they may not rename what is not theirs."""
    marker = tmp_path / "ran"
    shared = tmp_path / "shared"
    repo = _project(shared / "repo", "fam_x_mod:family", {"fam_x_mod.py": _family(marker)})
    shared.chmod(mode)
    monkeypatch.chdir(repo)
    if mode & 0o1000:
        assert "fam_x" in registry.discover() and marker.exists()
        return
    _refused(repo, monkeypatch, f"{shared} is writable by group or others: they could put a folder")
    assert not marker.exists()
    monkeypatch.setenv(registry.TRUST_ENV, str(repo))  # trusted: it loads
    registry.clear()
    assert "fam_x" in registry.discover() and marker.exists()


@posix_owners
def test_a_path_folder_outside_the_project_is_held_to_the_same(tmp_path, monkeypatch, clean_registry):
    marker = tmp_path / "ran"
    shared = tmp_path / "shared"
    (shared / "lib").mkdir(parents=True)
    (shared / "lib" / "fam_y_mod.py").write_text(_family(marker, name="fam_y"))
    shared.chmod(0o777)
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "pyproject.toml").write_text(
        f'[tool.paprof]\nfamilies = ["fam_y_mod:family"]\npath = ["{shared / "lib"}"]\n')
    _refused(repo, monkeypatch, f"{shared} is writable by group or others: they could put a folder of "
                                f"their own in place of {shared / 'lib'}")
    assert not marker.exists()
