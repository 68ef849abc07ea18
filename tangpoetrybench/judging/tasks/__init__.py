"""What is asked: each task turns an item into questions for a backend (`judging.backends`), reads each answer with
its reader (`judging.reading`), and makes the item's record from what was read. One evaluator (`judging.judge.Judge`)
joins a task to a backend, and writes the batching, the repair round, the token accounting and the failure records
once for all of them.

    scores     the rubric's scores, plain or with a reason per dimension (explain mode), decoded or read out
    pairwise   which of two illustrations of one poem is better (A shown first)
    letter     which of four candidate poems an image illustrates (the paper's Phase 1), in several orders

SemJudge's steps (a poem's graph, an image's graph, the judgment) are questions of the same kind, asked through the
same machinery by `judging.semjudge`. A task declares its questions (messages, JSON schema, local constraint,
choices, readout), its reader, the wording of its repair round, its reader's version and its record type
(`judging.records`). A new task is a class following `Task` in a module here; its answer's reader goes in
`judging.reading` where no reader reads it yet, its record type in `judging.records` where its records are a kind no
reader of results knows yet, and an evaluator asks it (a registry row: `judging.registry`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, Sequence

from ..backends import Answer, Backend, Question


@dataclass
class Reading:
    """What a task's reader made of one answer: its value (None when it read nothing), ok / repaired / failed (the
    reader's own: `repaired` means read with repairs, which its `error` lists)."""

    value: Any
    status: str
    error: str | None = None

    @property
    def failed(self) -> bool:
        return self.status == "failed"


class Task(Protocol):
    """What a task declares (see the module's docstring); a task class subclasses it for the default `failed`."""

    record_type: type  # its records' type (`records`), whose `task` is its name
    name: str
    noun: str  # what the answer gives, in a sentence ("scores", "the winner", "the letter")
    uses_rubric: bool  # records carry the rubric's fingerprint
    questions_per_item: int
    default_max_new_tokens: int  # the answer length limit unless one is given

    def settings(self, backend: Backend) -> dict[str, Any]:
        """The task's own settings (its reader's version under "parser", its modes)."""

    def check(self, backend: Backend, max_new_tokens: int) -> None:
        """Refuse, before anything is asked, what cannot work on this backend."""

    def questions(self, item, judge) -> list[Question]: ...

    def read(self, question: Question, answer: Answer) -> Reading: ...

    def repair_prompt(self, question: Question, reading: Reading) -> str:
        """The user turn of the repair round, after the answer that did not read."""

    def record(self, judge, item, attempts: Sequence) -> Any:
        """The item's record from its questions' attempts (`judge.Attempt`)."""

    def failed(self, judge, item, error: str | None, kind: str | None) -> Any:
        """The record of an item that was never answered (`kind`: input, model, transient): by default the judge's
        failed image record (`Evaluator.result`)."""
        return judge.result(item, {}, None, None, "failed", error, kind=kind)


__all__ = ["Reading", "Task"]
