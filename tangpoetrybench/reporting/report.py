"""`tpb report`: the paper's human-data analysis, recomputed from any built dataset.

Writes `report.md`, a self-contained `report.html` (figures embedded), every figure as PNG under
`figures/`, and `numbers.json` with every number shown. The report is a list of blocks (headings,
paragraphs, tables, figures) rendered twice, to Markdown and to HTML, so both say the same.

Every reading where the paper leaves room is stated in the report's own text, beside its table: Table 2 and the
findings use the `images` config (the main tradition's poems, seen generators), all splits, under the rubric the
dataset carries for them; a finding that rests on a rubric role the rubric does not declare is left out, in a
sentence that says so; a generator's score on a dimension is the
mean over the images where it is non-null, with intervals that resample images within each generator; "strong"
generators (the zoomed radar) are those within 10 quality points of the best; the findings' definitions are in
`findings.py`.
"""

from __future__ import annotations

import base64
import html
import io
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np

from . import findings
from ..dataset.features import TEXT_LABEL_COLUMNS
from ..dataset.raw_release import UNSEEN_CONFIG
from ..dataset.reading import config_rows, dataset_rows, dataset_rubrics, dimension_keys, traditions_rubric
from ..judging.calibrated import Calibration
from ..files import write_file
from ..judging.ocr.labels import ISSUES, issue_counts, ocr_table3
from ..judging.results import Results, ResultsFile
from ..numeric import ZERO_WIDTH, ZERO_WIDTH_NOTE, counted, fmt, fmt_interval, mean_or_none
from .pairwise import compute_pairwise, lay_out_pairwise
from ..rubric import Rubric
from ..stats.agree import RATING_COLUMNS as AGREE_RATING_COLUMNS
from ..stats.agree import agreement_data_of, matched, rating_table_of
from ..stats.agreement import DEFAULT_BOOTSTRAP, STAT_LABELS, agreement
from ..stats.calibration import Judged, evaluate_records, percent, shift_sentence
from ..stats.selective import abstention_sentence, held_out_words
from ..stats.noise_floor import MIN_MULTI_RATED, floor_summary, noise_floor
from ..stats.pairs import pair_table_of
from .plots import radar, reliability_diagram, ring_floor, scatter
from .explanations import explanations, lay_out_explanations
from .recognition import lay_out_recognition, recognition_results

STRONG_GAP = 0.10


@dataclass
class Report:
    blocks: list[tuple] = field(default_factory=list)  # (kind, payload)
    numbers: dict = field(default_factory=dict)
    figures: dict[str, bytes] = field(default_factory=dict)  # file name -> PNG
    title: str = "TangPoetryBench report"

    def heading(self, text: str, level: int = 2) -> None:
        self.blocks.append(("heading", (level, text)))

    def text(self, text: str) -> None:
        self.blocks.append(("text", text))

    def table(self, header: list[str], rows: list[list[str]]) -> None:
        """A table; one with a zero-width interval (‡) is followed by the note that explains the mark."""
        self.blocks.append(("table", (header, rows)))
        if any(ZERO_WIDTH in cell for row in rows for cell in row):
            self.text(ZERO_WIDTH_NOTE)

    def figure(self, name: str, fig, caption: str) -> None:
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png", dpi=110)
        self.figures[name] = buffer.getvalue()
        self.blocks.append(("figure", (name, caption)))


def _pct(x: float | None) -> str:
    return "—" if x is None or not np.isfinite(x) else f"{100 * x:.1f}"


# What the report reads of each config: each config is read once, every split in one pass.
IMAGE_COLUMNS = ["image_id", "poem_id", "generator", "poem", "tradition", "quality", "recognizability"]
RATING_COLUMNS = ["rater_group", "phase1_correct", "generator"]


@dataclass
class ReportInputs:
    """A built dataset as the report reads it: the `images` config's rows and the kept ratings of those images,
    every split (each row carries its `split`)."""

    dataset: str
    images: list[dict]
    ratings: list[dict]
    synthetic: bool
    rubric: Rubric  # the rubric of the images config, from the dataset

    def split_images(self, split: str) -> list[dict]:
        return [r for r in self.images if r["split"] == split]

    def split_ratings(self, split: str) -> list[dict]:
        return [r for r in self.ratings if r["split"] == split]


def read_inputs(dataset: str | Path) -> ReportInputs:
    found = dataset_rubrics(dataset)
    keys = list(dimension_keys(found))
    images = config_rows(dataset, "images", [*IMAGE_COLUMNS, *keys], optional=TEXT_LABEL_COLUMNS[:2])
    rubric = traditions_rubric(sorted({r["tradition"] for rows in images.values() for r in rows}), "images", found)
    ratings = config_rows(dataset, "ratings", [*RATING_COLUMNS, *AGREE_RATING_COLUMNS, *keys,
                                               *(f"{k}_option" for k in keys)])
    return ReportInputs(
        str(dataset), [dict(r, split=split) for split, rows in images.items() for r in rows],
        [dict(r, split=split) for split, rows in ratings.items() for r in rows if r["image_config"] == "images"],
        is_synthetic(dataset), rubric)


def is_synthetic(dataset: str | Path) -> bool:
    from huggingface_hub import DatasetCard

    path = Path(dataset) / "README.md"
    card = DatasetCard.load(path if path.is_file() else str(dataset), repo_type="dataset")
    return "synthetic" in (card.data.tags or [])


@dataclass
class Table4:
    """One scores file against the human scores of the report's split."""

    evaluator: str
    result: dict  # agreement(...) with the file and whether its model had random weights
    warning: str | None
    human_quality: list[float]  # per image where both qualities are present: the scatter's points
    predicted_quality: list[float]
    calibrated: dict | None = None  # with a calibration of this judge: how its intervals fare (Table 4C)
    where: str = ""  # config/split


@dataclass
class Findings:
    numbers: dict  # what numbers.json holds under "findings"
    drivers: dict | None  # None: the rubric names no overall dimension
    emotion: dict | None  # None: the rubric names no face-avoidance option


@dataclass
class ReportData:
    """Every number the report shows, computed before any of it is laid out."""

    dataset: str
    synthetic: bool
    split: str
    n_bootstrap: int
    seed: int
    rubric: Rubric
    rows: list[dict]
    generators: list[str]
    table2: dict
    table2_ci: dict
    table2_avg: dict
    strong: list[str]
    table3: dict
    table3_ocr: dict | None
    recognition: dict[str, dict]  # recognize results files against the human Phase-1 track, by file stem
    explanations: dict | None  # explain mode's reasons and SemJudge graphs, where there are any
    pairwise: dict | None  # Tables 4P, 4L and 6: pairwise accuracy, literal bias, generator strengths
    table4: list[Table4]
    split_floor: dict | None
    noise_floor: dict
    findings: Findings
    calibrated: list[Table4] = field(default_factory=list)  # Table 4C's rows: test, then the unseen generator

    def numbers(self) -> dict:
        """numbers.json."""
        out = {"dataset": self.dataset, "n_images": len(self.rows), "generators": self.generators}
        if self.synthetic:
            out["synthetic"] = True
        out.update(table2=self.table2, table2_ci=self.table2_ci, table2_avg=self.table2_avg,
                   strong_generators=self.strong, table3=self.table3)
        if self.table3_ocr is not None:
            out["table3_ocr"] = self.table3_ocr
        if self.recognition:
            out["recognizability_judge"] = self.recognition
        if self.table4:
            out["table4"] = {t.evaluator: t.result for t in self.table4}
        if self.pairwise is not None:
            out["pairwise"] = self.pairwise
        if self.explanations is not None:
            out["explanations"] = self.explanations
        if self.calibrated:
            out["calibration"] = {t.where: {"evaluator": t.evaluator, **t.calibrated} for t in self.calibrated}
        out.update(noise_floor=self.noise_floor, findings=self.findings.numbers)
        return out


def build_report(dataset: str | Path, scores: Sequence[Results] = (), split: str = "test",
                 n_bootstrap: int = DEFAULT_BOOTSTRAP, seed: int = 0, ocr: Results | None = None,
                 graphs: Path | None = None, pairs: Sequence[Results] = (), calibration: Calibration | None = None,
                 unseen: Results | None = None) -> Report:
    """`tpb report`: read the dataset and each results file once, compute every number, then lay the report out.
    `scores`: evaluators' results (`tpb score`; recognize results get their own table); `ocr`: text-ocr results (the
    OCR's Table 3); `graphs`: SemJudge graphs (`tpb explain --out`), one shown per generator; `pairs`: pairwise
    judges' results (`tpb compare`), beside the --scores evaluators in Tables 4P, 4L and 6; `calibration`: a judge's
    calibration, whose intervals Table 4C tests on that judge's --scores and on `unseen`, its results on the unseen
    generator. A results file may be given as a `ResultsFile` already read, or as its path."""
    return lay_out(compute_report(read_inputs(dataset), scores, split, n_bootstrap, seed, ocr, graphs, pairs,
                                  calibration, unseen))


def compute_report(inputs: ReportInputs, scores: Sequence[Results] = (), split: str = "test",
                   n_bootstrap: int = DEFAULT_BOOTSTRAP, seed: int = 0, ocr: Results | None = None,
                   graphs: Path | None = None, pairs: Sequence[Results] = (), calibration: Calibration | None = None,
                   unseen: Results | None = None) -> ReportData:
    scores, pairs = [ResultsFile.of(s) for s in scores], [ResultsFile.of(p) for p in pairs]
    for results in scores:
        if not results.pointwise:
            raise ValueError(f"{results.path} holds a pairwise judge's verdicts (tpb compare): give it with --pairs")
    rubric = inputs.rubric
    keys = list(rubric.keys)
    rows = inputs.images
    generators = sorted({r["generator"] for r in rows})
    rng = np.random.default_rng(seed)
    table2, table2_ci = table2_means(rows, generators, keys + ["quality", "recognizability"], n_bootstrap, rng)
    split_rows, split_ratings = inputs.split_images(split), rating_table_of(inputs.split_ratings(split), rubric)
    recognition, scores = recognition_results(split_rows, scores, n_bootstrap, seed)
    split_floor = noise_floor(split_ratings) if scores else None
    table4: list[Table4] = []
    for results in scores:
        taken = [t.evaluator for t in table4]
        table4.append(table4_of(inputs, split_rows, results, split, n_bootstrap, seed, taken, calibration))
    calibrated = [t for t in table4 if t.calibrated is not None]
    if unseen is not None:
        if calibration is None:
            raise ValueError("--unseen-scores is Table 4C's second row: give --calibration too")
        rubric_keys = list(inputs.rubric.keys)
        unseen_rows = list(dataset_rows(inputs.dataset, UNSEEN_CONFIG, split,
                                        ["image_id", "poem_id", "tradition", "quality", *rubric_keys]))
        calibrated.append(table4_of(inputs, unseen_rows, ResultsFile.of(unseen), split, n_bootstrap, seed, [],
                                    calibration, UNSEEN_CONFIG))
    if calibration is not None and not calibrated:
        raise ValueError(f"none of the --scores files holds results of the calibrated judge "
                         f"({calibration.evaluator}, {calibration.model}): Table 4C needs its test results")
    return ReportData(
        dataset=inputs.dataset, synthetic=inputs.synthetic, split=split, n_bootstrap=n_bootstrap, seed=seed,
        rubric=rubric, rows=rows, generators=generators, table2=table2, table2_ci=table2_ci,
        table2_avg={k: mean_or_none([table2[g][k] for g in generators]) for k in keys + ["quality", "recognizability"]},
        strong=strong_generators(table2, generators),
        table3=issue_counts({r["image_id"]: r["text_issue_type"] for r in rows if r.get("text_issue") is not None},
                            generators),
        table3_ocr=ocr_table3(rows, ocr) if ocr is not None and rubric.adjudicated_dimension else None,
        recognition=recognition,
        explanations=explanations(rows, scores, graphs, rubric),
        pairwise=compute_pairwise(pair_table_of(split_rows), split_ratings, [*scores, *pairs], split, n_bootstrap,
                                  seed) if [*scores, *pairs] else None,
        table4=table4, split_floor=split_floor, noise_floor=noise_floor(rating_table_of(inputs.ratings, rubric)),
        findings=compute_findings(rows, inputs.ratings, keys, generators, rubric, table2, n_bootstrap, rng),
        calibrated=calibrated,
    )


def table2_means(rows: list[dict], generators: list[str], row_keys: list[str], n_bootstrap: int,
                 rng: np.random.Generator) -> tuple[dict, dict]:
    """Table 2: each generator's mean (×100) where the dimension applies, with its bootstrap interval."""
    table2, table2_ci = {g: {} for g in generators}, {g: {} for g in generators}
    for g in generators:
        for key in row_keys:
            values = np.array([r[key] for r in rows if r["generator"] == g and r[key] is not None], dtype=float)
            if len(values):
                boot = findings.bootstrap_means(values, n_bootstrap, rng)
                table2[g][key] = round(100 * float(values.mean()), 4)
                table2_ci[g][key] = [round(100 * float(np.percentile(boot, 2.5)), 4),
                                     round(100 * float(np.percentile(boot, 97.5)), 4)]
            else:
                table2[g][key], table2_ci[g][key] = None, None
    return table2, table2_ci


def strong_generators(table2: dict, generators: list[str]) -> list[str]:
    quality = {g: table2[g]["quality"] or 0.0 for g in generators}
    best_q = max(quality.values()) if quality else 0.0
    return [g for g in generators if quality[g] / 100 >= best_q / 100 - STRONG_GAP]


def table4_of(inputs: ReportInputs, rows: list[dict], results: ResultsFile, split: str, n_bootstrap: int, seed: int,
              taken: list[str], calibration: Calibration | None = None, config: str = "images") -> Table4:
    """Table 4 for one scores file against the split's image `rows`; a second file of an evaluator already `taken`
    (say two served judges) is named apart by its file name. With a `calibration` of the file's judge, how its
    intervals fare there too (Table 4C)."""
    evaluator = f"{results.label} ({results.path.stem})" if results.label in taken else results.label
    rubric = inputs.rubric
    data = agreement_data_of(rows, results, rubric)
    warnings = [matched(data, results, f"the {split} split"), results.scored_on(inputs.dataset, split, (config,))]
    warning = "; ".join(w for w in warnings if w) or None
    result = agreement(data, n_bootstrap=n_bootstrap, seed=seed)
    ok = np.isfinite(data.pred_quality) & np.isfinite(data.human_quality)
    calibrated = None
    if calibration is not None and not calibration.mismatch(results.name, results.model, results.settings):
        judged = Judged(data, [results.records.get(i) for i in data.image_ids], rubric, str(results.path))
        calibrated = evaluate_records(calibration, judged, results.records, inputs.dataset, n_bootstrap, seed)
    return Table4(evaluator, {**result, "scores": str(results.path), "random_weights": results.random_weights},
                  warning, list(data.human_quality[ok]), list(data.pred_quality[ok]), calibrated, f"{config}/{split}")


def compute_findings(rows, ratings, keys, generators, rubric, table2, n_bootstrap, rng) -> Findings:
    """The paper's §4 findings (definitions in `findings.py`), in the order the report shows them."""
    f: dict = {}
    d = findings.drivers(rows, keys, rubric.overall) if rubric.overall else None
    if d is not None:
        f["spearman_with_overall"] = {k: v["rho"] for k, v in d.items()}
        f["difficulty"] = findings.difficulty(rows, keys, rubric.overall, rubric.own_language)
    f["recognizability"] = findings.recognizability(rows, generators, rubric.overall)
    f["ranking_stability"] = findings.ranking_stability(rows, generators, n_bootstrap, rng)
    emo = findings.emotion(ratings, generators, rubric) if rubric.face_avoidance else None
    if emo is not None:
        f["face_avoidance"] = {g: {**emo["face_avoidance"][g], emo["dimension"]: table2[g][emo["dimension"]]}
                               for g in generators}
        f["emotion_option_shares"] = emo["option_shares"]
        rates = face_rates(emo, table2, generators)
        if len(rates) >= 2:
            f["face_avoidance_vs_emotion_spearman"], _ = findings.spearman(
                [emo["face_avoidance"][g]["rate"] for g in rates], [table2[g][emo["dimension"]] for g in rates])
    f["applicability"] = findings.applicability(ratings, rubric)
    f["phase1_accuracy_by_group"] = findings.phase1_accuracy(ratings)
    if rubric.depict and rubric.evoke:  # last: its resamples leave the other findings' draws as they were
        f["depict_evoke"] = findings.depict_evoke(rows, generators, rubric.depict, rubric.evoke, n_bootstrap, rng)
    return Findings(f, d, emo)


def face_rates(emo: dict, table2: dict, generators: list[str]) -> list[str]:
    """The generators with both a face-avoidance rate and an emotional-resonance score."""
    return [g for g in generators if emo["face_avoidance"][g]["rate"] is not None
            and table2[g][emo["dimension"]] is not None]


# --- Layout: blocks from the computed numbers, nothing computed below this line but wording ---

def lay_out(data: ReportData) -> Report:
    rubric = data.rubric
    rep = Report()
    rep.numbers = data.numbers()
    _intro(rep, data)
    _table2(rep, data, rubric)
    _figure2(rep, data, rubric)
    _table3(rep, data, rubric)
    lay_out_recognition(rep, data.recognition, data.split)
    for t in data.table4:
        _table4(rep, t, data.split, data.split_floor)
    _table4c(rep, data.calibrated)
    lay_out_pairwise(rep, data.pairwise, {t.evaluator: t.result for t in data.table4})
    lay_out_explanations(rep, data.explanations, rubric)
    _table5(rep, data.noise_floor, rubric)
    _findings(rep, data, rubric)
    return rep


def _intro(rep: Report, data: ReportData) -> None:
    rep.heading("TangPoetryBench report", 1)
    if data.synthetic:
        rep.text("**Synthetic data.** This dataset was made by `tpb demo-release`: its images and ratings are "
                 "simulated. The numbers below test the analysis; they describe no real model or rater.")
    rep.text(f"Dataset `{data.dataset}`, config `images`, all splits: {counted(len(data.rows), 'image')} of "
             f"{counted(len({r['poem_id'] for r in data.rows}), 'poem')} by "
             f"{counted(len(data.generators), 'generator')}. "
             f"Intervals: 95 %, {data.n_bootstrap:,} bootstrap resamples (seed {data.seed}).")


def _table2(rep: Report, data: ReportData, rubric) -> None:
    keys = list(rubric.keys)
    rep.heading("Table 2 — human scores by generator (×100)")
    rep.text("Mean over the images where the dimension applies; best per row in bold; [95 % interval, images "
             "resampled within each generator].")
    body = []
    for key in keys + ["quality", "recognizability"]:
        present = [data.table2[g][key] for g in data.generators if data.table2[g][key] is not None]
        best = max(present) if present else None
        cells = []
        for g in data.generators:
            v, ci = data.table2[g][key], data.table2_ci[g][key]
            cell = "—" if v is None else f"{v:.1f} {fmt_interval(ci, 1)}"
            cells.append(f"**{cell}**" if v is not None and v == best else cell)
        name = rubric.dimension(key).name["en"] if key in keys else key.capitalize()
        body.append([name, *cells, fmt(data.table2_avg[key], 1)])
    rep.table(["Dimension", *data.generators, "Avg"], body)


def _figure2(rep: Report, data: ReportData, rubric) -> None:
    keys = list(rubric.keys)
    profiles = {g: {k: None if data.table2[g][k] is None else data.table2[g][k] / 100 for k in keys}
                for g in data.generators}
    rep.heading("Figure 2 — profiles")
    floor = ring_floor(profiles)
    rep.figure("figure2a_all.png", radar(profiles, rubric, f"All generators ({floor:.1f}–1)", rmin=floor),
               f"All generators on one scale ({floor:.1f} to 1, low enough for every value).")
    zoom = [v for g in data.strong for v in profiles[g].values() if v is not None]
    rmin = max(0.0, np.floor((min(zoom) if zoom else 0.5) * 50 - 1) / 50)
    rep.figure("figure2b_strong.png", radar({g: profiles[g] for g in data.strong}, rubric,
                                            f"Strong generators ({rmin:.2f}–1)", rmin=rmin),
               f"The strong generators (within {STRONG_GAP * 100:.0f} quality points of the best), zoomed.")


def _table3(rep: Report, data: ReportData, rubric: Rubric) -> None:
    if rubric.adjudicated_dimension is None:
        rep.text(f"No table of adjudicated text issues: the rubric {rubric.name} names no adjudicated dimension "
                 "(`adjudicated_dimension`), so no text label replaces its survey answers.")
        return
    rep.heading("Table 3 — text issues (adjudicated labels)")
    rep.table(["Generator", "Leakage", "Fake characters", "Total", "Labelled images"],
              [[g, *(str(data.table3[g][k]) for k in ("leakage", "fake_characters", "total", "labelled_images"))]
               for g in data.generators])
    if data.table3_ocr is not None:  # text-ocr results: the OCR's Table 3 beside it
        _table3_ocr(rep, data.table3_ocr, data.table3, data.generators, len(data.rows))


def _table3_ocr(rep: Report, t: dict, human: dict, generators: list[str], n_rows: int) -> None:
    counts_o = t["by_generator"]
    rep.heading("Table 3 beside the OCR — text issues found by text-ocr")
    images_read = sum(c["labelled_images"] for c in counts_o.values())
    rep.text(f"`{t['scores']}`: {images_read} of the report's {counted(n_rows, 'image')} read by the OCR "
             f"(RapidOCR PP-OCRv6 "
             "and the rules of `tangpoetrybench.judging.ocr.evidence`); each cell is adjudicated / OCR. Seals and "
             "other text the OCR found: "
             + (", ".join(f"{k} {v}" for k, v in sorted(t["verdicts"].items())) or "none") + ".")
    rep.table(["Generator", "Leakage", "Fake characters", "Total", "Images"],
              [[g, *(f"{human[g][k]} / {counts_o[g][k]}" for k in (*ISSUES, "total", "labelled_images"))]
               for g in generators])
    rep.text(f"Agreement over the {counted(t['images_compared'], 'image')} with both an adjudicated label and an OCR "
             "result: precision = share of the OCR's finds that people confirmed, recall = share of people's "
             "labels the OCR found.")
    rep.table(["Issue type", "Adjudicated", "OCR", "Both", "Precision", "Recall"],
              [[k, str(a["human"]), str(a["ocr"]), str(a["both"]), fmt(a["precision"]), fmt(a["recall"])]
               for k, a in t["agreement"].items()])



def _table4(rep: Report, t: Table4, split: str, nf: dict) -> None:
    """Table 4 for one scores file, beside `nf`, the noise floor of the split's multi-rated images."""
    result, evaluator = t.result, t.evaluator
    rep.heading(f"Table 4 — {evaluator} against the human scores ({split} split)")
    if result["random_weights"]:
        rep.text("**Random weights.** These scores come from a tiny test model: they check the pipeline and measure nothing.")
    if t.warning:
        rep.text(f"**Warning.** {t.warning}.")
    floor = floor_summary(nf) if nf["enough"] else None  # none: the column is left out, the sentence says why
    rows = []
    for stat, label in STAT_LABELS.items():
        if stat in result:
            if stat == "kendall_tau":
                label += f" ({counted(result['kendall_tau_poems'], 'poem')})"
            rows.append([label, fmt(result[stat]), fmt_interval(result.get(f"{stat}_ci"), 3),
                         *([fmt(floor.get(stat))] if floor is not None else [])])
    rep.table(["Statistic", "Value", "95 % interval (poems resampled)",
               *(["Human noise floor"] if floor is not None else [])], rows)
    if floor is not None:
        rep.text(f"Human noise floor: from the {counted(nf['n_multi_rated_images'], 'multi-rated image')} of the "
                 f"{split} split, pooled over dimensions (every rater's leave-one-out deviation beside the mean "
                 "absolute error, every pair of raters beside within one anchor step, one rater's per-poem τ against "
                 "the others' beside Kendall τ); the other statistics have none (—).")
    else:
        rep.text(f"Human noise floor: too few multi-rated images in the {split} split ({nf['n_multi_rated_images']}; "
                 f"at least {MIN_MULTI_RATED} needed), so none is shown.")
    if t.human_quality:
        name = re.sub(r"[^A-Za-z0-9_.-]+", "_", evaluator)
        rep.figure(f"scatter_{name}.png", scatter(t.human_quality, t.predicted_quality,
                                                  "human quality", f"{evaluator} quality"),
                   f"{evaluator}: predicted against human quality, one point per image.")


def _table4c(rep: Report, rows: list[Table4]) -> None:
    """Table 4C: the calibrated intervals on test and on the unseen generator, beside ranking and absolute
    agreement, with a reliability diagram per row and the dimensions' figures."""
    if not rows:
        return
    first = rows[0].calibrated
    rep.heading(f"Table 4C — calibrated intervals ({percent(first['level'])}): can the judge score, or only rank?")
    rep.text(f"Split-conformal intervals fitted on `{first['calibrated_on']}` (calibration {first['calibration']}, "
             f"α = {first['alpha']:g}), tested on poems it never saw. The guarantee is marginal: over poems "
             "exchangeable with the calibration's, a new poem's image has its human quality inside its interval with "
             "chance at least 1 − α — not each image, and not under a shift (docs/calibration.md). Coverage counts "
             "it that way: per poem, the share of its images covered, averaged over poems; its intervals resample "
             "poems; ECE: "
             "the most likely anchor's probability against how often it is the people's anchor, pooled over "
             "dimensions, before → after temperature scaling. Ranking (τ per poem, pairwise accuracy) and absolute "
             "agreement (MAE, coverage and width) side by side.")
    table = []
    for t in rows:
        c, a, q = t.calibrated, t.result, t.calibrated["quality"]
        ece = f"{fmt(c['reliability']['before']['ece'])} → {fmt(c['reliability']['after']['ece'])}"
        table.append([f"{t.evaluator} on `{t.where}`", str(q["n_pairs"]),
                      f"{fmt(q['coverage'])} {fmt_interval(q.get('coverage_ci'), 3)}",
                      f"{fmt(q['mean_width'])} ({percent(q['width_share'])})", ece, fmt(a.get("kendall_tau")),
                      fmt(a.get("pairwise_accuracy")), fmt(a.get("mae"))])
    rep.table(["Judge on", "Images", "Coverage [95 % CI]", "Mean width (of range)", "ECE → after T",
               "Kendall τ", "Pairwise accuracy", "MAE (every dimension)"], table)
    rep.text(f"Selective judging on `{rows[0].where}`: the images with the widest quality intervals left to people "
             "first, and the judge's quality on the images it keeps.")
    rep.table(["Left to people", "Kept", "MAE", "Within 0.05", "Spearman ρ", "Coverage"],
              [[percent(r["abstain"]), str(r["kept"]), fmt(r["mae"]), fmt(r["within_0.05"]), fmt(r["spearman"]),
                fmt(r["coverage"])] for r in rows[0].calibrated["risk_coverage"]])
    for t in rows:
        sentence = shift_sentence(t.calibrated, f"`{t.where}`")
        rep.text(f"**{sentence}**" if sentence else
                 f"On `{t.where}` the coverage is consistent with the promised {percent(first['level'])}.")
        if t.calibrated.get("abstention"):
            kept = abstention_sentence(t.calibrated["abstention"], f"`{t.where}`")
            rep.text(f"**{kept}**" if kept else f"On `{t.where}`, {held_out_words(t.calibrated['abstention'])[0]}.")
        if t.calibrated["unrated"] or t.calibrated["missing"]:
            rep.text(f"`{t.where}`: {counted(len(t.calibrated['unrated']), 'image')} with a result but no human "
                     f"score (left "
                     f"out), {len(t.calibrated['missing'])} without a result (counted as misses).")
        dims = t.calibrated["per_dimension"]
        rep.table(["Dimension", "Pairs", "Coverage", "Mean width", "Set coverage", "Set size", "ECE → after T", "T"],
                  [[k, str(d["n_pairs"]), fmt(d["coverage"]) if d["intervals"] else "too few to calibrate",
                    fmt(d["mean_width"]), fmt(d.get("set_coverage")), fmt(d.get("mean_set_size"), 2),
                    f"{fmt(d.get('ece_before'))} → {fmt(d.get('ece_after'))}", fmt(d.get("temperature"), 2)]
                   for k, d in dims.items()])
        name = re.sub(r"[^A-Za-z0-9_.-]+", "_", f"{t.evaluator}_{t.where}")
        reliability = t.calibrated["reliability"]
        if reliability["before"]["n"]:
            rep.figure(f"reliability_{name}.png", reliability_diagram(reliability, f"{t.evaluator} on {t.where}"),
                       f"{t.evaluator} on {t.where}: reliability of the most likely anchor's probability, before and "
                       "after temperature scaling (the diagonal is perfect calibration).")


def _table5(rep: Report, nf: dict, rubric) -> None:
    rep.heading("Table 5 — agreement between raters (multi-rated images)")
    rep.text(f"{counted(nf['n_multi_rated_images'], 'multi-rated image')} (kept ratings of the `images` config, "
             f"all splits). "
             "Within one level: the share of pairs of raters of an image, both judging the dimension applicable, "
             f"whose scores differ by at most one anchor step{_two_level(rubric)}; leave-one-out deviation: the mean "
             "over raters of |one rater − the mean of the image's other raters|; Krippendorff's α on the interval "
             "scale.")
    rep.table(["Dimension", "Pairs", "Within one level (%)", "LOO deviation", "α"],
              [[rubric.dimension(k).name["en"], str(d["n_pairs"]), _pct(d["within_one_level"]),
                fmt(d["loo_deviation"]), fmt(d["krippendorff_alpha"])] for k, d in nf["per_dimension"].items()])


def _two_level(rubric: Rubric) -> str:
    """" — on a two-level dimension (text integrity, the survey answer) the share that agree exactly", for the
    rubric's dimensions of two levels (the adjudicated one as the survey answered it); "" where it has none."""
    names = [rubric.dimension(k).name["en"].lower() + (", the survey answer" if k == rubric.adjudicated_dimension
                                                       else "")
             for k in rubric.keys if len(rubric.dimension(k).scores) == 2]
    return f" — on a two-level dimension ({'; '.join(names)}) the share that agree exactly" if names else ""


def _ordinal(rank: int, n: int) -> str:
    """"highest", "lowest" or "2nd highest" for a 1-based rank among n (1 = highest)."""
    if rank == 1:
        return "highest"
    if rank == n:
        return "lowest"
    return f"{rank}{'nd' if rank == 2 else 'rd' if rank == 3 else 'th'} highest"


def _findings(rep: Report, data: ReportData, rubric) -> None:
    """The paper's §4 findings: headings name the analysis; every finding is a sentence computed from the numbers."""
    keys, f = list(rubric.keys), data.findings.numbers
    name = {k: rubric.dimension(k).name["en"] for k in keys}
    rep.heading("Findings of the paper's §4, recomputed")
    rep.text(f"Over the `images` config ({rubric.short_name} poems, seen generators), all splits; ratings are the kept "
             "ratings of those images. ρ is Spearman's rank correlation, over the pairs where both values are present.")
    if data.findings.drivers is None:
        rep.text(f"Left out: what drives the holistic judgment and what makes a poem hard, since the rubric "
                 f"{rubric.name} names no overall dimension (`overall`) for them to rest on.")
    else:
        overall = name[rubric.overall].lower()
        _drivers(rep, data.findings.drivers, name, overall)
        _difficulty(rep, f["difficulty"], name, overall, rubric.own_language)
    if "depict_evoke" in f:
        _depict_evoke(rep, f["depict_evoke"], data.generators, name)
    else:
        rep.text(f"Left out: the depict-to-evoke gap, since the rubric {rubric.name} does not name both the dimensions "
                 "that depict what a poem names and those that evoke what it means (`depict`, `evoke`).")
    _recognizability(rep, f["recognizability"], data.generators, rubric)
    _ranking_stability(rep, f["ranking_stability"], data.generators)
    if data.findings.emotion is None:
        rep.text(f"Left out: face avoidance, since the rubric {rubric.name} names no face-avoidance option "
                 "(`face_avoidance`).")
    else:
        _emotion(rep, data.findings.emotion, f, data.table2, data.generators, rubric)
    _applicability(rep, f["applicability"], name, rubric)
    _phase1(rep, f["phase1_accuracy_by_group"], rubric)


def _drivers(rep: Report, d: dict, name: dict, overall: str) -> None:
    rep.heading(f"Dimensions and {overall}", 3)
    ordered = sorted((k for k in d if d[k]["rho"] is not None), key=lambda k: -d[k]["rho"])
    if len(ordered) >= 3:
        a, b, z = ordered[0], ordered[1], ordered[-1]
        rep.text(f"Per image, {overall} goes most with {name[a]} (ρ {fmt(d[a]['rho'], 2)}) and {name[b]} "
                 f"(ρ {fmt(d[b]['rho'], 2)}), least with {name[z]} (ρ {fmt(d[z]['rho'], 2)}).")
    rep.table(["Dimension", f"Spearman ρ with {overall}", "Images"],
              [[name[k], fmt(d[k]["rho"]), str(d[k]["images"])] for k in ordered + [k for k in d if k not in ordered]])


def _difficulty(rep: Report, diff: dict, name: dict, overall: str, language: str) -> None:
    rep.heading("Poem difficulty", 3)
    gaps = sorted((k for k, v in diff["easy_minus_hard_gap"].items() if v is not None),
                  key=lambda k: -diff["easy_minus_hard_gap"][k])
    unit = findings.length_unit(language)
    text = (f"A poem's difficulty is the mean {overall} over its images; it ranges from {fmt(diff['min'], 2)} "
            f"to {fmt(diff['max'], 2)}. Its correlation with poem length ({unit}) is "
            f"{findings.strength(diff['spearman_with_length'])} (ρ {fmt(diff['spearman_with_length'], 2)}, "
            f"{counted(diff['poems'], 'poem')}).")
    if gaps:
        top, low = gaps[0], gaps[-1]
        text += (f" Between the easiest and the hardest quartile the gap is largest on {name[top]} "
                 f"({fmt(diff['easy_minus_hard_gap'][top], 2)}) and smallest on {name[low]} "
                 f"({fmt(diff['easy_minus_hard_gap'][low], 2)}).")
    rep.text(text)
    rep.text(f"Quartiles: the {diff['quartile_size']} hardest and the {diff['quartile_size']} easiest of the "
             f"{counted(diff['poems'], 'poem')}, each with every poem tied at its boundary ({diff['hard_poems']} and "
             f"{diff['easy_poems']} poems). The gap is the "
             "mean over the easy quartile's poems minus the mean over the hard quartile's, each poem weighing as one "
             f"(its mean over its images); {overall} defines the quartiles and is left out.")
    rep.table(["Dimension", "Gap (easy − hard)"],
              [[name[k], fmt(diff["easy_minus_hard_gap"][k])] for k in gaps])


def _depict_evoke(rep: Report, de: dict, generators: list[str], name: dict) -> None:
    rep.heading("The depict-to-evoke gap", 3)
    depict, evoke = (", ".join(name[k] for k in de[side]) for side in ("depict", "evoke"))
    by = de["by_generator"]
    measured = [g for g in generators if by[g]["gap"] is not None]
    if measured:
        wider = [g for g in measured if by[g]["interval"][0] > 0]
        verdict = ("every generator depicts better than it evokes (the gap's 95 % interval lies above zero for each)"
                   if len(wider) == len(measured) else
                   f"the gap's 95 % interval lies above zero for {len(wider)} of the "
                   f"{counted(len(measured), 'generator')}"
                   if wider else "for no generator does the gap's 95 % interval lie above zero")
        rep.text(f"Depiction ({depict}) minus evocation ({evoke}) ranges from "
                 f"{fmt(100 * min(by[g]['gap'] for g in measured), 1)} to "
                 f"{fmt(100 * max(by[g]['gap'] for g in measured), 1)} points (×100) over the generators; {verdict}.")
    rep.text(f"Per image, depiction is the mean of {depict} and evocation the mean of {evoke} (each over the "
             "dimensions it has a score on); the gap is their difference, averaged over the generator's images that "
             "have both, with a bootstrap interval that resamples those images.")
    table = [[g, fmt(_hundred(by[g]["depict"]), 1), fmt(_hundred(by[g]["evoke"]), 1), fmt(_hundred(by[g]["gap"]), 1),
              fmt_interval(by[g]["interval"], 1, scale=100), str(by[g]["images"])] for g in generators]
    rep.table(["Generator", "Depiction (×100)", "Evocation (×100)", "Gap (×100)", "95 % interval", "Images"], table)


def _hundred(value: float | None) -> float | None:
    return None if value is None else 100 * value


def _recognizability(rep: Report, rec: dict, generators: list[str], rubric: Rubric) -> None:
    rep.heading("Recognizability and quality", 3)
    text = (f"Per image, the correlation of recognizability with quality is "
            f"{findings.strength(rec['spearman_with_quality'])} (ρ {fmt(rec['spearman_with_quality'], 2)}, "
            f"{counted(rec['spearman_with_quality_images'], 'image')})")
    if rubric.overall is not None:
        text += (f" and with {rubric.dimension(rubric.overall).name['en'].lower()} "
                 f"{findings.strength(rec['spearman_with_overall'])} (ρ {fmt(rec['spearman_with_overall'], 2)})")
    text += (f". The {rec['highly_rated_images']} highly rated images "
             f"(quality ≥ {findings.HIGH_QUALITY}, with a Phase-1 answer) have mean recognizability "
             f"{fmt(rec['mean_of_highly_rated'], 2)}.")
    by_gen = rec["by_generator"]
    with_mean = [g for g in generators if by_gen[g]["mean"] is not None]
    labelled = rubric.adjudicated_dimension is not None  # leakage is an adjudicated text issue
    if len(with_mean) >= 2 and not labelled:
        best = max(with_mean, key=lambda g: by_gen[g]["mean"])
        text += f" {best} is the most recognizable generator ({fmt(by_gen[best]['mean'], 3)})."
    elif len(with_mean) >= 2:
        best = max(with_mean, key=lambda g: by_gen[g]["mean"])
        clean = [g for g in with_mean if by_gen[g]["mean_without_leakage"] is not None]
        best_clean = max(clean, key=lambda g: by_gen[g]["mean_without_leakage"]) if clean else None
        text += f" {best} is the most recognizable generator ({fmt(by_gen[best]['mean'], 3)})"
        if best_clean == best:
            text += (f"; it stays the most recognizable with every leakage image left out "
                     f"({fmt(by_gen[best]['mean_without_leakage'], 3)}).")
        elif best_clean:
            text += (f"; with every leakage image left out, {best_clean} is "
                     f"({fmt(by_gen[best_clean]['mean_without_leakage'], 3)}).")
        else:
            text += "."
    rep.text(text)
    if not labelled:
        rep.table(["Generator", "Recognizability"], [[g, fmt(by_gen[g]["mean"])] for g in generators])
        return
    rep.table(["Generator", "Recognizability", "Without leakage images", "Leakage images left out"],
              [[g, fmt(by_gen[g]["mean"]), fmt(by_gen[g]["mean_without_leakage"]),
                str(by_gen[g]["leakage_images_left_out"])] for g in generators])


def _ranking_stability(rep: Report, st: dict, generators: list[str]) -> None:
    rep.heading("Ranking stability", 3)
    ranked = [g for g in generators if st["first"][g] is not None]
    if len(ranked) >= 2:
        top = max(ranked, key=lambda g: st["first"][g])
        bottom = max(ranked, key=lambda g: st["last"][g])
        rep.text(f"{top} has the highest mean quality in {_pct(st['first'][top])} % of the resamples and {bottom} the "
                 f"lowest in {_pct(st['last'][bottom])} %.")
    rep.text("Share of bootstrap resamples (images resampled within each generator) in which each generator has the "
             "highest and the lowest mean quality.")
    rep.table(["Generator", "Ranks first (%)", "Ranks last (%)"],
              [[g, _pct(st["first"][g]), _pct(st["last"][g])] for g in generators])


def _emotion(rep: Report, emo: dict, f: dict, table2: dict, generators: list[str], rubric) -> None:
    dim = rubric.dimension(emo["dimension"])
    rep.heading("Emotion and face avoidance", 3)
    rates = face_rates(emo, table2, generators)
    if len(rates) >= 2:
        most = max(rates, key=lambda g: emo["face_avoidance"][g]["rate"])
        order = sorted(rates, key=lambda g: -table2[g][emo["dimension"]])
        dim_name = dim.name["en"].lower()
        rep.text(f"{most}, which avoids faces most ({_pct(emo['face_avoidance'][most]['rate'])} % of its applicable "
                 f"emotion ratings), has the {_ordinal(order.index(most) + 1, len(order))} {dim_name} of the "
                 f"{counted(len(order), 'generator')}; across generators, face avoidance and {dim_name} have Spearman "
                 f"ρ {fmt(f['face_avoidance_vs_emotion_spearman'], 2)}.")
    option = dim.option(emo["face_option"])
    rep.text(f"Face avoidance: the share of a generator's applicable {dim.name['en'].lower()} ratings (pooled over "
             f"ratings, not averaged per image) that chose \"{option.label['en']}\".")
    rep.table(["Generator", "Face avoidance (%)", "Applicable ratings", f"{dim.name['en']} (×100)"],
              [[g, _pct(emo["face_avoidance"][g]["rate"]), str(emo["face_avoidance"][g]["ratings"]),
                fmt(table2[g][emo["dimension"]], 1)] for g in generators])
    rep.text(f"How the {counted(emo['applicable_ratings'], 'applicable ' + dim.name['en'].lower() + ' rating')} "
             f"split over the options, "
             "all generators pooled:")
    rep.table(["Option", "Score", "Share (%)"],
              [[f"{letter}: {dim.option(letter).label['en']}", fmt(o["score"], 2), _pct(o["share"])]
               for letter, o in emo["option_shares"].items()])


def _applicability(rep: Report, app: dict, name: dict, rubric: Rubric) -> None:
    if not app:
        rep.text(f"Left out: applicability, since no dimension of the rubric {rubric.name} has a not-applicable "
                 "option.")
        return
    rep.heading("Applicability", 3)
    rep.text("Dimensions with a not-applicable option: the share of kept ratings, pooled over generators, that judged "
             "the dimension applicable (Table 2 averages these dimensions over the images where it applies).")
    rep.table(["Dimension", "Applicable (%)", "Ratings"],
              [[name[k], _pct(a["share"]), str(a["ratings"])] for k, a in app.items()])


def _phase1(rep: Report, acc: dict, rubric: Rubric) -> None:
    rep.heading("Phase-1 accuracy by rater group", 3)
    e, c = acc["expert"]["accuracy"], acc["crowd"]["accuracy"]
    if e is not None and c is not None:
        rep.text(f"Experts picked the right poem {'more' if e > c else 'less' if e < c else 'as'} often "
                 f"{'than' if e != c else 'as'} crowd workers ({_pct(e)} % against {_pct(c)} %).")
    rep.text(f"Kept ratings with a Phase-1 answer, of the {rubric.short_name} images by the seen generators.")
    rep.table(["Rater group", "Phase-1 accuracy (%)", "Answers"],
              [[g, _pct(a["accuracy"]), str(a["answers"])] for g, a in acc.items()])



def render_markdown(rep: Report) -> str:
    out = []
    for kind, payload in rep.blocks:
        if kind == "heading":
            out.append("#" * payload[0] + " " + payload[1])
        elif kind == "text":
            out.append(payload)
        elif kind == "table":
            header, rows = payload
            out.append("\n".join(["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
                                 + ["| " + " | ".join(r) + " |" for r in rows]))
        else:
            name, caption = payload
            out.append(f"![{caption}](figures/{name})\n\n*{caption}*")
    return "\n\n".join(out) + "\n"


def _inline(text: str) -> str:
    """Markdown's **bold** and `code` in a line of text, as HTML; an interval `[a, b]` never breaks across lines."""
    text = re.sub(r"\[([^\]\[]*)\]", "\x00\\1\x01", text)
    text = html.escape(text).replace("\x00", '<span class="ci">[').replace("\x01", "]</span>")
    text = re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", text)
    return re.sub(r"`(.+?)`", r"<code>\1</code>", text)


def render_html(rep: Report) -> str:
    parts = []
    for kind, payload in rep.blocks:
        if kind == "heading":
            parts.append(f"<h{payload[0]}>{_inline(payload[1])}</h{payload[0]}>")
        elif kind == "text":
            parts.append(f"<p>{_inline(payload)}</p>")
        elif kind == "table":
            header, rows = payload
            head = "".join(f"<th>{_inline(h)}</th>" for h in header)
            body = "".join("<tr>" + "".join(f"<td>{_inline(c)}</td>" for c in r) + "</tr>" for r in rows)
            parts.append(f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")
        else:
            name, caption = payload
            data = base64.b64encode(rep.figures[name]).decode()
            parts.append(f'<figure><img alt="{html.escape(caption)}" src="data:image/png;base64,{data}">'
                         f"<figcaption>{_inline(caption)}</figcaption></figure>")
    # text keeps a readable measure; a wide table may use the page up to 1,400 px and wraps its cells between
    # figures (never inside an interval), so it fits
    style = ("body{font-family:system-ui,sans-serif;max-width:1360px;margin:2em auto;padding:0 1em;color:#222}"
             "p,h1,h2,h3,figure{max-width:980px}"
             "table{border-collapse:collapse;margin:1em 0;font-size:92%}"
             "th,td{border:1px solid #ccc;padding:4px 8px;text-align:right}.ci{white-space:nowrap}"
             "th:first-child,td:first-child{text-align:left}img{max-width:100%}figcaption{color:#555;font-size:90%}")
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{html.escape(rep.title)}</title>'
            f"<style>{style}</style></head><body>\n" + "\n".join(parts) + "\n</body></html>\n")


def write_report(rep: Report, out: Path | str, name: str = "report", numbers: str = "numbers.json") -> Path:
    """OUT/NAME.md, NAME.html, the numbers and figures/, each file written whole and never through a symbolic link
    (`files.write_file`)."""
    out = Path(out)
    (out / "figures").mkdir(parents=True, exist_ok=True)  # there even when empty
    for figure, png in rep.figures.items():
        write_file(out / "figures" / figure, png, root=out)
    write_file(out / f"{name}.md", render_markdown(rep), root=out)
    write_file(out / f"{name}.html", render_html(rep), root=out)
    write_file(out / numbers, json.dumps(rep.numbers, ensure_ascii=False, indent=1, default=float) + "\n", root=out)
    return out
