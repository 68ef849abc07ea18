"""Errors that point at the file, line and field of bad input."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Problem:
    """One thing wrong with an input file. `line` is 1-based (the header of a CSV is line 1)."""

    file: str
    message: str
    line: int | None = None
    field: str | None = None

    def __str__(self) -> str:
        where = self.file if self.line is None else f"{self.file}:{self.line}"
        return f"{where}: {self.field}: {self.message}" if self.field else f"{where}: {self.message}"


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


class SystematicFailure(RuntimeError):
    """Every item that reached the model in a run's first batches failed in the model: not one item's problem."""


class RunStopped(RuntimeError):
    """Nothing more can be scored (a server refused the API key): the run stops at once, the batch at hand
    unwritten. Unlike one item's failure, it is never caught per item."""
