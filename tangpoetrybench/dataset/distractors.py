"""Phase-1 distractors: for each poem, three other poems of the same corpus that look like it, so that picking the
poem an image illustrates out of four (chance 25 %) tests the image rather than the reader's luck.

    >>> sets = choose_distractors(poems, seed=0)              # one CandidateSet per poem
    >>> sets[0].phase1_candidates                             # "id|id|id|id", a ratings.csv phase1_candidates cell
    >>> write_candidates(sets, poems, "candidates.jsonl")

Similarity is the cosine of character n-gram TF-IDF vectors of the poems' Han characters (n = 1 and 2 by default,
sublinear term frequency, smoothed idf), or of mean-pooled hidden states of a text model a user names
(`embedding_similarity`). A poem is never its own distractor, nor is a poem with the same text or a near-duplicate
(TF-IDF similarity ≥ `NEAR_DUPLICATE`, two versions of one poem) ever in its set.

Two methods (`method`):

- `groups` (the default): the poems of each pool (a tradition, or a tradition's form with `same_form`) are split into
  groups of four mutually similar poems, most similar first, and each poem's distractors are the other three of its
  group. Every member of a group has the same four candidates, so anything computed from the four texts alone picks
  the right one for exactly one member in four: no text-only reader can beat chance on grouped poems. Poems a pool
  cannot group (fewer than four left) go on to the next wider pool (form → tradition → corpus); the last few (fewer
  than four in the whole corpus) get their nearest neighbours (`pool` "leftover").
- `neighbours`: each poem's three nearest poems, one at a time, each among the `top_k` most like every candidate
  chosen so far. The answer is then the centre of its set, which a reader can spot from the texts alone: on the Three
  Hundred Tang Poems and the Song Ci sample, a surface classifier picks it 47 % of the time (see
  `text_baselines`). Kept to measure that.

Draws (which of the `top_k` best groups comes next, which neighbour) come from the seed; the four are shown in an
order drawn from the seed and the poem's id. The same poems, settings and seed give the same sets.
"""

from __future__ import annotations

import json
import math
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
from scipy import sparse, stats

from ..errors import DataError, Problem
from ..files import write_file
from ..numeric import counted
from ..poems import Poem, han_count, is_han
from ..rubric import DEFAULT_TRADITION

N_DISTRACTORS = 3
DEFAULT_NGRAMS = (1, 2)
DEFAULT_TOP_K = 3
NEAR_DUPLICATE = 0.8  # poems at least this similar are two versions of one poem: never in one set
METHODS = ("groups", "neighbours")
RANKS = ("nearest", "second", "third")
POOLS = ("form", "tradition", "corpus", "leftover")  # narrowest first


@dataclass(frozen=True)
class Distractor:
    poem_id: str
    similarity: float  # to the poem


@dataclass(frozen=True)
class CandidateSet:
    """A poem's four Phase-1 candidates in the order shown, and how its distractors were chosen."""

    poem_id: str
    candidates: tuple[str, ...]  # the poem and its distractors, in a seeded order
    distractors: tuple[Distractor, ...]
    pool: str  # form | tradition | corpus: the pool the distractors come from; leftover: not grouped

    @property
    def phase1_candidates(self) -> str:
        """The candidates as a raw release's ratings.csv cell."""
        return "|".join(self.candidates)

    @property
    def answer_index(self) -> int:
        return self.candidates.index(self.poem_id)


# --- similarity --------------------------------------------------------------------------------------------------

def han_text(poem: Poem) -> str:
    """The poem's Han characters, lines joined by a space (no n-gram spans two lines)."""
    return " ".join("".join(c for c in line if is_han(c)) for line in poem.lines)


def char_ngrams(text: str, ngrams: Sequence[int] = DEFAULT_NGRAMS) -> list[str]:
    return [chunk[i:i + n] for chunk in text.split() for n in ngrams for i in range(len(chunk) - n + 1)]


def tfidf_similarity(texts: Sequence[str], ngrams: Sequence[int] = DEFAULT_NGRAMS) -> np.ndarray:
    """Cosine similarities (n × n) of character n-gram TF-IDF vectors: tf = 1 + log(count), idf = log((1 + n) /
    (1 + df)) + 1, rows L2-normalised."""
    grams = [char_ngrams(t, ngrams) for t in texts]
    vocab = {g: j for j, g in enumerate(sorted({g for gs in grams for g in gs}))}
    rows, cols, vals = [], [], []
    for i, gs in enumerate(grams):
        counts: dict[int, int] = {}
        for g in gs:
            counts[vocab[g]] = counts.get(vocab[g], 0) + 1
        for j, c in sorted(counts.items()):
            rows.append(i)
            cols.append(j)
            vals.append(1.0 + math.log(c))
    tf = sparse.csr_matrix((vals, (rows, cols)), shape=(len(texts), len(vocab)), dtype=np.float64)
    df = np.bincount(tf.indices, minlength=len(vocab))
    x = tf @ sparse.diags(np.log((1 + len(texts)) / (1 + df)) + 1.0)
    norms = np.sqrt(np.asarray(x.multiply(x).sum(axis=1)).ravel())
    x = sparse.diags(1.0 / np.where(norms > 0, norms, 1.0)) @ x
    return np.asarray((x @ x.T).todense())


def embedding_similarity(texts: Sequence[str], model: str, batch_size: int = 32, device: str | None = None) -> np.ndarray:
    """Cosine similarities of a text model's mean-pooled last hidden states (`transformers.AutoModel`; a Hub id or a
    local folder, safetensors, no remote code)."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    if str(model).startswith(("/", ".", "~")) and not Path(model).expanduser().exists():
        raise FileNotFoundError(f"no embedding model folder {model}")
    tokenizer = AutoTokenizer.from_pretrained(model)
    net = AutoModel.from_pretrained(model).to(device or "cpu").eval()
    vectors = []
    with torch.inference_mode():
        for start in range(0, len(texts), batch_size):
            batch = tokenizer(list(texts[start:start + batch_size]), padding=True, truncation=True, return_tensors="pt")
            batch = batch.to(net.device)
            hidden = net(**batch).last_hidden_state
            mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            vectors.append(((hidden * mask).sum(1) / mask.sum(1).clamp(min=1)).float().cpu().numpy())
    v = np.concatenate(vectors)
    v /= np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)
    return v @ v.T


# --- choosing ----------------------------------------------------------------------------------------------------

def poem_rng(seed: int, poem_id: str) -> np.random.Generator:
    """A generator for one poem: the same seed and poem give the same draws, whatever else is in the corpus."""
    return np.random.default_rng([seed, zlib.crc32(poem_id.encode("utf-8"))])


def _keys(poem: Poem, same_form: bool) -> list[tuple[str, tuple]]:
    """The pools a poem belongs to, narrowest first, each named and keyed."""
    keys = [("tradition", (poem.tradition,)), ("corpus", ())]
    if same_form and poem.form:
        keys.insert(0, ("form", (poem.tradition, poem.form)))
    return keys


def _pairable(sim: np.ndarray, texts: Sequence[str], near_duplicate: float) -> np.ndarray:
    """Which poems may stand in one candidate set: not the same poem, not the same text, not near-duplicates."""
    same = np.array([[a == b for b in texts] for a in texts])
    return ~same & (sim < near_duplicate)


def _grow(sim: np.ndarray, ok: np.ndarray, start: int, pool: list[int], rng: np.random.Generator,
          top_k: int) -> list[int] | None:
    """Three poems of `pool` for `start`, one at a time, each among the `top_k` most like every poem chosen so far
    (the smallest of its similarities to them); None when the pool runs out."""
    chosen = [start]
    left = [j for j in pool if ok[start, j]]
    for _ in range(N_DISTRACTORS):
        if not left:
            return None
        fit = np.min(sim[np.ix_(left, chosen)], axis=1)
        best = np.lexsort((np.array(left), -fit))[:top_k]  # ties broken by corpus order, then drawn
        pick = left[int(best[rng.integers(len(best))])]
        chosen.append(pick)
        left = [j for j in left if ok[pick, j] and j != pick]
    return chosen[1:]


def _partition(sim: np.ndarray, ok: np.ndarray, members: list[int], rng: np.random.Generator,
               top_k: int) -> list[list[int]]:
    """Groups of four mutually similar poems, best first: each round grows a group from every poem still free (as
    `_grow` does with top_k 1, all at once), keeps the one whose least similar pair is most similar (drawn among the
    `top_k` best) and frees the rest. Fewer than four, or poems no group can take, stay free."""
    free, groups = np.array(sorted(members)), []
    while len(free) > N_DISTRACTORS:
        s = sim[np.ix_(free, free)]
        allowed = ok[np.ix_(free, free)]
        rows = np.arange(len(free))
        fit = np.where(allowed, s, -np.inf)
        picks, tight = [], np.full(len(free), np.inf)
        for _ in range(N_DISTRACTORS):
            j = np.argmax(fit, axis=1)  # the first of equals: corpus order
            best = fit[rows, j]
            tight = np.minimum(tight, best)
            picks.append(j)
            fit = np.where(allowed[j], np.minimum(fit, s[j]), -np.inf)
            fit[rows, j] = -np.inf
        whole = np.isfinite(tight)
        if not whole.any():
            break
        ranked = [r for r in np.lexsort((rows, -tight)) if whole[r]][:top_k]
        r = ranked[int(rng.integers(len(ranked)))]
        group = [int(free[r])] + [int(free[p[r]]) for p in picks]
        groups.append(group)
        free = np.array([i for i in free if i not in group])
    return groups


def choose_distractors(poems: Sequence[Poem], seed: int = 0, same_form: bool = False, top_k: int = DEFAULT_TOP_K,
                       similarity: np.ndarray | None = None, ngrams: Sequence[int] = DEFAULT_NGRAMS,
                       method: str = "groups", near_duplicate: float = NEAR_DUPLICATE) -> list[CandidateSet]:
    """Three distractors for every poem (see the module's docstring), by `method` `groups` or `neighbours`.
    `similarity` (n × n, in the poems' order) replaces the TF-IDF similarity for ranking, e.g.
    `embedding_similarity`'s; pairs whose TF-IDF similarity is at or above `near_duplicate` never share a set."""
    if top_k < 1:
        raise ValueError("top_k must be at least 1")
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r} (known: {', '.join(METHODS)})")
    texts = [han_text(p) for p in poems]
    textual = tfidf_similarity(texts, ngrams)
    sim = textual if similarity is None else np.asarray(similarity, dtype=np.float64)
    if sim.shape != (len(poems), len(poems)):
        raise ValueError(f"a similarity matrix of shape {sim.shape} for {len(poems)} poems")
    ok = _pairable(textual, texts, near_duplicate)  # near-duplicates are a matter of the text, whatever ranks
    rng = np.random.default_rng(seed)
    chosen: dict[int, tuple[str, list[int]]] = {}
    levels = ("form", "tradition", "corpus")
    for level in levels:
        by_key: dict[tuple, list[int]] = {}
        for i, poem in enumerate(poems):
            key = dict(_keys(poem, same_form)).get(level)
            if i not in chosen and key is not None:
                by_key.setdefault(key, []).append(i)
        for key in sorted(by_key):
            members = by_key[key]
            if method == "groups":
                for group in _partition(sim, ok, members, rng, top_k):
                    for i in group:
                        chosen[i] = (level, [j for j in group if j != i])
            else:
                for i in members:
                    picked = _grow(sim, ok, i, members, poem_rng(seed, poems[i].poem_id), top_k)
                    if picked:
                        chosen[i] = (level, picked)
    sets = []
    for i, poem in enumerate(poems):
        if i not in chosen:  # left over by the groups (or a tiny corpus): its neighbours, from the whole corpus
            picked = _grow(sim, ok, i, list(range(len(poems))), poem_rng(seed, poem.poem_id), top_k)
            if picked is None:
                raise DataError(Problem(poem.poem_id, f"fewer than {N_DISTRACTORS} other poems with another text: a "
                                        "corpus of at least four different poems is needed"))
            chosen[i] = ("leftover", picked)
        pool, picked = chosen[i]
        picked = sorted(picked, key=lambda j: (-sim[i, j], j))  # nearest first
        shown = [poem.poem_id] + [poems[j].poem_id for j in picked]
        order = poem_rng(seed, poem.poem_id).permutation(len(shown))
        sets.append(CandidateSet(
            poem_id=poem.poem_id, candidates=tuple(shown[k] for k in order),
            distractors=tuple(Distractor(poems[j].poem_id, round(float(sim[i, j]), 6)) for j in picked), pool=pool))
    return sets


# --- files -------------------------------------------------------------------------------------------------------

def write_candidates(sets: Sequence[CandidateSet], poems: Sequence[Poem], path: Path | str, method: dict) -> Path:
    """One JSON line per poem: `poem_id`, `phase1_candidates` (a ratings.csv cell), `candidates` (each candidate's
    poem_id, title, author, text and, for a distractor, its similarity to the poem), `pool` and `method` (how they
    were chosen). A file is self-contained: a judge reads the candidates' texts from it."""
    by_id = {p.poem_id: p for p in poems}
    lines = []
    for s in sets:
        sims = {d.poem_id: d.similarity for d in s.distractors}
        candidates = [{"poem_id": c, "title": by_id[c].title, "author": by_id[c].author, "text": by_id[c].text,
                       "tradition": by_id[c].tradition, "similarity": sims.get(c)} for c in s.candidates]
        lines.append(json.dumps({"poem_id": s.poem_id, "phase1_candidates": s.phase1_candidates,
                                 "candidates": candidates, "pool": s.pool, "method": method}, ensure_ascii=False))
    return write_file(path, "".join(line + "\n" for line in lines))


def read_candidates(path: Path | str) -> dict[str, list[Poem]]:
    """poem_id → its four candidate poems in the order shown, from a `write_candidates` file; every bad line named."""
    path = Path(path)
    if not path.is_file():
        raise DataError(Problem(str(path), "no such candidates file (make one with `tpb distractors POEMS --out FILE`)"))
    out: dict[str, list[Poem]] = {}
    problems: list[Problem] = []
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            poems = [Poem(poem_id=c["poem_id"], title=c["title"], author=c["author"], text=c["text"],
                          tradition=c.get("tradition", DEFAULT_TRADITION)) for c in row["candidates"]]
            pid = row["poem_id"]
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            problems.append(Problem(str(path), f"not a candidates record ({type(exc).__name__}: {exc})", line=lineno))
            continue
        ids = [p.poem_id for p in poems]
        if len(ids) != N_DISTRACTORS + 1 or len(set(ids)) != len(ids) or pid not in ids:
            problems.append(Problem(str(path), f"expected {N_DISTRACTORS + 1} distinct candidates including "
                                    f"{pid!r}, got {ids}", line=lineno, field="candidates"))
        elif pid in out:
            problems.append(Problem(str(path), f"poem {pid!r} twice", line=lineno, field="poem_id"))
        else:
            out[pid] = poems
    if problems:
        raise DataError(problems)
    return out


# --- checks: how similar, and whether the texts alone give the answer away ----------------------------------------

def similarity_distribution(sets: Sequence[CandidateSet], sim: np.ndarray, poems: Sequence[Poem]) -> dict:
    """Quantiles of the distractors' similarity to their poem, by rank of choice, beside those of every pair of
    poems of one tradition (what a random distractor would be)."""
    index = {p.poem_id: i for i, p in enumerate(poems)}
    qs = (0.0, 0.25, 0.5, 0.75, 1.0)

    def summary(values: Sequence[float]) -> dict:
        v = np.asarray(values, dtype=np.float64)
        return {"n": int(v.size), "mean": round(float(v.mean()), 4),
                **{f"q{int(q * 100)}": round(float(np.quantile(v, q)), 4) for q in qs}}

    out = {name: summary([s.distractors[k].similarity for s in sets]) for k, name in enumerate(RANKS)}
    out["all_distractors"] = summary([d.similarity for s in sets for d in s.distractors])
    out["within_candidates"] = summary([sim[index[a], index[b]] for s in sets for x, a in enumerate(s.candidates)
                                        for b in s.candidates[x + 1:] if s.poem_id not in (a, b)])
    pairs = [sim[i, j] for i in range(len(poems)) for j in range(i + 1, len(poems))
             if poems[i].tradition == poems[j].tradition]
    out["random_same_tradition_pair"] = summary(pairs)
    return out


def _features(poems: Sequence[Poem], sim: np.ndarray, index: dict[str, int], shown: Sequence[str]) -> np.ndarray:
    """Per candidate of a set, its surface cues relative to the others: length, lines, punctuation, and how like the
    other three it is (mean and max similarity), each centred on the set's mean."""
    ix = [index[c] for c in shown]
    block = sim[np.ix_(ix, ix)]
    np.fill_diagonal(block, np.nan)
    f = np.column_stack([
        [han_count(poems[i].text) for i in ix], [len(poems[i].lines) for i in ix],
        [sum(not is_han(ch) and not ch.isspace() for ch in poems[i].text) for i in ix],
        np.nanmean(block, axis=1), np.nanmax(block, axis=1),
    ]).astype(np.float64)
    return f - f.mean(axis=0)


def _fit_conditional_logit(x: np.ndarray, y: np.ndarray, l2: float = 1.0, steps: int = 500) -> np.ndarray:
    """Weights of a conditional logit (softmax over each set's candidates), x (sets × 4 × features), y the answers'
    places: Newton-free gradient descent on the L2-penalised mean negative log-likelihood."""
    scale = x.reshape(-1, x.shape[-1]).std(axis=0) + 1e-9
    x = x / scale
    w = np.zeros(x.shape[-1])
    for _ in range(steps):
        z = x @ w
        p = np.exp(z - z.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        grad = (np.einsum("sc,scf->f", p, x) - x[np.arange(len(y)), y].sum(axis=0)) / len(y) + l2 * w / len(y)
        w -= 0.5 * grad
    return w / scale


def text_baselines(sets: Sequence[CandidateSet], sim: np.ndarray, poems: Sequence[Poem], folds: int = 5,
                   seed: int = 0) -> dict:
    """How often a reader of the four texts alone, without the image, picks the answer; chance is 1/4.

    - `typical_length`: the candidate whose length is nearest the set's mean length;
    - `centroid`: the candidate most like the other three (mean similarity): the answer would be it if the
      distractors were just its nearest neighbours;
    - `surface_classifier`: a conditional logit over all these cues (length, lines, punctuation, mean and max
      similarity to the others), trained and tested in `folds` folds of poems.

    Each with its accuracy, a Wilson 95 % interval, and a one-sided binomial test's p-value against chance."""
    index = {p.poem_id: i for i, p in enumerate(poems)}
    x = np.stack([_features(poems, sim, index, s.candidates) for s in sets])
    y = np.array([s.answer_index for s in sets])
    picks: dict[str, np.ndarray] = {
        "typical_length": np.argmin(np.abs(x[:, :, 0]), axis=1),
        "centroid": np.argmax(x[:, :, 3], axis=1),
    }
    fold = np.random.default_rng(seed).permutation(len(sets)) % folds
    learned = np.zeros(len(sets), dtype=int)
    for k in range(folds):
        test = fold == k
        if test.any() and (~test).any():
            learned[test] = np.argmax(x[test] @ _fit_conditional_logit(x[~test], y[~test]), axis=1)
    picks["surface_classifier"] = learned
    out = {}
    for name, pick in picks.items():
        hits = int((pick == y).sum())
        out[name] = {"accuracy": round(hits / len(y), 4), "n": len(y), "interval": wilson(hits, len(y)),
                     "p_above_chance": round(float(stats.binomtest(hits, len(y), 0.25, alternative="greater").pvalue), 4)}
    return out


def wilson(hits: int, n: int, z: float = 1.959964) -> list[float]:
    """The Wilson score interval of a proportion."""
    p = hits / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return [round(centre - half, 4), round(centre + half, 4)]


@dataclass
class DistractorRun:
    sets: list[CandidateSet]
    method: dict
    distribution: dict
    baselines: dict

    def to_json(self) -> dict:
        return {"method": self.method, "n_poems": len(self.sets),
                "pools": {p: sum(s.pool == p for s in self.sets) for p in POOLS},
                "similarity": self.distribution, "text_baselines": self.baselines}


def run_distractors(poems: Sequence[Poem], seed: int = 0, same_form: bool = False, top_k: int = DEFAULT_TOP_K,
                    embedding_model: str | None = None, ngrams: Sequence[int] = DEFAULT_NGRAMS, method: str = "groups",
                    embed: Callable[[Sequence[str], str], np.ndarray] = embedding_similarity) -> DistractorRun:
    """Choose every poem's distractors and check them: the similarity distribution and the text-only baselines
    (measured with the similarity the distractors were chosen by)."""
    if embedding_model:
        sim = embed([p.text for p in poems], embedding_model)
        settings = {"similarity": "embedding", "model": embedding_model}
    else:
        sim = tfidf_similarity([han_text(p) for p in poems], ngrams)
        settings = {"similarity": "char-ngram-tfidf", "ngrams": list(ngrams)}
    settings.update(method=method, seed=seed, same_form=same_form, top_k=top_k)
    sets = choose_distractors(poems, seed=seed, same_form=same_form, top_k=top_k, similarity=sim, method=method)
    return DistractorRun(sets, settings, similarity_distribution(sets, sim, poems),
                         text_baselines(sets, sim, poems, seed=seed))


def format_run(run: DistractorRun) -> str:
    """The checks as a plain-text table."""
    pools = ", ".join(f"{k} {v}" for k, v in run.to_json()["pools"].items() if v)
    lines = [f"{counted(len(run.sets), 'poem')}; pools: {pools}",
             "", f"{'similarity to the poem':<28} {'n':>5} {'mean':>6} {'min':>6} {'q25':>6} {'median':>6} "
             f"{'q75':>6} {'max':>6}"]
    for name, d in run.distribution.items():
        lines.append(f"{name:<28} {d['n']:>5} {d['mean']:>6.3f} {d['q0']:>6.3f} {d['q25']:>6.3f} {d['q50']:>6.3f} "
                     f"{d['q75']:>6.3f} {d['q100']:>6.3f}")
    lines += ["", f"{'text-only baseline (chance 0.25)':<34} {'accuracy':>8}  {'95% interval':<16} {'p > chance':>10}"]
    for name, b in run.baselines.items():
        lines.append(f"{name:<34} {b['accuracy']:>8.3f}  [{b['interval'][0]:.3f}, {b['interval'][1]:.3f}]   "
                     f"{b['p_above_chance']:>10.4f}")
    return "\n".join(lines)


__all__ = ["CandidateSet", "Distractor", "DistractorRun", "choose_distractors", "embedding_similarity",
           "format_run", "read_candidates", "run_distractors", "similarity_distribution", "text_baselines",
           "tfidf_similarity", "write_candidates"]
