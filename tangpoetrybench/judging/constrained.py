"""Constrained decoding for the transformers backend: every answer is the rubric's JSON object, in the form PAE is
trained to give (`prompt.format_answer`: every key in rubric order, numbers in [0, 1] with at most two decimals,
null only where the dimension can be excluded), so every answer parses. The model still chooses every value:
at each step the logits of the tokens that would leave that form are masked, and greedy decoding picks the best
of the rest (the vLLM backend gets the same guarantee from its JSON-schema decoding).

The candidate tokens are few (those of the answer's fixed text, the digits, the point and `null`), so a step checks a
handful of strings per row, not the vocabulary. Explain mode's form (`{"scores": {…}, "reasons": {…}}`) adds one
string slot per key: a non-empty sentence of at most `MAX_REASON_CHARS` characters with no quote, backslash or
control character; the tokens that may go inside one are found once, over the vocabulary.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable, Sequence

import torch
from transformers import LogitsProcessor

from ..rubric import Rubric
from .prompt import MAX_REASON_CHARS

NUMBERS = ("0", "1", "0.0", "1.0", "1.00", *(f"0.{d}" for d in range(1, 10)), *(f"0.{d:02d}" for d in range(100)))
VALUE_CHARS = set("0123456789.nul")


@dataclass(frozen=True)
class Grammar:
    """The answer form of one rubric: the fixed text between the values (one piece more than there are values) and
    each value's kind: "number", "nullable" (a number or null) or "string" (a reason)."""

    literals: tuple[str, ...]
    kinds: tuple[str, ...]

    @classmethod
    def of(cls, rubric: Rubric, explain: bool = False) -> "Grammar":
        keys = [json.dumps(k, ensure_ascii=False) for k in rubric.keys]
        kinds = tuple("nullable" if any(o.excluded for o in rubric.dimension(k).options) else "number"
                      for k in rubric.keys)
        if not explain:
            return cls(tuple(("{" if i == 0 else ", ") + k + ": " for i, k in enumerate(keys)) + ("}",), kinds)
        scores = tuple(('{"scores": {' if i == 0 else ", ") + k + ": " for i, k in enumerate(keys))
        reasons = tuple(('}, "reasons": {' if i == 0 else '", ') + k + ': "' for i, k in enumerate(keys))
        return cls(scores + reasons + ('"}}',), kinds + ("string",) * len(keys))


REASON_FORBIDDEN = set('"\\') | {chr(i) for i in range(0x20)}  # what JSON would need escaped inside a reason


def _is_text(c: str) -> bool:
    """A character a reason may hold as it is (JSON would escape the others)."""
    return c not in REASON_FORBIDDEN


@lru_cache(maxsize=2)
def _values(nullable: bool) -> tuple[frozenset[str], frozenset[str]]:
    """(complete values, prefixes of values) of one number slot."""
    complete = set(NUMBERS) | ({"null"} if nullable else set())
    return frozenset(complete), frozenset(v[:i] for v in complete for i in range(len(v) + 1))


def state(text: str, grammar: Grammar) -> tuple[str, str]:
    """Where `text` stands in the answer form: ("bad", ""), ("done", ""), ("literal", rest of the fixed piece
    being written), ("value", "") in a number, or ("string", the reason so far) in a reason."""
    literals, kinds = grammar.literals, grammar.kinds
    pos = 0
    for i, literal in enumerate(literals):
        n = min(len(literal), len(text) - pos)
        if text[pos:pos + n] != literal[:n]:
            return "bad", ""
        if n < len(literal):
            return "literal", literal[n:]
        pos += n
        if i == len(kinds):
            break
        end = pos
        if kinds[i] == "string":
            while end < len(text) and _is_text(text[end]):
                end += 1
            value = text[pos:end]
            if len(value) > MAX_REASON_CHARS or end < len(text) and not value:
                return "bad", ""
            if end == len(text):
                return "string", value
            pos = end
            continue
        while end < len(text) and text[end] in VALUE_CHARS:
            end += 1
        complete, prefixes = _values(kinds[i] == "nullable")
        value = text[pos:end]
        if end == len(text):
            return ("value", "") if value in prefixes else ("bad", "")
        if value not in complete:
            return "bad", ""
        pos = end
    return ("done", "") if pos == len(text) else ("bad", "")


class AnswerConstraint(LogitsProcessor):
    """Masks, row by row, every token that would take the answer out of the rubric's form; once the answer is whole,
    only an end-of-sequence token is allowed. `rubrics` holds each row's rubric; `prompt_length` is the (padded)
    length of the prompts, where the answers begin; `explain` asks for explain mode's form."""

    def __init__(self, tokenizer, rubrics: Sequence[Rubric], prompt_length: int, eos_token_ids: Sequence[int],
                 explain: bool = False):
        self.tokenizer = tokenizer
        by_fingerprint = {r.fingerprint: Grammar.of(r, explain) for r in rubrics}
        self.grammars = [by_fingerprint[r.fingerprint] for r in rubrics]
        self.prompt_length = prompt_length
        self.eos = sorted(set(eos_token_ids))
        values = set("0123456789.") | {"null"}
        # a value's first token may carry the space before it (byte-level BPE without a digit split fuses " 1")
        pieces = {p for g in by_fingerprint.values() for p in g.literals} | values | {" " + v for v in values}
        ids = {i for p in pieces for i in tokenizer.encode(p, add_special_tokens=False)}
        self.candidates = {i: tokenizer.decode([i]) for i in sorted(ids)}
        if explain:
            self.text_ids, self.text_lengths = text_tokens(tokenizer)

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        mask = torch.full_like(scores, float("-inf"))
        for row, ids in enumerate(input_ids[:, self.prompt_length:].tolist()):
            if any(i in self.eos for i in ids):  # finished: generate pads it, whatever is allowed
                mask[row] = 0
                continue
            mask[row, self.allowed(self.tokenizer.decode(ids), self.grammars[row])] = 0
        return scores + mask

    def allowed(self, text: str, grammar: Grammar) -> list[int] | torch.Tensor:
        where, rest = state(text, grammar)
        if where == "done":
            return self.eos
        if where == "string":  # more of the reason (what fits), or the quote that ends it
            closing = [i for i, piece in self.candidates.items()
                       if piece[:1] == '"' and state(text + piece, grammar)[0] != "bad"]
            more = self.text_ids[self.text_lengths <= MAX_REASON_CHARS - len(rest)]
            return torch.cat([more, torch.tensor(closing, dtype=torch.long)])
        first = set(rest[:1]) if where == "literal" else VALUE_CHARS | {",", "}"}  # a cheap filter before the check
        allowed = [i for i, piece in self.candidates.items()
                   if piece[:1] in first and state(text + piece, grammar)[0] != "bad"]
        if where == "literal":  # the fixed text's own first token always keeps the answer going
            allowed.append(self.tokenizer.encode(rest, add_special_tokens=False)[0])
        return allowed


def text_tokens(tokenizer) -> tuple[torch.Tensor, torch.Tensor]:
    """(ids, lengths in characters) of the tokens that may go inside a reason: not special, not empty, and only
    characters a JSON string holds unescaped. One pass over the vocabulary."""
    special = set(tokenizer.all_special_ids) | set(getattr(tokenizer, "added_tokens_decoder", {}))
    ids, lengths = [], []
    for i in range(len(tokenizer)):
        piece = "" if i in special else tokenizer.decode([i])
        if piece and all(_is_text(c) for c in piece):
            ids.append(i)
            lengths.append(len(piece))
    return torch.tensor(ids, dtype=torch.long), torch.tensor(lengths, dtype=torch.long)


# --- the pairwise answer: {"winner": "A" | "B", "reason": "<text without quotes, backslashes or control characters>"}

PAIR_PREFIX, PAIR_MIDDLE, PAIR_END = '{"winner": "', '", "reason": "', '"}'
CLOSE_RESERVE = 4  # tokens kept beyond the fixed text's: the quote and the brace may come as tokens of their own


def pair_state(text: str) -> tuple[str, str]:
    """Where `text` stands in the pairwise answer: ("bad", ""), ("done", ""), ("literal", the rest of the fixed piece
    being written), ("winner", "") or ("reason", "")."""
    def literal(piece: str, rest: str, then: Callable[[str], tuple[str, str]]) -> tuple[str, str]:
        if len(rest) < len(piece):
            return ("literal", piece[len(rest):]) if piece.startswith(rest) else ("bad", "")
        return then(rest[len(piece):]) if rest.startswith(piece) else ("bad", "")

    def winner(rest: str) -> tuple[str, str]:
        if not rest:
            return "winner", ""
        return literal(PAIR_MIDDLE, rest[1:], reason) if rest[0] in "AB" else ("bad", "")

    def reason(body: str) -> tuple[str, str]:
        quote = body.find('"')
        if any(c in REASON_FORBIDDEN for c in (body if quote < 0 else body[:quote])):
            return "bad", ""
        if quote < 0:
            return "reason", ""
        tail = body[quote:]
        return ("done", "") if tail == PAIR_END else ("literal", PAIR_END[len(tail):]) if PAIR_END.startswith(tail) \
            else ("bad", "")

    return literal(PAIR_PREFIX, text, winner)


@lru_cache(maxsize=4)
def _closing_tokens(tokenizer) -> tuple[tuple[int, str], ...]:
    """(id, text) of the tokens that begin with the quote closing the reason, from one pass over the vocabulary."""
    special = set(getattr(tokenizer, "all_special_ids", []))
    return tuple((i, piece) for i in range(len(tokenizer)) if i not in special
                 and (piece := tokenizer.decode([i])).startswith('"') and not (REASON_FORBIDDEN - {'"'}) & set(piece))


class PairAnswerConstraint(LogitsProcessor):
    """Keeps every row's answer in the pairwise form: the fixed text, then A or B, then an empty reason, then end of
    sequence — the form PAE is trained to give. A reason the decoding left free would be free text that the reader
    reads only where it can show it favours the winner (docs/reading.md), and a constrained run has no repair round:
    so the reason is closed at once (`budget`: the answer's token budget, checked to hold the form)."""

    def __init__(self, tokenizer, prompt_length: int, eos_token_ids: Sequence[int], budget: int):
        self.tokenizer, self.prompt_length = tokenizer, prompt_length
        self.eos = sorted(set(eos_token_ids))
        ids = {i for p in (PAIR_PREFIX, PAIR_MIDDLE, PAIR_END, "A", "B") for i in tokenizer.encode(p, add_special_tokens=False)}
        self.fixed = {i: tokenizer.decode([i]) for i in sorted(ids)}
        self.closing = _closing_tokens(tokenizer)
        self.quote = tokenizer.encode('"', add_special_tokens=False)[0]
        shortest = len(tokenizer.encode(PAIR_PREFIX + "A" + PAIR_MIDDLE + PAIR_END, add_special_tokens=False))
        if budget < shortest + CLOSE_RESERVE:
            raise ValueError(f"--max-new-tokens {budget} is too few for the pairwise answer: its fixed text alone takes "
                             f"{shortest} tokens; give at least {shortest + CLOSE_RESERVE}")

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        mask = torch.full_like(scores, float("-inf"))
        for row, ids in enumerate(input_ids[:, self.prompt_length:].tolist()):
            if any(i in self.eos for i in ids):
                mask[row] = 0
                continue
            text = self.tokenizer.decode(ids)
            where, rest = pair_state(text)
            if where == "done":
                mask[row, self.eos] = 0
            elif where == "reason":
                closing = [i for i, piece in self.closing if pair_state(text + piece)[0] != "bad"]
                mask[row, closing or [self.quote]] = 0
            else:  # a piece may reach the reason, but not write into it
                allowed = [i for i, piece in self.fixed.items() if (after := pair_state(text + piece)[0]) != "bad"
                           and (after != "reason" or (text + piece).endswith(PAIR_MIDDLE))]
                if where == "literal":
                    allowed.append(self.tokenizer.encode(rest, add_special_tokens=False)[0])
                mask[row, allowed] = 0
        return scores + mask
