"""What a run's unreadable answers looked like, and what to try: `tpb score` and `tpb compare` say it when no answer
of a run could be read.

The advice follows from the answers themselves, never from a guess: answers that stopped at the length limit in the
middle of a JSON object want a larger `--max-new-tokens`; answers with no JSON object in them would not read at any
length (the model does not answer in the form asked); empty answers mean the model stopped at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

SAMPLE_CHARS = 60  # of one answer, quoted in the warning
KEEP = 100  # failed answers a run keeps to describe (the records keep all of them)


@dataclass(frozen=True)
class FailedAnswer:
    """One answer that did not read: its text, the reader's error, and whether it used the whole length limit."""

    text: str
    error: str | None
    at_limit: bool

    @classmethod
    def of(cls, text: str | Sequence[str] | None, error: str | None, usage: dict | None,
           max_new_tokens: int | None) -> "FailedAnswer":
        """From a record's raw answer (the first, where a repair round added a second), error and token usage."""
        first = (text[0] if text else "") if isinstance(text, (list, tuple)) else (text or "")
        used = (usage or {}).get("completion_tokens")
        at_limit = bool(max_new_tokens and used is not None and used >= max_new_tokens) or "cut off" in (error or "")
        return cls(first, error, at_limit)

    @property
    def has_json(self) -> bool:
        return "{" in self.text


def shown(text: str) -> str:
    line = " ".join(text.split())
    return repr(line if len(line) <= SAMPLE_CHARS else line[:SAMPLE_CHARS] + "…")


def every_answer_failed(failed: int, answers: Sequence[FailedAnswer], out: str, tries: Sequence[str] = (),
                        random_weights: bool | None = False) -> str:
    """The warning for a run whose `failed` answers all failed to read: what they looked like (`answers`, a sample
    of them), and what follows from it; `tries` are the options worth trying where the model does not answer in the
    form asked (the caller knows its evaluator's)."""
    head = f"WARNING: all {failed} answers of this run failed (see their `error` in {out})"
    if not answers:
        return head + "."
    sample = next((a for a in answers if a.text.strip()), answers[0])
    noise = (" A random-weight test model answers noise: that is expected of it, and measures nothing."
             if random_weights else "")
    try_these = f" Try {', or '.join(tries)}." if tries else ""
    if not any(a.text.strip() for a in answers):
        return (f"{head}: every answer was empty, so the model stopped at once. Check the model (and the server's log, "
                f"for a served one).{noise}")
    cut = [a for a in answers if a.at_limit and a.has_json]
    if len(cut) * 2 >= len(answers):
        return (f"{head}: {len(cut)} of the {len(answers)} looked at stopped at the length limit in the middle of the "
                f"answer (e.g. {shown(cut[0].text)}). Give a larger --max-new-tokens.{noise}")
    if not any(a.has_json for a in answers):
        return (f"{head}: none of them holds a JSON object (e.g. {shown(sample.text)}), so the model does not answer "
                f"in the form asked, and a longer answer would not read either.{try_these}{noise}")
    with_json = next(a for a in answers if a.has_json)
    return (f"{head}: they hold JSON, but not in the answer's form (e.g. {shown(with_json.text)}: "
            f"{with_json.error}).{try_these}{noise}")
