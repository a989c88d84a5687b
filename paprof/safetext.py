"""Text from stores and arguments made safe to show: one sanitiser for every text that
reaches a terminal, a Markdown or HTML report, a JUnit file or an MCP answer.

A variant name, a kernel name, a shape or a message comes from files others may have
written (a sidecar in a shared store, a shard a CI job uploaded) or from a caller's
arguments. Shown raw, an ESC starts a terminal escape sequence (colours, a cursor
move, OSC 8 links, a title), a CR overwrites the line, a BEL rings, and a bidi
override (U+202E) makes text read in another order than it runs. :func:`shown` writes
each such character as an escape that reads as itself (``\\x1b``, ``\\u202e``) and caps
the length with a note of what was left out.
"""

from __future__ import annotations

import re

LIMIT = 4096
"""The default cap: more than any real name or message, far less than a hostile one."""

_BIDI = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
"""Arabic letter mark, LRM and RLM, the embeddings and overrides, the isolates."""
_UNSAFE = re.compile(f"[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029{_BIDI}]")
_UNSAFE_KEEP_NEWLINES = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029{_BIDI}]")


def _escape(match: re.Match) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def shown(value, limit: int | None = LIMIT, newlines: bool = False) -> str:
    """``value`` as text safe to show: C0/C1 control characters (ESC, BEL, CR, DEL ...
    and newlines unless ``newlines``; tabs kept) and bidi controls written as escapes; past
    ``limit`` characters (None: no cap) cut, with ``... (1,234 more characters)``."""
    text = "" if value is None else str(value)
    more = 0
    if limit is not None and len(text) > limit:
        text, more = text[:limit], len(text) - limit
    text = (_UNSAFE_KEEP_NEWLINES if newlines else _UNSAFE).sub(_escape, text)
    return f"{text}... ({more:,} more characters)" if more else text


def is_safe(text: str, newlines: bool = False) -> bool:
    """Whether ``text`` holds no character :func:`shown` would escape."""
    return not (_UNSAFE_KEEP_NEWLINES if newlines else _UNSAFE).search(text)
