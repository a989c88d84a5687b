"""Source text for a run's line table, from the family that made the run.

paprof compiles a CUDA variant's sources as one module (``paprof.measure.kernels.gpu``: the files
joined with newlines), which CuPy writes to a temporary ``<hash>.cubin.cu`` that is gone
when the report is read; the headers it includes are named by their absolute path on the
machine that ran it. :class:`FamilySources` maps both back to the family's files: the
module's lines to the sources the variant compiles at the run's parameters (the static
gate's ``compile_units``), a header under the run's family folder to the same file here.
The text is the run's commit's (``git show``) where this checkout has that commit, else
the working tree's, and ``note`` says which.

Only family data is read (parameters, the variant's declared sources): no kernel or GPU
code is imported.
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from pathlib import Path

from paprof.model.source import Sources
from paprof.errors import UserError
from paprof import registry

MODULE_SUFFIX = ".cubin.cu"
"""How CuPy names the module file it compiles (``<sha1>.cubin.cu``)."""


def _git_text(path: Path, commit: str, then: str | None = None) -> str | None:
    """``path`` as it was at ``commit`` (None: not a git checkout, or not in it); ``then``,
    where given, is where the file was at that commit relative to the repository's root
    (a family folder that has moved since)."""
    spec = f"{commit}:{then}" if then else f"{commit}:./{path.name}"
    try:
        done = subprocess.run(["git", "-C", str(path.parent), "show", spec],
                              capture_output=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.decode("utf-8", "replace") if done.returncode == 0 else None


class FamilySources(Sources):
    """``Sources`` for one run: its sidecar names the family, variant, parameters,
    the family folder it ran from and the commit."""

    def __init__(self, sidecar: dict):
        super().__init__()
        self.sidecar = sidecar
        origin = sidecar.get("source") if isinstance(sidecar.get("source"), dict) else {}
        self.commit = origin.get("commit") or sidecar.get("git_commit")
        self.dirty = origin.get("dirty") if origin.get("dirty") is not None else sidecar.get("git_dirty")
        self.run_folder = origin.get("path")
        self.run_repo = origin.get("repo")
        self.folder, self.module = self._compiled()
        self._origins: set[str] = set()

    def _compiled(self) -> tuple[Path | None, list[Path]]:
        """The family's folder here and the sources the variant compiled (as one module)."""
        from paprof.measure.static import compile_units

        try:
            family = registry.family(str(self.sidecar.get("family")))
            variant = registry.get(str(self.sidecar.get("variant")), family.name)
            units = compile_units(variant, family.parse(self.sidecar.get("shape")))
        except (UserError, ValueError, TypeError, AttributeError):
            return None, []
        sources = list(units[0].sources) if units else []
        folder = Path(variant.folder) if getattr(variant, "folder", None) else (
            sources[0].parent if sources else None)
        return folder, sources

    def _then(self, path: Path) -> str | None:
        """Where ``path`` (a file of the family folder here) was at the run's commit,
        relative to the run's repository, from the folder the run recorded: the same
        file even when the family has moved since (None when that is not known)."""
        if not (self.run_folder and self.run_repo and self.folder):
            return None
        try:
            folder = Path(self.run_folder).relative_to(self.run_repo)
            return (folder / Path(path).resolve().relative_to(Path(self.folder).resolve())).as_posix()
        except ValueError:
            return None

    def _text(self, path: Path) -> str | None:
        if self.commit:
            text = _git_text(path, self.commit)
            then = self._then(path) if text is None else None
            if then:
                text = _git_text(path, self.commit, then)
            if text is not None:
                self._origins.add(f"commit {self.commit}")
                return text
        try:
            text = path.read_text(errors="replace")
        except OSError:
            return None
        self._origins.add("working tree")
        return text

    def _here(self, file: str) -> Path | None:
        """A header recorded under the run's family folder, in this family folder."""
        if not (self.run_folder and self.folder):
            return None
        try:
            rel = Path(file).relative_to(self.run_folder)
        except ValueError:
            return None
        path = self.folder / rel
        return path if path.is_file() else None

    def _module_lines(self) -> list[tuple[str, int, str]] | None:
        """(source name, its line, text) of each line of the compiled module."""
        if not self.module:
            return None
        texts = [self._text(p) for p in self.module]
        if any(t is None for t in texts):
            return None
        out = []
        for path, text in zip(self.module, texts):  # joined with "\n", as compile_module does
            out += [(path.name, i, t) for i, t in enumerate(text.split("\n"), start=1)]
        return out

    def locate(self, file: str, line: int) -> tuple[str, str | None]:
        if file in self._embedded or Path(file).is_file() and self._here(file) is None:
            return super().locate(file, line)
        if Path(file).name.endswith(MODULE_SUFFIX) and not Path(file).exists():
            key = "<module>"
            if key not in self._cache:
                self._cache[key] = self._module_lines()
            lines = self._cache[key]
            if lines and 0 < line <= len(lines):
                name, local, text = lines[line - 1]
                return f"{name}:{local}", text
            return f"{Path(file).name}:{line}", None
        here = self._here(file)
        if here is not None:
            if file not in self._cache:
                text = self._text(here)
                self._cache[file] = text.split("\n") if text is not None else None
            lines = self._cache[file]
            return (f"{here.name}:{line}",
                    lines[line - 1] if lines and 0 < line <= len(lines) else None)
        return super().locate(file, line)

    @property
    def note(self) -> str:
        if not self._origins:
            return ""
        where = " and ".join(sorted(self._origins))
        text = f"source text from {_shown(self.folder)} ({where})"
        if "working tree" in self._origins and self.commit:
            text += f"; the run was made at commit {self.commit}, so lines may have moved since"
        if self.dirty:
            text += "; the run's checkout had uncommitted changes"
        return text


def _shown(folder: Path | None) -> str:
    """A family folder as a reader knows it: inside paprof's package relative to it
    (``kernels/paprof_kernels/paged_decode``), else as it is."""
    if folder is None:
        return "?"
    root = Path(__file__).resolve().parents[2]  # the folder paprof's package is in
    try:
        return str(Path(folder).resolve().relative_to(root))
    except ValueError:
        return str(folder)


def for_run(sidecar: dict | None) -> Sources:
    """The ``Sources`` for a run: family-aware where its sidecar names a family."""
    if isinstance(sidecar, Mapping) and sidecar.get("family") and sidecar.get("variant"):
        return FamilySources(sidecar)
    return Sources()
