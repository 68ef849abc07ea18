"""Recognizability without people (the paper's Phase 1): show a judge the image and four candidate poems — the one
it illustrates and three distractors (`tpb distractors`) — and ask for the letter of the right one. Chance is 25 %.

A judge may favour a position (always "A", say), so each image is asked several times with the candidates in
different orders: the four cyclic rotations (`orders="rotations"`, the default: each candidate once in each place)
or all 24 orders (`orders="all"`). The image's estimate is the share of orders answered right; a judge that always
answers one letter is right in exactly one rotation of four, 25 %, whatever the image. Where the backend gives
them, the letter probabilities are kept too (`evidence.p_correct`: the mean probability of the right letter over
the orders, and `evidence.candidate_probs`: each candidate's, position bias averaged out).

Three backends, one question (`prompt.build_recognize_messages`) and one reader (`reading.parse_letter`):

- transformers (`RecognizePAE`): PAE's base model (Qwen3-VL; an adapter too), one forward pass per question; the
  answer is the likeliest of the option letters at the first answer token, with their probabilities (so every answer
  is a letter, `readout: letter-logits`), and how much of the next-token probability the letters hold
  (`letter_mass`: low means the model wanted to say something else);
- vllm (`RecognizeVLLM`, needs a GPU): one token constrained to the letters, with their log-probabilities;
- api (`RecognizeAPI`, any OpenAI-compatible server): the answer as text, read by the parser; no probabilities.

Records are `tpb score`'s (`scores.recognizability` and `quality` = the share), resumable: the settings hold the
orders, the candidates' fingerprint and the parser version, so a resume with other candidates is refused.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import torch

from ...dataset.distractors import read_candidates
from ...models import DEFAULT_MAX_PIXELS, chat_inputs, fit_pixels
from ...poems import Poem
from ..prompt import LETTERS, build_recognize_messages, with_image_parts
from ..reading import VERSIONS, parse_letter
from .base import TRANSIENT, EvalResult, Evaluator, ScoringItem
from .pae import DEFAULT_MODEL, PAE
from .pae_vllm import MIN_CHUNK, PAEVLLM

ORDERS = ("rotations", "all")
N_CANDIDATES = 4
QUESTIONS_PER_FORWARD = 32  # questions (image × order) per forward pass on transformers
API_MAX_NEW_TOKENS = 16  # a letter, maybe in a short sentence


def order_set(name: str, n: int = N_CANDIDATES) -> list[tuple[int, ...]]:
    """The orders to ask in: each a tuple of candidate indices, position by position."""
    if name == "rotations":
        return [tuple((start + i) % n for i in range(n)) for start in range(n)]
    if name == "all":
        return list(itertools.permutations(range(n)))
    raise ValueError(f"unknown --orders {name!r} (known: {', '.join(ORDERS)})")


def candidates_fingerprint(candidates: Mapping[str, Sequence[Poem]]) -> str:
    """A digest of every poem's candidates (ids, titles, authors, texts, in order)."""
    canonical = json.dumps({pid: [[p.poem_id, p.title, p.author, p.text] for p in four]
                            for pid, four in sorted(candidates.items())}, ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:16]


def letter_probs(logprobs: Mapping[str, float], n: int = N_CANDIDATES) -> list[float] | None:
    """The option letters' probabilities, renormalised over the letters, from log-probabilities by token text
    (a letter missing from a top-k list counts as 0); None when no letter is there."""
    best: dict[str, float] = {}
    for token, logprob in logprobs.items():
        letter = token.strip()
        if letter in LETTERS[:n]:
            best[letter] = max(best.get(letter, float("-inf")), logprob)
    if not best:
        return None
    probs = torch.tensor([best.get(letter, float("-inf")) for letter in LETTERS[:n]]).softmax(0)
    return [round(float(p), 6) for p in probs]


@dataclass
class OrderAnswer:
    """The answer to one order of one image."""

    letter: str | None
    raw: str | None
    status: str  # ok | repaired | failed
    error: str | None = None
    kind: str | None = None  # model | transient for a failure to get an answer at all
    probs: list[float] | None = None  # by letter
    letter_mass: float | None = None
    usage: dict[str, int] | None = None


class Recognizer:
    """The question and the verdict, shared by the backends (mixed in before the backend's evaluator class)."""

    name = "recognize"
    uses_rubric = False
    letter_readout = "text"  # how the letter is read (settings["readout"])

    def _setup(self, candidates: str | Path | Mapping[str, Sequence[Poem]], orders: str) -> None:
        self.candidates_source = str(candidates) if isinstance(candidates, (str, Path)) else "in memory"
        self.candidates = read_candidates(candidates) if isinstance(candidates, (str, Path)) else dict(candidates)
        bad = [pid for pid, four in self.candidates.items()
               if len(four) != N_CANDIDATES or pid not in [p.poem_id for p in four]]
        if bad:
            raise ValueError(f"candidates of {bad[0]!r}: expected {N_CANDIDATES} poems including it")
        self.order_name, self.orders = orders, order_set(orders)
        self.fingerprint = candidates_fingerprint(self.candidates)

    def recognize_settings(self) -> dict[str, Any]:
        return {"orders": self.order_name, "candidates": self.fingerprint, "parser": VERSIONS["letter"],
                "readout": self.letter_readout}

    def candidates_for(self, item: ScoringItem) -> list[Poem]:
        four = self.candidates.get(item.poem.poem_id)
        if four is None:
            raise ValueError(f"poem {item.poem.poem_id!r} has no candidates in {self.candidates_source}")
        return list(four)

    def questions(self, item: ScoringItem) -> list[list[dict]]:
        """The item's messages, one per order."""
        four = self.candidates_for(item)
        image = fit_pixels(item.image, self.max_pixels)
        return [build_recognize_messages([four[k] for k in order], image) for order in self.orders]

    def verdict(self, item: ScoringItem, answers: Sequence[OrderAnswer]) -> EvalResult:
        """One record from the item's answers, order by order (see the module's docstring)."""
        ids = [p.poem_id for p in self.candidates_for(item)]
        right = ids.index(item.poem.poem_id)
        raw = json.dumps([a.raw for a in answers], ensure_ascii=False)
        usage = _summed([a.usage for a in answers])
        failed = next((a for a in answers if a.kind in ("model", TRANSIENT)), None)
        if failed is not None:  # not the judge's answer but no answer: the whole image is tried again
            result = self.result(item, {}, None, raw, "failed", failed.error, kind=failed.kind)
            result.usage = usage
            return result
        chosen = [None if a.letter is None else order[LETTERS.index(a.letter)] for a, order in zip(answers, self.orders)]
        correct = [None if c is None else c == right for c in chosen]
        answered = [c for c in correct if c is not None]
        evidence: dict[str, Any] = {
            "candidates": ids, "answer": item.poem.poem_id, "orders": [list(o) for o in self.orders],
            "letters": [a.letter for a in answers], "chosen": [None if c is None else ids[c] for c in chosen],
            "correct": correct,
        }
        if all(a.probs is not None for a in answers):
            per_candidate = [[a.probs[order.index(k)] for k in range(N_CANDIDATES)] for a, order in zip(answers, self.orders)]
            evidence["letter_probs"] = [a.probs for a in answers]
            evidence["candidate_probs"] = [round(sum(p[k] for p in per_candidate) / len(per_candidate), 6)
                                           for k in range(N_CANDIDATES)]
            evidence["p_correct"] = evidence["candidate_probs"][right]
        if any(a.letter_mass is not None for a in answers):
            evidence["letter_mass"] = [a.letter_mass for a in answers]
        notes = [f"order {i + 1}: {a.error}" for i, a in enumerate(answers) if a.error]
        if not answered:
            result = self.result(item, {}, None, raw, "failed", "; ".join(notes) or "no answer")
        else:
            share = round(sum(answered) / len(answered), 6)
            status = "ok" if all(a.status == "ok" for a in answers) else "repaired"
            result = self.result(item, {"recognizability": share}, share, raw, status, "; ".join(notes) or None)
        result.evidence, result.usage = evidence, usage
        return result


def _summed(usages: Sequence[dict[str, int] | None]) -> dict[str, int] | None:
    present = [u for u in usages if u]
    return {k: sum(u.get(k, 0) for u in present) for k in ("prompt_tokens", "completion_tokens")} if present else None


def letter_token_ids(tokenizer, n: int = N_CANDIDATES) -> list[int]:
    """The token id of each option letter, as the answer's first token; a tokenizer without single-token letters is
    refused (the readout would be ambiguous)."""
    ids = []
    for letter in LETTERS[:n]:
        encoded = tokenizer.encode(letter, add_special_tokens=False)
        if len(encoded) != 1:
            raise ValueError(f"the tokenizer splits the option letter {letter!r} into {len(encoded)} tokens: the "
                             "letter readout needs one token per letter")
        ids.append(encoded[0])
    return ids


class RecognizePAE(Recognizer, PAE):
    """The recognizability question on transformers (see the module's docstring)."""

    letter_readout = "letter-logits"  # how the letter is read (settings["readout"])

    def __init__(self, candidates: str | Path | Mapping[str, Sequence[Poem]], model: str = DEFAULT_MODEL,
                 orders: str = "rotations", adapter: str | None = None, device: str | None = None,
                 max_pixels: int = DEFAULT_MAX_PIXELS, questions_per_forward: int = QUESTIONS_PER_FORWARD):
        self._setup(candidates, orders)
        PAE.__init__(self, model=model, adapter=adapter, device=device, max_pixels=max_pixels)
        self.letter_ids = letter_token_ids(self.processor.tokenizer)
        self.questions_per_forward = questions_per_forward

    def settings(self) -> dict[str, Any]:
        return {"backend": self.backend, "max_pixels": self.max_pixels, **self.recognize_settings()}

    def _prepare(self, items: Sequence[ScoringItem]) -> list:
        conversations = [q for it in items for q in self.questions(it)]
        step = self.questions_per_forward
        return [chat_inputs(self.processor, conversations[i:i + step]) for i in range(0, len(conversations), step)]

    def _run(self, inputs: list, items: Sequence[ScoringItem]) -> list[EvalResult]:
        probs, mass = [], []
        with torch.inference_mode():
            for chunk in inputs:
                chunk = chunk.to(self.device, non_blocking=True)
                # Left padding: the last position is every row's last prompt token; its logits give the answer's first.
                logits = self.model(**chunk, logits_to_keep=1).logits[:, -1, :].float()
                letters = logits.softmax(-1)[:, self.letter_ids]
                mass += letters.sum(-1).tolist()
                probs += (letters / letters.sum(-1, keepdim=True)).tolist()
        n = len(self.orders)
        letters = [LETTERS[max(range(N_CANDIDATES), key=p.__getitem__)] for p in probs]
        answers = [OrderAnswer(letter=letter, raw=letter, status="ok", probs=[round(x, 6) for x in p],
                               letter_mass=round(m, 6)) for letter, p, m in zip(letters, probs, mass)]
        return [self.verdict(it, answers[i * n:(i + 1) * n]) for i, it in enumerate(items)]


def vllm_sampling_kwargs(n: int = N_CANDIDATES, top_logprobs: int = 20) -> dict:
    """Arguments of `vllm.SamplingParams`: one greedy token, constrained to the option letters, with log-probabilities."""
    return dict(temperature=0.0, max_tokens=1, logprobs=top_logprobs, structured_outputs={"choice": list(LETTERS[:n])})


class RecognizeVLLM(Recognizer, PAEVLLM):
    """The recognizability question on vLLM (extra `vllm`, a GPU): written, exercised only on a GPU machine."""

    backend = "vllm"
    letter_readout = "letter-logprobs"  # how the letter is read (settings["readout"])
    _model_attributes = ("llm",)
    worker_start_method = "spawn"

    def __init__(self, candidates: str | Path | Mapping[str, Sequence[Poem]], model: str = DEFAULT_MODEL,
                 orders: str = "rotations", adapter: str | None = None, max_pixels: int = DEFAULT_MAX_PIXELS,
                 max_num_seqs: int = 64):
        self._setup(candidates, orders)
        PAEVLLM.__init__(self, model=model, adapter=adapter, max_pixels=max_pixels, max_new_tokens=1,
                         max_num_seqs=max_num_seqs)
        self.min_batch_size = max(1, MIN_CHUNK // len(self.orders))

    def settings(self) -> dict[str, Any]:
        return {"backend": self.backend, "max_pixels": self.max_pixels, **self.recognize_settings()}

    def _prepare(self, items: Sequence[ScoringItem]) -> list[list[dict]]:
        return [with_image_parts(q, lambda image: {"type": "image_pil", "image_pil": image})
                for it in items for q in self.questions(it)]

    def _run(self, inputs: list[list[dict]], items: Sequence[ScoringItem]) -> list[EvalResult]:
        from vllm import SamplingParams
        from vllm.sampling_params import StructuredOutputsParams

        kwargs = vllm_sampling_kwargs()
        kwargs["structured_outputs"] = StructuredOutputsParams(**kwargs["structured_outputs"])
        outputs = self.llm.chat(inputs, sampling_params=SamplingParams(**kwargs), lora_request=self.lora, use_tqdm=False)
        answers = []
        for out in outputs:
            text = out.outputs[0].text
            parsed = parse_letter(text)
            first = (out.outputs[0].logprobs or [{}])[0]
            probs = letter_probs({lp.decoded_token: lp.logprob for lp in first.values() if lp.decoded_token})
            answers.append(OrderAnswer(parsed.letter, text, parsed.status, parsed.error, probs=probs))
        n = len(self.orders)
        return [self.verdict(it, answers[i * n:(i + 1) * n]) for i, it in enumerate(items)]


def _api_class():
    from .api import APIJudge, run_coroutine, wire_messages

    class RecognizeAPI(Recognizer, APIJudge):
        """The recognizability question to a served model: the api evaluator's client, retries and records, one
        request per order; no response format (the answer is a letter, read by the parser)."""

        def __init__(self, candidates, model: str, orders: str = "rotations",
                     max_new_tokens: int = API_MAX_NEW_TOKENS, **kwargs):
            self._setup(candidates, orders)
            kwargs.setdefault("repair", 0)  # the repair round asks for the rubric's JSON object; the answer is a letter
            APIJudge.__init__(self, model, structured=False, max_new_tokens=max_new_tokens, **kwargs)
            self.min_batch_size = max(1, self.min_batch_size // len(self.orders))

        def settings(self) -> dict[str, Any]:
            return {**APIJudge.settings(self), **self.recognize_settings()}

        def _prepare(self, items: Sequence[ScoringItem]) -> list[list[dict]]:
            return [wire_messages(q) for it in items for q in self.questions(it)]

        def answer_result(self, item: ScoringItem, answer: str) -> EvalResult:
            parsed = parse_letter(answer)
            result = self.result(item, {}, None, answer, parsed.status, parsed.error)
            result.evidence = {"letter": parsed.letter}
            return result

        def _run(self, inputs: list[list[dict]], items: Sequence[ScoringItem]) -> list[EvalResult]:
            n = len(self.orders)
            asked = [ScoringItem(f"{it.image_id}#{k}", it.image, it.poem) for it in items for k in range(n)]
            results = run_coroutine(self._judge(inputs, asked))
            verdicts = []
            for i, it in enumerate(items):
                mine = results[i * n:(i + 1) * n]
                answers = [OrderAnswer((r.evidence or {}).get("letter"), r.raw_output, r.parse_status, r.error,
                                       kind=r.error_kind if r.error_kind in ("model", TRANSIENT) else None,
                                       usage=r.usage) for r in mine]
                verdict = self.verdict(it, answers)
                for key in ("served_model", "response_format"):
                    if key in mine[0].settings:
                        verdict.settings[key] = mine[0].settings[key]
                verdicts.append(verdict)
            return verdicts

    return RecognizeAPI


def load_recognizer(candidates: str | Path | Mapping[str, Sequence[Poem]] | None, model: str | None = None,
                    orders: str = "rotations", backend: str = "transformers", adapter: str | None = None,
                    **kwargs) -> Evaluator:
    """The recognize evaluator: served (`base_url` given) or on `backend` transformers or vllm."""
    if candidates is None:
        raise ValueError("the recognize evaluator needs --candidates FILE (make one with `tpb distractors POEMS "
                         "--out FILE`)")
    order_set(orders)
    if kwargs.get("constrained"):
        raise ValueError("--constrained applies to pae only: recognize always reads one letter")
    kwargs.pop("constrained", None)
    api_options = {k: kwargs.pop(k) for k in ("base_url", "api_key_env", "concurrency", "timeout", "retries",
                                              "backoff") if kwargs.get(k) is not None}
    if api_options.get("base_url"):
        if adapter:
            raise ValueError("--adapter does not apply to a served model: serve the adapter and name it in --model")
        kwargs.pop("device", None)
        return _api_class()(candidates, model=model, orders=orders, **api_options,
                            **{k: v for k, v in kwargs.items() if k in ("max_pixels", "max_new_tokens")})
    if api_options:
        raise ValueError(f"--{next(iter(api_options)).replace('_', '-')} applies to a served judge: give --base-url")
    model_kw = {"model": model} if model else {}
    if backend == "vllm":
        return RecognizeVLLM(candidates, orders=orders, adapter=adapter, **model_kw,
                             **{k: v for k, v in kwargs.items() if k == "max_pixels"})
    return RecognizePAE(candidates, orders=orders, adapter=adapter, **model_kw,
                        **{k: v for k, v in kwargs.items() if k in ("device", "max_pixels")})
