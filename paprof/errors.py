"""The errors the command line turns into one-line messages.

Library code raises these for problems a user can fix (bad input, missing tools, a
variant that computes the wrong answer). Anything else is a bug and keeps its traceback.
"""


class PaprofError(Exception):
    """Base of the user-facing errors; ``exit_code`` is what the CLI exits with. Its text
    is safe to show wherever it is shown (a notebook's traceback, a terminal, a log): the
    names it quotes come from stores others wrote, so control characters and bidi
    overrides are written as escapes (``paprof.safetext``)."""

    exit_code = 2

    def __str__(self) -> str:
        from paprof.safetext import shown

        return shown(super().__str__(), limit=None, newlines=True)


class UserError(PaprofError):
    """Bad input or environment: the CLI prints the message and exits 2."""

    exit_code = 2


class UsageError(UserError):
    """Options that do not go together, or are missing."""


class ShapeError(UserError):
    """A problem shape that a variant (or the problem itself) cannot take."""


class Finding(PaprofError):
    """A result the user asked us to detect: failed verification, a regression. Exit 1."""

    exit_code = 1


class VerificationError(Finding):
    """A kernel's output disagrees with the float64 reference."""


_ENVIRONMENT_ERRNOS = ("ENOSPC", "EDQUOT", "EROFS", "EACCES", "EPERM", "ENAMETOOLONG")
"""OSErrors that are the machine's state (a full or read-only disk, permissions, a name
too long), not a bug: a one-line error wherever they come from."""


def environment_error(err: BaseException, detail: str = "") -> "UserError | None":
    """The ``UserError`` an OSError of the machine's state stands for (``detail`` added
    in brackets); None for any other exception."""
    import errno

    if not isinstance(err, OSError):
        return None
    if err.errno not in {getattr(errno, n) for n in _ENVIRONMENT_ERRNOS if hasattr(errno, n)}:
        return None
    where = f" {err.filename}" if err.filename else ""
    text = str(err.strerror or err).replace("\n", " ")
    return UserError(f"cannot write{where}: {text}" + (f" ({detail})" if detail else ""))
