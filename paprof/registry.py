"""Finding kernel families: installed packages' and the user's own repository's.

paprof ships no family and knows none by name. Three sources, in this order:

1. installed packages that declare an entry point in the group ``paprof.families``::

       [project.entry-points."paprof.families"]
       softmax = "my_kernels.softmax:family"

2. the repository you run paprof in: the nearest ``pyproject.toml`` above the current
   folder with a ``[tool.paprof]`` table::

       [tool.paprof]
       families = ["softmax_family:family"]   # module:attribute (a Family object)
       path = ["."]                           # folders put on the import path (default ".")

3. ``$PAPROF_FAMILIES`` (``module:attribute``, comma-separated): the family that
   ``paprof.profile`` generates for a notebook's callables, in the processes it starts.

A reference may name the module only (``softmax_family``): its ``FAMILY`` or ``family``
attribute is used. A family that cannot be loaded is a one-line error naming its module
and what is missing (exit 2). Nothing here imports CuPy or any GPU code.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

from paprof.errors import ShapeError, UserError
from paprof.family import CommandVariant, Family, Variant, import_module, load_object

ENTRY_POINT_GROUP = "paprof.families"
CONFIG_TABLE = "paprof"


@dataclass(frozen=True)
class ProjectConfig:
    """The ``[tool.paprof]`` table of a repository's ``pyproject.toml``."""

    pyproject: Path
    families: tuple[str, ...]
    path: tuple[Path, ...]

    @property
    def root(self) -> Path:
        return self.pyproject.parent


def _read_toml(path: Path) -> dict:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib
    try:
        with open(path, "rb") as fh:
            return tomllib.load(fh)
    except (OSError, ValueError) as err:
        raise UserError(f"cannot read {path}: {err}") from None


FAMILIES_ENV = "PAPROF_FAMILIES"
"""Families named by the environment (``module:attribute``, comma-separated), loaded last:
how ``paprof.profile`` hands the family it generates for a notebook's
callables to the launcher it starts (``paprof/profile_api.py``)."""

TRUST_ENV = "PAPROF_TRUST"
"""Folders (or pyproject.toml files), ``os.pathsep``-separated, whose ``[tool.paprof]``
code is imported even though another user owns them or others may write them."""


def _trusted_by_env() -> list[Path]:
    out = []
    for item in os.environ.get(TRUST_ENV, "").split(os.pathsep):
        if item.strip():
            try:
                out.append(Path(item).expanduser().resolve())
            except (OSError, RuntimeError):
                continue
    return out


def _why_untrusted(path: Path) -> str | None:
    """Why ``path`` is not safe to import code from: owned by another user (not root),
    or writable by group or others; None when it is safe (or the OS has no owners)."""
    if not hasattr(os, "getuid"):
        return None
    try:
        st = path.stat()
    except OSError as err:
        return f"cannot be checked ({err.strerror or err})"
    if st.st_uid not in (os.getuid(), 0):
        return f"is owned by another user (uid {st.st_uid})"
    if st.st_mode & 0o022:
        return "is writable by group or others"
    return None


def check_trusted(config: "ProjectConfig") -> None:
    """``UserError`` (one line naming the file and how to trust it) unless everything
    Python may import a family's code from belongs to this user (or root) and only they
    may write it, or ``PAPROF_TRUST`` names the project: the ``pyproject.toml`` and its
    folder, each folder it puts on the import path with the modules directly in it and
    its ``__pycache__``, and the whole of each family module's top-level package (its
    folders, ``__init__.py``, subpackages, ``__pycache__`` folders and compiled files).
    A folder others may write is refused even with the sticky bit: they could add a
    module or a ``.pyc`` that Python would import."""
    trusted = _trusted_by_env()
    if config.root in trusted or config.pyproject in trusted:
        return
    tops = {ref.partition(":")[0].split(".")[0] for ref in config.families}
    items = [config.pyproject, config.root]
    for folder in config.path:
        if folder not in trusted:
            if folder.is_relative_to(config.root):  # and the folders between
                items.extend(config.root / p for p in reversed(folder.relative_to(config.root).parents[:-1]))
            items.extend(_import_path(folder, tops))
    for item in [i for i in items if os.path.islink(i)]:  # where a link leads: its folder
        items.append(Path(os.path.realpath(item)).parent)
    for item in items:
        why = _why_untrusted(item)
        if why is not None and os.path.lexists(item):
            raise UserError(
                f"{item} {why}: paprof will not import the families of {config.pyproject} "
                f"from it; make it yours and not writable by others (chown, chmod go-w), or "
                f"trust it with {TRUST_ENV}={config.root}")
    for folder in (config.root, *(f for f in config.path if f not in trusted)):
        above = _replaceable_above(folder)
        if above is not None:
            raise UserError(
                f"{above[0]} {above[1]}: they could put a folder of their own in place of "
                f"{folder} between paprof's check and the import, so paprof will not import the "
                f"families of {config.pyproject}; move the project, or trust it with "
                f"{TRUST_ENV}={config.root}")


def check_code_folder(folder: Path, what: str) -> None:
    """``UserError`` (one line) unless ``folder``, from which a child process paprof starts
    imports generated code (``paprof.profile``), may be written only by this user (or
    root) and no folder above it lets others rename or replace it."""
    why = _why_untrusted(folder)
    above = (folder, why) if why is not None else _replaceable_above(folder)
    if above is not None:
        raise UserError(f"{above[0]} {above[1]}: paprof will not put {what} there, where "
                        f"another user could change it before it is imported; use a run "
                        f"store only you may write")


def _replaceable_above(folder: Path) -> tuple[Path, str] | None:
    """The first folder above ``folder`` (its real path) in which someone other than this
    user and root could rename or replace what lies below it, and why: owned by another
    user, or writable by group or others without the sticky bit (with it, others may
    not rename what is not theirs). None when there is none."""
    for here in Path(os.path.realpath(folder)).parents:
        why = _why_untrusted(here)
        if why == "is writable by group or others" and here.stat().st_mode & 0o1000:
            continue  # the sticky bit: only an entry's owner may rename it
        if why is not None:
            return here, why
    return None


def _importable(name: str) -> bool:
    from importlib.machinery import all_suffixes

    return name.endswith(tuple(all_suffixes()))


def _import_path(folder: Path, tops: set[str]) -> list[Path]:
    """What Python may import the modules ``tops`` (and what they import beside them)
    from in ``folder``: the folder, its module files, its ``__pycache__`` and all in it,
    and every folder and module file of each package found there: ``tops`` and any other
    folder named like a module (a family's ``import helpers`` imports ``helpers/``, with
    or without an ``__init__.py``), links followed, as Python does, each folder once."""
    items = [folder]
    try:
        entries = sorted(folder.iterdir())
    except OSError:
        return items
    for entry in entries:
        if (entry.name == "__pycache__" or entry.name in tops
                or (entry.name.isidentifier() and os.path.isdir(entry))):
            items.extend(_tree(entry))
        elif _importable(entry.name):
            items.append(entry)
    return items


def _tree(top: Path) -> list[Path]:
    """``top`` and, for a folder, every folder below it and every module file (and every
    file of a ``__pycache__``) in them."""
    items, stack, seen = [], [top], set()
    while stack:
        here = stack.pop()
        items.append(here)
        try:
            st = here.stat()
        except OSError:
            continue
        if not os.path.isdir(here) or (st.st_dev, st.st_ino) in seen:
            continue
        seen.add((st.st_dev, st.st_ino))
        try:
            entries = sorted(here.iterdir())
        except OSError:
            continue
        for entry in entries:
            if os.path.isdir(entry) or here.name == "__pycache__" or _importable(entry.name):
                stack.append(entry)
    return items


def project_config(start: Path | str | None = None) -> ProjectConfig | None:
    """The ``[tool.paprof]`` table of the project paprof runs in: the nearest
    ``pyproject.toml`` at or above ``start`` (the current folder). The search stops at
    the first ``pyproject.toml`` (the project root, with or without the table) and at the
    repository root (the first folder holding ``.git``): a folder above the project is
    never read. None when there is no table."""
    here = Path(start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        pyproject = folder / "pyproject.toml"
        if pyproject.is_file():
            return _config_of(pyproject)
        if (folder / ".git").exists():
            return None
    return None


#: The keys of ``[tool.paprof]``: anything else is refused (a misspelt key would
#: otherwise be ignored in silence).
CONFIG_KEYS = ("families", "path")


def _config_of(pyproject: Path) -> ProjectConfig | None:
    folder = pyproject.parent
    tool = _read_toml(pyproject).get("tool", {})
    if not isinstance(tool, dict):
        raise UserError(f"{pyproject}: 'tool' must be a table ([tool.paprof] ...), not "
                        f"{type(tool).__name__}")
    table = tool.get(CONFIG_TABLE)
    if table is None:
        return None
    if not isinstance(table, dict):
        raise UserError(f"{pyproject}: [tool.paprof] must be a table")
    unknown = sorted(set(table) - set(CONFIG_KEYS))
    if unknown:
        import difflib

        near = difflib.get_close_matches(str(unknown[0]), CONFIG_KEYS, n=1)
        raise UserError(f"{pyproject}: [tool.paprof] has an unknown key {unknown[0]!r}"
                        + (f" (did you mean {near[0]!r}?)" if near else "")
                        + f"; known: {', '.join(CONFIG_KEYS)}")
    fams = table.get("families", [])
    paths = table.get("path", ["."])
    if isinstance(fams, str):
        fams = [fams]
    if isinstance(paths, str):
        paths = [paths]
    if (not isinstance(fams, list) or not isinstance(paths, list)
            or not all(isinstance(f, str) for f in fams) or not all(isinstance(p, str) for p in paths)):
        raise UserError(f"{pyproject}: [tool.paprof] families and path are lists of strings")
    return ProjectConfig(pyproject, tuple(fams), tuple((folder / p).resolve() for p in paths))


def _load_family(ref: str, origin: str) -> Family:
    module_name, _, attr = ref.partition(":")
    what = f"the paprof family {ref!r} ({origin})"
    if attr:
        obj = load_object(ref, what)
    else:
        module = import_module(module_name, what)
        obj = getattr(module, "FAMILY", None) or getattr(module, "family", None)
        if obj is None:
            raise UserError(f"{what}: module {module_name!r} defines neither FAMILY nor family")
    if not isinstance(obj, Family):
        raise UserError(f"{what}: {ref} is a {type(obj).__name__}, not a paprof.family.Family")
    obj.origin = origin
    return obj


def _entry_points():
    from importlib.metadata import entry_points

    return sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda ep: ep.name)


_CACHE: dict[str, dict[str, Family]] = {}


def clear() -> None:
    """Forget what was discovered (tests change folders and installed entry points)."""
    _CACHE.clear()


def discover(start: Path | str | None = None) -> dict[str, Family]:
    """Every visible family by name, installed packages' first. Cached per starting folder."""
    key = str(Path(start or Path.cwd()).resolve())
    if key in _CACHE:
        return _CACHE[key]
    found: dict[str, Family] = {}

    def add(fam: Family) -> None:
        old = found.get(fam.name)
        if old is not None and old is not fam:
            raise UserError(f"two families are named {fam.name!r}: {old.origin} ({old.module}) "
                            f"and {fam.origin} ({fam.module}); rename one")
        found[fam.name] = fam

    for ep in _entry_points():
        dist = getattr(getattr(ep, "dist", None), "name", None)
        add(_load_family(ep.value, f"entry point {ep.name}" + (f" of {dist}" if dist else "")))
    config = project_config(start)
    if config is not None and config.families:
        check_trusted(config)
        for folder in reversed(config.path):
            if str(folder) not in sys.path:
                sys.path.insert(0, str(folder))
        for ref in config.families:
            add(_load_family(ref, f"[tool.paprof] of {config.pyproject}"))
    for ref in filter(None, (r.strip() for r in os.environ.get(FAMILIES_ENV, "").split(","))):
        add(_load_family(ref, f"${FAMILIES_ENV}"))
    _CACHE[key] = found
    return found


def families() -> tuple[str, ...]:
    return tuple(discover())


def family(name: str) -> Family:
    fams = discover()
    if not fams:
        raise UserError(NO_FAMILY)
    if name not in fams:
        raise UserError(f"unknown kernel family {name!r}; known: {', '.join(fams)}")
    return fams[name]


def variants(family_name: str | None = None) -> list[Variant]:
    """All variants, or one family's, in story order."""
    fams = [family(family_name)] if family_name else list(discover().values())
    return [v for f in fams for v in f.variants]


def get(name: str, family_name: str | None = None) -> Variant:
    """A variant by ``id`` or ``family/id``; unknown names list the known ones."""
    if "/" in name:
        family_name, name = name.split("/", 1)
    if not discover():
        raise UserError(NO_FAMILY)
    candidates = [v for v in variants(family_name) if v.id == name]
    if not candidates:
        known = ", ".join(v.id if family_name else v.name for v in variants(family_name))
        raise UserError(f"unknown variant {name!r}; known: {known} (or 'all')")
    if len(candidates) > 1:
        raise UserError(f"variant {name!r} exists in several families; say which: "
                        + ", ".join(v.name for v in candidates))
    return candidates[0]


def resolve(names, family_name: str | None = None) -> list[Variant]:
    """Expand ``all`` and drop repeats, keeping the order given. The variants of one run
    share their parameters, so they must come from one family."""
    names = list(names or ())
    if not names:
        raise UserError("name at least one variant (--variant v3, or --variant all)")
    if "all" in names and family_name is None:
        named = [get(n) for n in names if n != "all"]
        fams = {v.family for v in named} or set(discover())
        if not fams:
            raise UserError(NO_FAMILY)
        if len(fams) > 1:
            raise UserError(ALL_NEEDS_A_FAMILY + ", ".join(sorted(fams)))
        family_name = fams.pop()
    out: list[Variant] = []
    for name in names:
        chosen = variants(family_name) if name == "all" else [get(name, family_name)]
        out.extend(v for v in chosen if v not in out)
    fams = sorted({v.family for v in out})
    if len(fams) > 1:
        raise UserError("the variants of one run share their parameters, so they must be of "
                        f"one family; these are of {', '.join(fams)}")
    return out


ALL_NEEDS_A_FAMILY = ("--variant all needs one family and several are visible (paprof never "
                      "guesses one); say which with --family: ")
"""What ``--variant all`` says without ``--family`` when more than one family is visible."""

NO_FAMILY = ("no kernel family is visible: install one (pip install -e ./kernels gives the "
             "kernel lab's paged_decode and flash_fwd) or declare your own under [tool.paprof] "
             "in your pyproject.toml (docs/your-kernels.md)")
"""What a command that needs a family says when none is installed or declared."""


def family_for(names=(), name: str | None = None) -> Family:
    """The family of a command's variants: ``name`` where given, else the family of the
    variants named (``v3`` is paged_decode's when only it has a ``v3``), else the only
    visible family."""
    named = [n for n in (names or ()) if n != "all"]
    if name or not named:
        return the_family(name)
    return family(resolve(named)[0].family)


def the_family(name: str | None = None) -> Family:
    """The family ``name``, or, without one, the only visible family; a one-line error
    listing them when there are several (paprof never picks one by name)."""
    if name:
        return family(name)
    fams = discover()
    if not fams:
        raise UserError(NO_FAMILY)
    if len(fams) > 1:
        raise UserError("several kernel families are visible; say which with --family: "
                        + ", ".join(fams))
    return next(iter(fams.values()))


def check_params(variants, params) -> None:
    """Raise the first variant's ``ShapeError`` when none of ``variants`` takes ``params``
    (before any GPU or ncu is looked for)."""
    errors = []
    for v in variants:
        try:
            v.check(params)
            return
        except ShapeError as err:
            errors.append(err)
    raise errors[0]


def family_of(variant: Variant) -> Family:
    return family(variant.family)


def command_variant(command: list[str], nvtx_range: str, name: str,
                    kernel_regex: str | None = None) -> CommandVariant:
    """The variant ``paprof run --cmd`` profiles (family ``command``)."""
    return CommandVariant(id=name, idea=f"external command: {' '.join(command)}",
                          kernel_regex=kernel_regex, launch="the program's own launches",
                          family=COMMAND_FAMILY, command=tuple(command), range_name=nvtx_range)


COMMAND_FAMILY = "command"
"""The run-store family of variants profiled with ``paprof run --cmd``."""
