"""The probability readout (`--readout expected`): PAE's scores read from its probabilities, not decoded.

The answer is the trained JSON form (`prompt.format_answer`: every key in rubric order, each value one of the
dimension's anchors, `null` where the dimension can be excluded). For each dimension in turn the model sees the
prompt and the answer so far, and every anchor of the dimension is scored at the value's place: the probability of
the anchor's tokens (a multi-token anchor such as `0.67` is the product of its tokens' probabilities), normalised
over the anchors. From that distribution come

- the expected score: the probability-weighted mean of the anchors' scores (`null` left out and the rest
  renormalised); a dimension whose most likely anchor is `null` is excluded (score None), as a decoded `null` is;
- the confidence: 1 − the distribution's entropy / log(number of anchors), in [0, 1];
- the answer text: every dimension at its most likely anchor, which is what the next dimension is conditioned on.

Quality is the mean of the expected scores (`reading.answer_quality`); its confidence is the mean of the
confidences of the dimensions in it, and `quality_sd` the standard deviation of that mean with the dimensions taken
as independent. Nothing is sampled and nothing is parsed, so the readout is deterministic and cannot fail to parse.

Forward passes (transformers): one prefill over prompt and image, then one cached step per dimension. A step feeds
one row per image: the fixed text since the last value and every anchor's tokens as a tree (a node per distinct
token prefix, so `0.67` and `0.33` share their `0` and `.`), under a 4-D attention mask by which a node sees the
prompt, the chosen answer so far and its own ancestors only. The most likely anchor's nodes stay visible to later
steps; the other branches stay in the cache, masked. Ten dimensions are eleven forward passes of about 16 tokens
per image, against one pass per answer token (about 90) for decoding, and the prompt's cache is never copied. The
backend-free parts (anchors, distributions, summaries) serve the vLLM backend and the `api` judge too.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

import torch

from .constrained import Grammar
from .reading import answer_quality
from .prompt import format_value
from ..rubric import Rubric

@dataclass(frozen=True)
class Anchor:
    text: str  # as it stands in the answer: "1.0", "0.67", "null"
    score: float | None  # None: the dimension is excluded


def anchors(rubric: Rubric, key: str) -> tuple[Anchor, ...]:
    """The values the trained answer can hold for a dimension: its distinct scores, best first, then null where it
    can be excluded."""
    dim = rubric.dimension(key)
    found = tuple(Anchor(format_value(s), s) for s in dim.scores)
    return found + ((Anchor(format_value(None), None),) if any(o.excluded for o in dim.options) else ())


@dataclass
class DimensionReadout:
    distribution: dict[str, float]  # anchor text → probability, summing to 1
    expected: float | None
    confidence: float
    variance: float
    best: str  # the most likely anchor's text


def summarize(anchor_set: Sequence[Anchor], logps: Sequence[float]) -> DimensionReadout:
    """A dimension's readout from its anchors' log-probabilities (unnormalised). Ties go to the first anchor."""
    top = max(logps)
    weights = [math.exp(lp - top) for lp in logps]
    total = sum(weights)
    probs = [w / total for w in weights]
    best = max(range(len(probs)), key=lambda i: (probs[i], -i))
    entropy = -sum(p * math.log(p) for p in probs if p > 0)
    confidence = 1.0 if len(probs) == 1 else min(1.0, max(0.0, 1.0 - entropy / math.log(len(probs))))
    scored = [(p, a.score) for p, a in zip(probs, anchor_set) if a.score is not None]
    mass = sum(p for p, _ in scored)
    expected = variance = None
    if anchor_set[best].score is not None and mass > 0:
        expected = sum(p * s for p, s in scored) / mass
        variance = sum(p * (s - expected) ** 2 for p, s in scored) / mass
    return DimensionReadout({a.text: p for a, p in zip(anchor_set, probs)}, expected, confidence, variance or 0.0,
                            anchor_set[best].text)


@dataclass
class Readout:
    """One image's readout under one rubric."""

    dimensions: dict[str, DimensionReadout]
    rubric: Rubric

    @property
    def scores(self) -> dict[str, float | None]:
        return {k: None if d.expected is None else round(d.expected, 6) for k, d in self.dimensions.items()}

    @property
    def quality(self) -> float | None:
        return answer_quality(self.scores, self.rubric)

    def counted(self) -> list[DimensionReadout]:
        return [d for d in self.dimensions.values() if d.expected is not None]

    @property
    def quality_confidence(self) -> float | None:
        counted = self.counted()
        return None if self.quality is None else sum(d.confidence for d in counted) / len(counted)

    @property
    def quality_sd(self) -> float | None:
        counted = self.counted()
        return None if self.quality is None else math.sqrt(sum(d.variance for d in counted)) / len(counted)

    @property
    def answer(self) -> str:
        """The answer at every dimension's most likely anchor, in the trained form."""
        return answer_text(self.rubric, [d.best for d in self.dimensions.values()])

    def to_json(self) -> dict[str, Any]:
        """What a result record keeps (`EvalResult.readout`)."""
        return {"dimensions": {k: {"distribution": {a: round(p, 6) for a, p in d.distribution.items()},
                                   "confidence": round(d.confidence, 6)} for k, d in self.dimensions.items()},
                "quality_confidence": _round(self.quality_confidence), "quality_sd": _round(self.quality_sd)}


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 6)


def answer_text(rubric: Rubric, values: Sequence[str]) -> str:
    """The answer's text with the first len(values) values filled in, cut just after the last of them (the whole
    answer, closing brace included, once every value is there)."""
    literals = Grammar.of(rubric).literals
    text = "".join(lit + v for lit, v in zip(literals, values))
    return text + literals[-1] if len(values) == len(rubric.keys) else text


def prefix_text(rubric: Rubric, values: Sequence[str]) -> str:
    """The answer's text up to the place of value number len(values) (its fixed text included)."""
    return answer_text(rubric, values) + Grammar.of(rubric).literals[len(values)]


# --- transformers ----------------------------------------------------------------------------------------------


def _common_prefix(seqs: Sequence[Sequence[int]]) -> int:
    n = 0
    while all(len(s) > n for s in seqs) and len({s[n] for s in seqs}) == 1:
        n += 1
    return n


def _rope_index(model):
    """Qwen3-VL's multimodal position builder (found through a peft wrapper too)."""
    for module in model.modules():
        if hasattr(module, "get_rope_index"):
            return module.get_rope_index
    raise TypeError(f"{type(model).__name__} has no get_rope_index: the readout needs a Qwen3-VL model")


@dataclass
class _Tree:
    """One image's step: every anchor's tokens after the answer so far, as a tree with a node per distinct token
    prefix (anchors that share a beginning share its nodes)."""

    tokens: list[int]
    parents: list[int]  # a node's parent's index, -1 for a child of the answer so far
    depths: list[int]  # a node's distance from the answer so far: 0 for its children
    paths: list[list[int]]  # per anchor: its nodes, in order
    own_from: int  # the place in a path from which its tokens are the anchor's own (not shared by every anchor)

    @classmethod
    def of(cls, sequences: Sequence[Sequence[int]], fed: int) -> "_Tree":
        shared = max(_common_prefix(sequences), fed)
        tokens, parents, depths, paths, index = [], [], [], [], {}
        for seq in sequences:
            path, parent = [], -1
            for depth in range(len(seq) - fed):
                key = tuple(seq[fed:fed + depth + 1])
                if key not in index:
                    index[key] = len(tokens)
                    tokens.append(seq[fed + depth])
                    parents.append(parent)
                    depths.append(depth)
                parent = index[key]
                path.append(parent)
            paths.append(path)
        return cls(tokens, parents, depths, paths, shared - fed)

    def sees(self, node: int) -> set[int]:
        """The node and its ancestors: what its attention may look at in the step."""
        seen = set()
        while node >= 0:
            seen.add(node)
            node = self.parents[node]
        return seen


@torch.inference_mode()
def read_batch(model, tokenizer, inputs, rubric: Rubric) -> list[Readout]:
    """The readout of a batch of prepared, left-padded inputs (`models.chat_inputs`), all under one rubric: one
    prefill, then one step per dimension (see the module's docstring)."""
    device = next(model.parameters()).device
    dtype = next(model.parameters()).dtype
    inputs = inputs.to(device)
    positions, _ = _rope_index(model)(inputs["input_ids"], mm_token_type_ids=inputs.get("mm_token_type_ids"),
                                      image_grid_thw=inputs.get("image_grid_thw"),
                                      attention_mask=inputs["attention_mask"])
    out = model(**inputs, position_ids=positions, use_cache=True, logits_to_keep=1)
    cache, last = out.cache, out.logits[:, -1].float()
    batch = last.shape[0]
    visible = inputs["attention_mask"].bool()  # per row, the cache's entries the chosen answer sees
    next_pos = positions.amax(dim=(0, 2)) + 1  # per row: the position of the answer's next token
    fed: list[list[int]] = [[] for _ in range(batch)]  # the chosen answer's tokens, per row
    chosen: list[list[str]] = [[] for _ in range(batch)]
    found: list[dict[str, DimensionReadout]] = [{} for _ in range(batch)]
    for key in rubric.keys:
        anchor_set = anchors(rubric, key)
        trees = []
        for b in range(batch):
            full = [tokenizer.encode(prefix_text(rubric, chosen[b]) + a.text, add_special_tokens=False)
                    for a in anchor_set]
            if any(seq[:len(fed[b])] != fed[b] for seq in full):
                raise ValueError(f"the tokenizer splits the answer differently once {key}'s value follows: the "
                                 "readout needs value boundaries that are token boundaries")
            trees.append(_Tree.of(full, len(fed[b])))
        width = max(len(t.tokens) for t in trees)
        ids = torch.full((batch, width), tokenizer.pad_token_id, dtype=torch.long)
        depth = torch.zeros((batch, width), dtype=torch.long)
        parent = torch.zeros((batch, width), dtype=torch.long)  # where a node's logits are: 0 the answer so far's
        within = torch.eye(width, dtype=torch.bool).repeat(batch, 1, 1)  # padding sees itself only
        for b, tree in enumerate(trees):
            n = len(tree.tokens)
            ids[b, :n] = torch.tensor(tree.tokens)
            depth[b, :n] = torch.tensor(tree.depths)
            parent[b, :n] = torch.tensor(tree.parents) + 1
            for i in range(n):
                within[b, i, list(tree.sees(i))] = True
        ids, depth, parent, within = ids.to(device), depth.to(device), parent.to(device), within.to(device)
        sees = torch.cat([visible[:, None, :].expand(-1, width, -1), within], 2)
        mask = torch.zeros(sees.shape, dtype=dtype, device=device).masked_fill_(~sees, torch.finfo(dtype).min)
        step_pos = (next_pos[:, None] + depth).expand(3, -1, -1)
        step = model(input_ids=ids, attention_mask=mask[:, None], position_ids=step_pos, cache=cache, use_cache=True)
        logits = torch.log_softmax(torch.cat([last[:, None], step.logits.float()], 1), -1)
        rows = torch.arange(batch, device=device)[:, None]
        node_logps = logits[rows, parent, ids].tolist()  # per row and node: its token's log-probability after its parent
        kept = torch.zeros((batch, width), dtype=torch.bool, device=device)
        for b, tree in enumerate(trees):
            logps = [sum(node_logps[b][n] for n in path[tree.own_from:]) for path in tree.paths]
            readout = summarize(anchor_set, logps)
            found[b][key] = readout
            path = tree.paths[next(i for i, x in enumerate(anchor_set) if x.text == readout.best)]
            kept[b, path] = True
            fed[b] = fed[b] + [tree.tokens[n] for n in path]
            chosen[b].append(readout.best)
            last[b] = step.logits[b, path[-1]].float()
            next_pos[b] += len(path)
        visible = torch.cat([visible, kept], 1)
    return [Readout(f, rubric) for f in found]


# --- a server's logprobs (the api judge) -----------------------------------------------------------------------

Token = tuple[str, float, Sequence[tuple[str, float]]]  # (token, its logprob, the top alternatives at its place)


def _walk(tokens: Sequence[Token], j: int, rest: str) -> tuple[float, tuple | None]:
    """The log-probability of the text `rest` from token `j` on, following the answer's tokens while they spell it
    and an alternative from the top logprobs where it leaves them: (logprob, None) when it was spelt to its end,
    (logprob so far, the branch it left by) when it left the answer before its end (what follows is unknown), and
    (-inf, None) when no token in the top logprobs spells it on."""
    logp = 0.0
    while rest:
        if j >= len(tokens):
            return -math.inf, None
        token, token_logp, top = tokens[j]

        def spells(t: str) -> bool:  # t continues rest, or ends it with a character no value holds
            return bool(t) and (rest.startswith(t) or (t.startswith(rest) and t[len(rest):][:1] not in "0123456789.nul"))

        if spells(token):
            logp, rest, j = logp + token_logp, rest[len(token):], j + 1
            continue
        alternatives = [(t, lp) for t, lp in top if t != token and spells(t)]
        if not alternatives:
            return -math.inf, None
        t, lp = max(alternatives, key=lambda a: len(a[0]))
        rest = rest[len(t):]
        return (logp + lp, None) if not rest else (logp + lp, (j, t))
    return logp, None


def read_logprobs(tokens: Sequence[Token], rubric: Rubric) -> Readout | None:
    """The readout from a served answer's logprobs (OpenAI's `logprobs` with `top_logprobs`). Exact where the
    answer's own tokens and the alternatives at their places spell an anchor; an anchor that leaves the answer
    before its end gets an equal share of the probability of the branch it left by (the server says nothing about
    what lies beyond). None where the answer does not hold every key or no anchor of a dimension is in the top
    logprobs."""
    import re

    text = "".join(t for t, _, _ in tokens)
    starts = [0]
    for t, _, _ in tokens:
        starts.append(starts[-1] + len(t))
    found = {}
    for key in rubric.keys:
        place = re.search(r'"%s"\s*:\s*' % re.escape(key), text)
        if place is None:
            return None
        j = next(i for i in range(len(tokens)) if starts[i + 1] > place.end()) if place.end() < len(text) else None
        if j is None:
            return None
        anchor_set = anchors(rubric, key)
        walked = [_walk(tokens, j, text[starts[j]:place.end()] + a.text) for a in anchor_set]
        shares: dict[tuple, int] = {}
        for _, branch in walked:
            if branch is not None:
                shares[branch] = shares.get(branch, 0) + 1
        logps = [lp - (math.log(shares[branch]) if branch is not None else 0.0) for lp, branch in walked]
        if all(lp == -math.inf for lp in logps):
            return None
        found[key] = summarize(anchor_set, logps)
    return Readout(found, rubric)


def logprob_tokens(choice_logprobs) -> list[Token]:
    """(token, logprob, top alternatives) from a chat completion choice's `logprobs` (objects or dicts)."""
    get = (lambda o, k: o[k]) if isinstance(choice_logprobs, dict) else getattr
    return [(get(t, "token"), float(get(t, "logprob")),
             [(get(a, "token"), float(get(a, "logprob"))) for a in (get(t, "top_logprobs") or [])])
            for t in (get(choice_logprobs, "content") or [])]


# --- vLLM (written for a GPU; not run in the tests) ------------------------------------------------------------


def vllm_read(llm, tokenizer, prompts: Sequence[tuple[str, Any]], rubric: Rubric, lora=None) -> list[Readout]:
    """The readout on vLLM for (chat prompt text, PIL image) pairs under one rubric: one `LLM.generate` per
    dimension over every image × anchor, each request the prompt, the answer so far and the anchor, scored by
    `prompt_logprobs` (the prompt's shared prefix comes from the prefix cache). vLLM is imported here only."""
    from vllm import SamplingParams

    params = SamplingParams(max_tokens=1, temperature=0.0, prompt_logprobs=0)
    chosen: list[list[str]] = [[] for _ in prompts]
    found: list[dict[str, DimensionReadout]] = [{} for _ in prompts]
    for key in rubric.keys:
        anchor_set = anchors(rubric, key)
        requests, owns = [], []
        for b, (text, image) in enumerate(prompts):
            full = [tokenizer.encode(prefix_text(rubric, chosen[b]) + a.text, add_special_tokens=False)
                    for a in anchor_set]
            shared = _common_prefix(full)
            for a, seq in zip(anchor_set, full):
                requests.append({"prompt": text + prefix_text(rubric, chosen[b]) + a.text,
                                 "multi_modal_data": {"image": image}})
                owns.append(len(seq) - shared)
        outputs = llm.generate(requests, sampling_params=params, lora_request=lora, use_tqdm=False)
        for b in range(len(prompts)):
            logps = []
            for a in range(len(anchor_set)):
                out, own = outputs[b * len(anchor_set) + a], owns[b * len(anchor_set) + a]
                ids = out.prompt_token_ids[len(out.prompt_token_ids) - own:]
                steps = out.prompt_logprobs[len(out.prompt_token_ids) - own:]
                logps.append(sum(step[i].logprob for i, step in zip(ids, steps)))
            found[b][key] = summarize(anchor_set, logps)
            chosen[b].append(found[b][key].best)
    return [Readout(f, rubric) for f in found]
