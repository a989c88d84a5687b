"""Names that become file or folder names in a run store: one safe path component.

A sweep's ``--name``, a manifest's ``"name"`` read from a shard, a run's ``--name``:
each is checked here before it is joined to a path, so nothing is written outside the
store and nothing is hidden inside it (a leading ``.`` or the ``.tmp-`` mark make the
readers skip a file as temporary).
"""

from __future__ import annotations

import re

from paprof.errors import UserError

MAX_LENGTH = 100
"""Longest name accepted (a file name, with its suffixes, must stay under 255 bytes)."""
TEMP_MARK = ".tmp-"
_BAD = re.compile(r"[/\\\x00-\x1f\x7f]")


def slug(text: str) -> str:
    """A lower-case, file-name-safe id: ``"NVIDIA H200"`` -> ``"nvidia-h200"``."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "unknown"


def problem(name) -> str | None:
    """Why ``name`` is not one safe path component, or None when it is."""
    if not isinstance(name, str):
        return f"must be a string, not {type(name).__name__}"
    if not name:
        return "is empty"
    if len(name) > MAX_LENGTH:
        return f"is {len(name)} characters long (at most {MAX_LENGTH})"
    if _BAD.search(name):
        return "holds '/', '\\' or a control character (one file name is needed)"
    if name.startswith("."):
        return "starts with '.' (such files are hidden from the store's readers)"
    if TEMP_MARK in name:
        return f"holds {TEMP_MARK!r} (the mark of temporary files)"
    if name.strip() != name:
        return "starts or ends with white space"
    return None


def check(name, what: str = "--name") -> str:
    """``name`` when it is one safe path component; else ``UserError`` naming ``what``."""
    why = problem(name)
    if why is not None:
        raise UserError(f"{what} {safe(name)} {why}; use letters, digits, '-', '_' and '.'")
    return name


def safe(text, limit: int = 120) -> str:
    """``repr`` of ``text`` cut to ``limit`` characters: fit for one line of a terminal."""
    shown = ascii(text) if isinstance(text, str) else ascii(str(text))
    return shown if len(shown) <= limit else shown[: limit - 3] + "..."
