"""`tpb leaderboard`: every generator, human-rated or new, scored by one rubric judge on the same poems, beside the
human scores where people rated it. Any judge whose records rank generators (`records.Record.ranks_generators`: the
rubric's scores task — PAE, a served judge, a plugin's) is ranked, and labelled by what it is: its registry label
(`registry.label_of`: "PAE"), its model and the servers that answered.

Definitions (also stated in the output):
- Generators are those in the score files (an image id is `<generator>/<poem_id>`). They are compared on the poems
  of the dataset's split that every one of them has a result for, so that each is judged on the same poems.
- Every number in the judge's columns ("PAE" for PAE) is its estimate; every number in a "human" column is the
  mean of the built dataset's human scores for the same images. A dimension's score is the mean over images where it is
  non-null.
- 95 % intervals and rank stability resample poems (the same draw for every generator, so the comparison stays
  paired); rank stability is the share of resamples in which a generator holds the rank it has in the estimate.
- Agreement with people, over the human-rated generators: Kendall τ-b and Spearman ρ between the judge's and the
  human means of each generator on the images that have both, and the per-image statistics of docs/statistics.md
  (τ within a poem, Spearman over images) from `agreement.agreement`.
- Images scored but not compared are counted and said, per generator, with why (`left_out`).
- Kept images only (`kept_only`, `tpb leaderboard --kept-only CALIBRATION`): records scored with `tpb score
  --calibration CALIBRATION --abstain` that say the judge abstained are left out of every judge's and human column and
  of the agreement with people; the poems compared stay those above. Each generator's row says how many it abstained
  on and the share of its images kept; the generators that had no image among the calibration's are named, since
  the calibration's guarantee says nothing of them (a shift).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np
from scipy import stats

from ..stats.agreement import DEFAULT_BOOTSTRAP, AgreementData, agreement, resample_weights
from ..stats.calibration import carried_coverage, percent
from ..stats.selective import TARGET_WORDS
from ..dataset.raw_release import MAIN_IMAGE_CONFIGS
from ..dataset.reading import config_rubric, dataset_fingerprint, dataset_rows
from ..judging.abstention import ABSTAIN_SETTING
from ..judging.calibrated import CALIBRATION_SETTING, Calibration
from ..judging.records import RECORD_TYPES, abstained
from ..judging.registry import evaluator_names, label_of
from ..judging.results import PER_RESULT_SETTINGS, Results, ResultsFile, rubric_scores, two_settings
from ..numeric import counted, fmt, fmt_ci, fmt_interval
from .findings import spearman
from .pairwise import lay_out_strengths, leaderboard_strengths
from .plots import colours_for, radar, ring_floor
from .recognition import board_recognizability, lay_out_recognizability
from .variants import lay_out_variants, variant_comparison
from .report import Report, is_synthetic, write_report
from ..rubric import Rubric



@dataclass
class Scores:
    """One evaluator's results for every generator, from one or more files made with the same settings."""

    evaluator: str
    model: str
    settings: dict
    records: dict[str, dict]  # by image_id
    results: list[ResultsFile]  # the files, each read once
    source: dict[str, str]  # by image_id, the file its record is from

    @property
    def files(self) -> list[str]:
        return [str(r.path) for r in self.results]

    @property
    def random_weights(self) -> bool:
        return any(r.get("random_weights") for r in self.records.values())

    @property
    def label(self) -> str:
        """How the tables name the judge's estimates ("PAE")."""
        return label_of(self.evaluator)

    @property
    def servers(self) -> list[str]:
        """The servers that answered, where a served judge made the files."""
        return sorted({server for r in self.results for server in r.servers})


APART = PER_RESULT_SETTINGS - {"served_model"}  # which replica answered, and how; the rubric is checked apart


def _made_with(record: dict) -> dict:
    """The evaluator, model and settings of a record, but what a result says of itself (`APART`): which replica of
    a fleet answered it and in which response format; and the rubric: a file may also hold images of another
    tradition (Song Ci), scored with their own rubric, and the rubric of the images compared is checked on its own
    (`_one_rubric`). The model a server said it served is compared: a fleet that mixes models is refused."""
    settings = {k: v for k, v in (record.get("settings") or {}).items() if k not in APART}
    return {"evaluator": record.get("evaluator"), "model": record.get("model"), **settings}


def _one_rubric(records: dict[str, dict], image_ids: list[str]) -> str | None:
    rubrics = {records[i].get("settings", {}).get("rubric") for i in image_ids}
    if len(rubrics) > 1:
        raise ValueError(f"the images compared were scored with different rubrics ({', '.join(sorted(map(str, rubrics)))}):"
                         " score every generator's images with the same rubric")
    return rubrics.pop() if rubrics else None


def read_score_files(files: Sequence[Results]) -> Scores:
    """Results of every file (each a `ResultsFile` or its path), refused unless their records rank generators (a
    rubric judge's scores), one evaluator made them all with the same settings (model, adapter, rubric, pixel budget,
    answer length, backend, parser) and no image is scored twice."""
    if not files:
        raise ValueError("give the score files to compare (tpb score --out FILE), one or more")
    files = [ResultsFile.of(f) for f in files]
    records: dict[str, dict] = {}
    source: dict[str, str] = {}
    first, made = None, None
    for results in files:
        path = results.path
        if not results.record_type.ranks_generators:
            judges = [n for task, kind in RECORD_TYPES.items() if kind.ranks_generators for n in evaluator_names(task)]
            raise ValueError(f"{path} holds {results.name}'s {results.task} records: the leaderboard ranks a rubric "
                             f"judge's scores, so score every generator with one (tpb score --evaluator "
                             f"{' or '.join(judges)})")
        for image_id, record in results.records.items():
            this = _made_with(record)
            if made is None:
                first, made = path, this
            elif this != made:
                key = next(k for k in sorted(set(made) | set(this)) if made.get(k) != this.get(k))
                this_way, first_way = two_settings(key, this.get(key), made.get(key))
                raise ValueError(f"{path} was scored with {this_way} but {first} with {first_way}: "
                                 "a leaderboard compares generators scored by one evaluator with the same settings; "
                                 "score them all the same way")
            if "/" not in image_id:
                raise ValueError(f"{path}: image {image_id!r} names no generator (ids are GENERATOR/POEM_ID): score "
                                 "a folder of GENERATOR/POEM_ID.png files, e.g. tpb score --images RAW/images")
            if image_id in records:
                raise ValueError(f"image {image_id!r} is scored in both {source[image_id]} and {path}: give each "
                                 "image once")
            records[image_id], source[image_id] = record, str(path)
    settings = {k: v for k, v in made.items() if k not in ("evaluator", "model")}
    return Scores(made["evaluator"], made["model"] or "", settings, records, files, source)


def unproven_files(files: Sequence[ResultsFile], dataset: str | Path, split: str, rated_ids: set[str]) -> list[str]:
    """Each file that scored the dataset's own images is checked against it (another build, config or split is
    refused); one that does not say what it scored but has ids of its images is a warning. Files of generated
    images (`tpb score --images`) have neither, and need neither."""
    warnings = []
    for results in files:
        if results.datasets or rated_ids.intersection(results.records):
            warning = results.scored_on(dataset, split, MAIN_IMAGE_CONFIGS)
            warnings += [warning] if warning else []
    return warnings


def human_rows(dataset: str | Path, split: str, keys: list[str]) -> list[dict]:
    """The split's human-rated images of the main tradition (`images` config, and `unseen_generator` where the
    dataset has one)."""
    rows = []
    for config in MAIN_IMAGE_CONFIGS:
        try:
            rows += list(dataset_rows(dataset, config, split, ["image_id", "poem_id", "generator", *keys, "quality",
                                                               "recognizability"]))
        except ValueError:
            if config == "images":
                raise
    return rows


def _per_poem(values: dict[tuple[str, str], list], generators: list[str], poems: list[str], width: int):
    """(sums, counts), each (G, width, P), of the non-null values of each generator's image of each poem."""
    sums = np.zeros((len(generators), width, len(poems)))
    counts = np.zeros_like(sums)
    gi, pi = {g: i for i, g in enumerate(generators)}, {p: i for i, p in enumerate(poems)}
    for (g, p), row in values.items():
        for c, v in enumerate(row):
            if v is not None:
                sums[gi[g], c, pi[p]] += v
                counts[gi[g], c, pi[p]] += 1
    return sums, counts


def _means(weights: np.ndarray, sums: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """(B, G, C) means for poem weights (B, P); NaN where a generator has no value."""
    g, c, p = sums.shape
    with np.errstate(invalid="ignore", divide="ignore"):
        means = (weights @ sums.reshape(g * c, p).T) / (weights @ counts.reshape(g * c, p).T)
    return means.reshape(len(weights), g, c)


def _ranks(quality: np.ndarray) -> np.ndarray:
    """1-based ranks by quality (highest first) along the last axis; equal qualities share the best of their ranks
    (1, 2, 2, 4); a missing quality ranks last (the callers leave generators without a quality unranked)."""
    return stats.rankdata(-np.nan_to_num(quality, nan=-np.inf), method="min", axis=-1).astype(int)


def _kendall_b(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """τ-b between the columns of x and y (…, G) for every leading index, vectorised over pairs of generators."""
    i, j = np.triu_indices(x.shape[-1], k=1)
    sx, sy = np.sign(x[..., i] - x[..., j]), np.sign(y[..., i] - y[..., j])
    with np.errstate(invalid="ignore", divide="ignore"):
        return (sx * sy).sum(-1) / np.sqrt(np.abs(sx).sum(-1) * np.abs(sy).sum(-1))


def _interval(values: np.ndarray) -> list[float] | None:
    values = values[np.isfinite(values)]
    return [float(np.percentile(values, 2.5)), float(np.percentile(values, 97.5))] if len(values) else None


@dataclass
class LeaderboardData:
    """Every number the leaderboard shows, computed before any of it is laid out."""

    dataset: str
    split: str
    rubric: Rubric  # the dataset's rubric of the images compared
    poems: list[str]
    scores: Scores
    n_bootstrap: int
    seed: int
    board: list[dict]  # one row per generator, ranked
    rated: list[str]  # the generators people rated
    synthetic: bool
    agreement_with_humans: dict
    warnings: list[str]  # score files that cannot show they scored this dataset's images
    generator_strengths: dict | None  # Bradley–Terry strengths and win rates from the evaluator's choices on pairs
    recognizability_judge: dict | None = None  # with recognize results: what the recognizability table says of them
    prompt_variants: dict | None = None  # with generation.json files: one pipeline's prompt variants side by side
    left_out: dict | None = None  # generator → images scored but not compared, by why (see `left_out`)
    kept_only: "KeptOnly | None" = None  # ranked on the images the judge kept (see `KeptOnly`)

    def numbers(self) -> dict:
        """leaderboard.json."""
        s = self.scores
        out = dict(dataset=self.dataset, split=self.split, poems=len(self.poems), evaluator=s.evaluator, model=s.model,
                   settings=s.settings, score_files=s.files, random_weights=s.random_weights,
                   bootstrap={"resamples": self.n_bootstrap, "seed": self.seed, "unit": "poem",
                              "percentiles": [2.5, 97.5]},
                   leaderboard=self.board)
        if self.synthetic:
            out["synthetic"] = True
        if self.prompt_variants is not None:
            out["prompt_variants"] = self.prompt_variants
        if self.left_out:
            out["left_out"] = self.left_out
        if self.kept_only is not None:
            out["kept_only"] = self.kept_only.numbers()
        out["agreement_with_humans"] = self.agreement_with_humans
        if self.generator_strengths is not None:
            out["generator_strengths"] = self.generator_strengths
        return out


def build_leaderboard(dataset: str | Path, scores: Sequence[Results], split: str = "test",
                      n_bootstrap: int = DEFAULT_BOOTSTRAP, seed: int = 0, recognize: Sequence[Results] = (),
                      generation: list[Path] = (), kept_only: Calibration | None = None) -> Report:
    """`tpb leaderboard`: read the scores and the dataset once, compute every number, then lay it out. `recognize`:
    recognize results of the same generators (a recognizability table); `generation`: tpb generate's records (one
    pipeline's prompt variants side by side); `kept_only`: the calibration the scores abstained under (`tpb score
    --abstain`), to rank on the images the judge kept."""
    return lay_out(compute_leaderboard(dataset, scores, split, n_bootstrap, seed, recognize, generation, kept_only))


def compute_leaderboard(dataset: str | Path, scores: Sequence[Results], split: str = "test",
                        n_bootstrap: int = DEFAULT_BOOTSTRAP, seed: int = 0, recognize: Sequence[Results] = (),
                        generation: list[Path] = (), kept_only: Calibration | None = None) -> LeaderboardData:
    rubric = config_rubric(dataset, "images", split)
    keys = list(rubric.keys)
    columns = keys + ["quality"]
    s = read_score_files(scores)
    rows = human_rows(dataset, split, keys)
    split_poems = {r["poem_id"] for r in rows}
    generators = sorted({i.split("/", 1)[0] for i in s.records})
    scored = {g: {i.split("/", 1)[1] for i in s.records if i.startswith(g + "/")} for g in generators}
    poems = sorted(split_poems.intersection(*scored.values()))
    if not poems:
        raise ValueError(f"no poem of {dataset} ({split} split) has a result for every generator "
                         f"({', '.join(generators)}): score each generator's images of the same poems")
    keep = set(poems)
    compared = [i for i in s.records if i.split("/", 1)[1] in keep]
    s.settings["rubric"] = _one_rubric(s.records, compared)
    kept = None if kept_only is None else KeptOnly.of(s, kept_only, dataset, compared)
    judged = rows  # the human-rated images the judge's columns are set beside
    if kept is not None:  # the images the judge abstained on leave every column
        compared = [i for i in compared if i not in kept.abstained]
        judged = [r for r in rows if r["image_id"] not in kept.abstained]
    judge_values = {tuple(i.split("/", 1)): rubric_scores(s.records[i], keys, s.source[i])
                    + [s.records[i].get("quality")] for i in compared}
    human_values = {(r["generator"], r["poem_id"]): [r[c] for c in columns] for r in judged
                    if r["poem_id"] in keep and r["generator"] in scored}
    rated = [g for g in generators if any(human_values.get((g, p), [None])[-1] is not None for p in poems)]
    weights = (resample_weights(np.random.default_rng(seed), len(poems), n_bootstrap) if n_bootstrap > 0 else None)
    board = ranked_board(generators, poems, columns, judge_values, human_values, rated, weights)
    if kept is not None:
        kept.add_to(board)
    judge = board_recognizability(board, rows, [ResultsFile.of(r) for r in recognize], poems, n_bootstrap,
                                  seed)  # adds it to the board's rows
    return LeaderboardData(
        str(dataset), split, rubric, poems, s, n_bootstrap, seed, board, rated, is_synthetic(dataset),
        agreement_with_humans(s, judged, keep, rated, judge_values, human_values, poems, n_bootstrap, seed, weights,
                              rubric),
        unproven_files(s.results, dataset, split, {r["image_id"] for r in rows}),
        leaderboard_strengths(s.records, compared, n_bootstrap, seed), judge, variant_comparison(board, generation) if generation else None,
        left_out(scored, split_poems, keep), kept)


@dataclass
class KeptOnly:
    """A leaderboard ranked on the images the judge kept (see the module's docstring): the calibration the scores
    abstained under, the images abstained on, and the generators it holds images of (None: it was fitted on
    another build of the dataset, so which cannot be told)."""

    calibration: Calibration
    abstained: set[str]  # of the images compared
    per_generator: dict[str, tuple[int, int, int]]  # generator → (images compared, abstained on, kept)
    calibration_generators: list[str] | None
    outside: list[str] = field(default_factory=list)  # generators here with no image among the calibration's

    @classmethod
    def of(cls, s: Scores, calibration: Calibration, dataset: str | Path, compared: list[str]) -> "KeptOnly":
        """Refused unless the scores abstained under this calibration (`tpb score --calibration FILE --abstain`)."""
        made = s.settings.get(CALIBRATION_SETTING)
        if made != calibration.fingerprint or s.settings.get(ABSTAIN_SETTING) is not True:
            how = (f"under calibration {made}, not {calibration.fingerprint}" if made and made != calibration.fingerprint
                   else "without --abstain")
            raise ValueError(f"--kept-only ranks on the images the judge kept, as records scored with --abstain under "
                             f"that calibration say; {', '.join(s.files)} were scored {how}: score them with tpb score "
                             "--calibration FILE --abstain")
        gone = {i for i in compared if abstained(s.records[i])}
        per_generator: dict[str, tuple[int, int, int]] = {}
        for image_id in compared:
            generator = image_id.split("/", 1)[0]
            n, out, kept = per_generator.get(generator, (0, 0, 0))
            held = image_id not in gone and s.records[image_id].get("quality") is not None
            per_generator[generator] = (n + 1, out + (image_id in gone), kept + held)
        found, fitted = None, calibration.dataset
        if fitted.get("fingerprint") and fitted["fingerprint"] == dataset_fingerprint(dataset):
            poems = set(calibration.poems)
            found = sorted({r["generator"] for r in dataset_rows(dataset, fitted["config"], fitted["split"],
                                                                   ["poem_id", "generator", "quality"])
                            if r["poem_id"] in poems and r["quality"] is not None})
        outside = sorted(g for g in per_generator if found is None or g not in found)
        return cls(calibration, gone, per_generator, found, outside)

    def add_to(self, board: list[dict]) -> None:
        """Each generator's row gains `abstained` (images) and `kept_share` (of the images compared, those whose
        score the judge kept)."""
        for row in board:
            n, out, kept = self.per_generator[row["generator"]]
            row.update(abstained=out, kept_share=kept / n)

    def numbers(self) -> dict:
        a = self.calibration.abstention
        return {"calibration": self.calibration.fingerprint, "calibrated_on": self.calibration.on,
                "target": a.target, "epsilon": a.epsilon, "delta": a.delta, "max_spread": a.max_spread,
                "calibration_generators": self.calibration_generators, "outside_calibration": self.outside}

    def words(self, label: str) -> str:
        """What the leaderboard says of it, at the top."""
        a, on = self.calibration.abstention, self.calibration.on
        text = (f"**Kept images only.** {label} abstained where its readout was unsure (calibration "
                f"`{self.calibration.fingerprint}`, fitted on `{on}`: {TARGET_WORDS[a.target]} at most ε = "
                f"{a.epsilon:g} with probability at least {1 - a.delta:g}, on new poems like its own): every column "
                "is over the images it kept, and Images says per generator how many it abstained on and the share "
                "kept.")
        if not self.outside:
            return text
        if self.calibration_generators is None:
            return text + (f" **Outside the calibration.** It was fitted on another build of the dataset "
                           f"({self.calibration.dataset.get('fingerprint')}), so which of these generators it covers "
                           "cannot be told: its guarantee is not assumed for any of them.")
        return text + (f" **Outside the calibration:** {', '.join(self.outside)} had no image among its images "
                       f"({', '.join(self.calibration_generators)}): its guarantee says nothing of them (a shift; "
                       "docs/calibration.md), and their kept error may lie above ε.")


def left_out(scored: dict[str, set[str]], split_poems: set[str], compared: set[str]) -> dict:
    """Per generator, the images it has results for that the board does not compare, by why: poems without
    human-rated images in the split (another split, or Song Ci), and poems some other generator has no result for."""
    out = {}
    for generator, poems in scored.items():
        why = {"outside_split": len(poems - split_poems), "missing_elsewhere": len(poems & split_poems - compared)}
        if any(why.values()):
            out[generator] = why
    return out


def ranked_board(generators: list[str], poems: list[str], columns: list[str], judge_values: dict, human_values: dict,
                 rated: list[str], weights: np.ndarray | None) -> list[dict]:
    """Per generator: rank, rank stability, images and every column's judge's (and human) mean with its interval,
    ranked by the judge's quality (`weights`: the bootstrap's poem weights, or None)."""
    judge_sums, judge_counts = _per_poem(judge_values, generators, poems, len(columns))
    human_sums, human_counts = _per_poem(human_values, generators, poems, len(columns))
    estimate = np.ones((1, len(poems)))
    judge, human = _means(estimate, judge_sums, judge_counts)[0], _means(estimate, human_sums, human_counts)[0]
    rank = _ranks(judge[:, -1])
    boot_judge = boot_human = np.zeros((0, len(generators), len(columns)))
    if weights is not None:
        boot_judge, boot_human = _means(weights, judge_sums, judge_counts), _means(weights, human_sums, human_counts)
    has_quality = np.isfinite(judge[:, -1])
    stability = np.full(len(generators), np.nan)
    if weights is not None:
        stability = (_ranks(boot_judge[:, :, -1]) == rank).mean(axis=0)

    def column_dict(means: np.ndarray, boot: np.ndarray, g: int) -> dict:
        out = {}
        for c, key in enumerate(columns):
            value = means[g, c]
            out[key] = None if not np.isfinite(value) else float(value)
            out[f"{key}_ci"] = _interval(boot[:, g, c]) if weights is not None and np.isfinite(value) else None
        return out

    board = []
    for g_index, g in enumerate(generators):
        n_images = sum((g, p) in judge_values for p in poems)
        board.append({
            "generator": g, "rank": int(rank[g_index]) if has_quality[g_index] else None,
            "rank_stability": float(stability[g_index]) if has_quality[g_index] and weights is not None else None,
            "human_rated": g in rated, "images": n_images,
            "answers_without_quality": sum(judge_values[(g, p)][-1] is None for p in poems if (g, p) in judge_values),
            "judge": column_dict(judge, boot_judge, g_index),
            "human": column_dict(human, boot_human, g_index) if g in rated else None,
        })
    board.sort(key=lambda row: (row["rank"] is None, row["rank"] or 0, row["generator"]))
    return board


def lay_out(data: LeaderboardData) -> Report:
    rubric = data.rubric
    keys = list(rubric.keys)
    columns = keys + ["quality"]
    s, board, rated = data.scores, data.board, data.rated
    label = s.label
    rep = Report(title="TangPoetryBench leaderboard")
    rep.numbers = data.numbers()
    rep.heading("TangPoetryBench leaderboard", 1)
    for warning in data.warnings:
        rep.text(f"**Warning.** {warning}.")
    if s.random_weights:
        rep.text("**Random weights.** The scores come from a tiny test model: they check the pipeline and measure "
                 "nothing.")
    if data.synthetic:
        rep.text("**Synthetic data.** The dataset was made by `tpb demo-release`: its human scores are simulated.")
    if data.kept_only is not None:
        rep.text(data.kept_only.words(label))
    if data.left_out:
        rep.text("**Left out.** " + "; ".join(_left_out_words(g, why, data.split) for g, why in data.left_out.items())
                 + ". Generate and score only the split's poems to spend nothing on them (`tpb generate --split "
                 f"{data.split}`).")
    at = f" at {', '.join(s.servers)}" if s.servers else ""
    rep.text(f"Every generator is scored by one evaluator, `{s.evaluator}` (`{s.model}`{at}, settings "
             f"{', '.join(f'{k} {v}' for k, v in s.settings.items())}), on the same "
             f"{counted(len(data.poems), 'poem')} of the "
             f"`{data.split}` split of `{data.dataset}`. **{label}** columns are the evaluator's estimates; **human** "
             "columns are the means of the dataset's human ratings of the same images, shown only where people rated "
             f"that generator ({', '.join(rated) or 'none here'}). Intervals: 95 %, {data.n_bootstrap:,} resamples "
             f"of poems (seed {data.seed}), the same draw for every generator. Rank stability: the share of resamples "
             "in which a generator holds its rank.")
    rep.heading(f"Ranking by {label}-estimated quality (×100)")
    ranking = leaderboard_rows(board, label)
    rep.table(["Rank", "Generator", f"{label} quality [95 % CI]", "Human quality [95 % CI]", "Rank stability (%)",
               "Images"], ranking)
    lay_out_recognizability(rep, board, data.recognizability_judge)
    lay_out_variants(rep, board, data.prompt_variants, label)

    rep.heading(f"Table 2 layout — per dimension (×100): {label} estimate, then human where rated")
    layout = [[rubric.dimension(k).name["en"] if k in keys else "Quality",
               *[_cell(r["judge"], k) + (f" · human {fmt(_x100(r['human'][k]), 1)}" if r["human"] else "")
                 for r in board]] for k in columns]
    rep.table(["Dimension", *[r["generator"] for r in board]], layout)

    profiles = {r["generator"]: {k: r["judge"][k] for k in keys} for r in board}
    floor = ring_floor(profiles)
    colours = colours_for(profiles)  # a generator has one colour in both charts
    rep.figure(f"radar_{s.evaluator}.png", radar(profiles, rubric, f"{label} estimates ({floor:.1f}–1)", rmin=floor,
                                                 colours=colours),
               f"Every generator's profile as {label} estimates it.")
    if rated:
        rep.figure("radar_human.png", radar({r["generator"]: {k: r["human"][k] for k in keys} for r in board
                                             if r["human"]}, rubric, f"Human scores ({floor:.1f}–1)", rmin=floor,
                                            colours=colours),
                   "The human-rated generators' profiles from the human ratings of the same images.")
    _agreement(rep, data.agreement_with_humans, label)
    lay_out_strengths(rep, data.generator_strengths, s.evaluator)  # Bradley–Terry, win rates
    return rep


def _left_out_words(generator: str, why: dict, split: str) -> str:
    parts = []
    if why["outside_split"]:
        parts.append(f"{counted(why['outside_split'], 'image')} of poems with no human-rated image in the `{split}` "
                     "split (another split, or another tradition's config)")
    if why["missing_elsewhere"]:
        parts.append(f"{counted(why['missing_elsewhere'], 'image')} of poems that another generator has no result "
                     "for (every generator is compared on the same poems)")
    return f"{generator}: " + " and ".join(parts)


def leaderboard_rows(board: list[dict], label: str) -> list[list[str]]:
    """One row per generator (rank, generator, the judge's and the human quality ×100 with intervals, rank
    stability, images; `label` names the judge): the Markdown table and the Space's tab show the same."""
    return [["—" if r["rank"] is None else str(r["rank"]), r["generator"], _cell(r["judge"], "quality"),
             _cell(r["human"], "quality") if r["human"] else "not rated",
             "—" if r["rank_stability"] is None else f"{100 * r['rank_stability']:.1f}", _images(r, label)]
            for r in board]


def _images(row: dict, label: str) -> str:
    missing = row["answers_without_quality"]
    notes = [f"{missing} without a {label} quality"] if missing else []
    if "kept_share" in row:  # a leaderboard of kept images (`KeptOnly`)
        notes.append(f"{row['abstained']} abstained on, {100 * row['kept_share']:.0f} % kept")
    return str(row["images"]) + (f" ({'; '.join(notes)})" if notes else "")


def _finite(value) -> float | None:
    return float(value) if np.isfinite(value) else None


def _x100(value: float | None) -> float | None:
    return None if value is None else 100 * value


def _cell(values: dict, key: str) -> str:
    value, ci = values[key], values[f"{key}_ci"]
    if value is None:
        return "—"
    return f"{100 * value:.1f}" + (f" {fmt_interval(ci, 1, scale=100)}" if ci else "")


def agreement_with_humans(s: Scores, rows: list[dict], keep: set[str], rated: list[str], judge_values: dict,
                          human_values: dict, poems: list[str], n_bootstrap: int, seed: int,
                          weights: np.ndarray | None, rubric) -> dict:
    """How far the judge's ranking of the human-rated generators agrees with the human one on the same images."""
    result: dict = {"generators": rated}
    if len(rated) < 2:
        return result
    both = {gp: (judge_values[gp][-1], human_values[gp][-1]) for gp in judge_values
            if gp[0] in rated and gp in human_values and None not in (judge_values[gp][-1], human_values[gp][-1])}
    judge_sums, judge_counts = _per_poem({gp: [v[0]] for gp, v in both.items()}, rated, poems, 1)
    human_sums, human_counts = _per_poem({gp: [v[1]] for gp, v in both.items()}, rated, poems, 1)
    ones = np.ones((1, len(poems)))
    judge_q, human_q = _means(ones, judge_sums, judge_counts)[0, :, 0], _means(ones, human_sums, human_counts)[0, :, 0]
    defined = bool(np.isfinite(judge_q).all() and np.isfinite(human_q).all())
    tau = _finite(_kendall_b(judge_q, human_q)) if defined else None
    rho = spearman(judge_q.tolist(), human_q.tolist())[0] if defined else None  # None: under 3, or a constant side
    result.update(images=len(both), judge_quality=dict(zip(rated, map(_finite, judge_q))),
                  human_quality=dict(zip(rated, map(_finite, human_q))), kendall_tau=tau, spearman=rho)
    if weights is not None:
        bp, bh = _means(weights, judge_sums, judge_counts)[:, :, 0], _means(weights, human_sums, human_counts)[:, :, 0]
        whole = np.isfinite(bp).all(axis=1) & np.isfinite(bh).all(axis=1)  # resamples where every mean exists
        result["kendall_tau_ci"] = _interval(_kendall_b(bp, bh))
        result["same_order_share"] = (float(np.mean(np.all(_ranks(bp[whole]) == _ranks(bh[whole]), axis=1)))
                                      if whole.any() else None)
    keys = list(rubric.keys)
    data_rows = [r for r in rows if r["poem_id"] in keep and r["generator"] in rated]
    records = [s.records.get(r["image_id"]) or {} for r in data_rows]
    data = AgreementData(
        image_ids=[r["image_id"] for r in data_rows], poem_ids=[r["poem_id"] for r in data_rows], keys=tuple(keys),
        anchors=np.array([rubric.anchor_step(k) for k in keys]),
        human=np.array([[np.nan if r[k] is None else r[k] for k in keys] for r in data_rows], dtype=float),
        pred=np.array([[np.nan if (rec.get("scores") or {}).get(k) is None else rec["scores"][k] for k in keys]
                       for rec in records], dtype=float),
        human_quality=np.array([np.nan if r["quality"] is None else r["quality"] for r in data_rows], dtype=float),
        pred_quality=np.array([np.nan if rec.get("quality") is None else rec["quality"] for rec in records], dtype=float),
    )
    per_image = agreement(data, n_bootstrap=n_bootstrap, seed=seed)
    result["per_image"] = {k: per_image.get(k) for k in ("n_images", "n_poems", "kendall_tau", "kendall_tau_ci",
                                                         "kendall_tau_poems", "spearman", "spearman_ci", "mae", "mae_ci")}
    coverage = carried_coverage(records, data.human_quality, data.poem_ids, n_bootstrap, seed)
    if coverage is not None:  # calibrated records (tpb score --calibration): how often their intervals hold
        result["interval_coverage"] = coverage
    return result


def _agreement(rep: Report, result: dict, label: str) -> None:
    rep.heading(f"Does {label} rank the human-rated generators as people do?")
    rated = result["generators"]
    if len(rated) < 2:
        rep.text("Fewer than two of these generators were rated by people, so there is no ranking to compare.")
        return
    tau, rho, ci, same = (result["kendall_tau"], result["spearman"], result.get("kendall_tau_ci"),
                          result.get("same_order_share"))
    rep.text(f"Over the {len(rated)} human-rated generators ({', '.join(rated)}), on the "
             f"{counted(result['images'], 'image')} "
             f"that have both a human and a {label} quality: Kendall τ-b between {label}'s and the human means "
             f"{fmt(tau)}"
             + (f" {fmt_ci(ci)}" if ci else "") + (f", Spearman ρ {fmt(rho)}" if rho is not None else "")
             + (f"; {label} orders them exactly as people do in {100 * same:.1f} % of resamples" if same is not None
                else "")
             + ".")
    p = result["per_image"]
    rep.table(["Per-image statistic (docs/statistics.md)", "Value", "95 % CI (poems)"],
              [[f"Kendall τ within a poem ({counted(p['kendall_tau_poems'], 'poem')})", fmt(p["kendall_tau"]),
                fmt_ci(p.get("kendall_tau_ci"))],
               ["Spearman ρ over images", fmt(p["spearman"]), fmt_ci(p.get("spearman_ci"))],
               ["MAE over (image, dimension) pairs", fmt(p["mae"]), fmt_ci(p.get("mae_ci"))]])
    c = result.get("interval_coverage")
    if c is not None:
        verdict = "." if c["holds"] else ": below the promised level, so here the guarantee does not hold (a shift)."
        rep.text(f"The judge's {percent(c['level'])} intervals (calibration {', '.join(c['calibration'])}) hold the "
                 f"human quality of {fmt(c['coverage'])} {fmt_ci(c.get('coverage_ci'))} of the {c['n_images']} rated "
                 f"images, per poem (averaged over poems, as the guarantee counts), mean width "
                 f"{fmt(c['mean_width'])}{verdict}")


def write_leaderboard(rep: Report, out: Path | str) -> Path:
    """OUT/leaderboard.md, leaderboard.html (figures embedded), leaderboard.json and figures/."""
    return write_report(rep, out, name="leaderboard", numbers="leaderboard.json")
