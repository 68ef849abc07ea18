"""Errors that point at the file, line and field of bad input."""

from __future__ import annotations

import reprlib
from dataclasses import dataclass

MAX_PROBLEM_CHARS = 1000
"""The longest a problem's line is shown: a message quoting hostile data (a value of a million characters, or the
expansion of nested YAML aliases) is cut here, in the one place every problem is formatted."""

_QUOTE = reprlib.Repr()
_QUOTE.maxstring = _QUOTE.maxother = 200
_QUOTE.maxlevel, _QUOTE.maxlist, _QUOTE.maxtuple, _QUOTE.maxdict, _QUOTE.maxset = 3, 6, 6, 6, 6


def quote(value: object) -> str:
    """`repr(value)` for a message, bounded however large or deeply nested the value is: long strings, lists and
    mappings are elided with `...`, never formatted in full first."""
    return _QUOTE.repr(value)


def bounded(text: str, limit: int = MAX_PROBLEM_CHARS) -> str:
    """`text`, cut to `limit` characters with a note of how long it was."""
    return text if len(text) <= limit else f"{text[:limit]}... (cut: {len(text):,} characters in all)"


@dataclass(frozen=True)
class Problem:
    """One thing wrong with an input file. `line` is 1-based (the header of a CSV is line 1). Shown bounded
    (`MAX_PROBLEM_CHARS`): the place comes first, so a cut never hides it."""

    file: str
    message: str
    line: int | None = None
    field: str | None = None

    def __str__(self) -> str:
        where = self.file if self.line is None else f"{self.file}:{self.line}"
        return bounded(f"{where}: {self.field}: {self.message}" if self.field else f"{where}: {self.message}")


class Notice(UserWarning):
    """What the package tells its user about a run that goes on (no Chinese font, a fit that did not converge, a
    plugin that does not load), given as a Python warning so that a caller can filter or record it; the command line
    says it in one plain line (`cli.say_notices`). Every warning of the package is one."""


class DataError(ValueError):
    """Input that cannot be used, with every problem found (not just the first)."""

    def __init__(self, problems: list[Problem] | Problem):
        self.problems = [problems] if isinstance(problems, Problem) else list(problems)
        shown = self.problems[:50]
        lines = [str(p) for p in shown]
        if len(self.problems) > len(shown):
            lines.append(f"... and {len(self.problems) - len(shown)} more problems")
        noun = "problem" if len(self.problems) == 1 else "problems"
        super().__init__(f"{len(self.problems)} {noun}:\n" + "\n".join(lines))


class ImageError(ValueError):
    """An image that is not read (`files.open_image`): unreadable, or refused by its size (`ImageTooLarge`)."""


class ImageTooLarge(ImageError):
    """An image over the pixel limit, refused from its header before it is decoded."""


class SystematicFailure(RuntimeError):
    """Every item that reached the model in a run's first batches failed in the model: not one item's problem."""


class RunStopped(RuntimeError):
    """Nothing more can be scored (a server refused the API key): the run stops at once, the batch at hand
    unwritten. Unlike one item's failure, it is never caught per item."""
