"""`tpb agree`: an evaluator's scores (JSON Lines from `tpb score`) against a built dataset's human scores,
with intervals and the human noise floor of the same split, as JSON and as a table for the terminal; with a
calibration, how its intervals fare there. `tpb calibrate`: a calibration fitted on a split's scores."""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np

from .agreement import DEFAULT_BOOTSTRAP, DEFAULT_MARGIN, AgreementData, agreement
from .calibration import DEFAULT_ALPHA, Judged, evaluate_records, fit, format_evaluation, one_way
from ..dataset.reading import config_rubric, dataset_identity, dataset_rows
from ..judging.calibrated import SPREAD_FLOOR, Calibration
from ..judging.abstention import SelectiveOptions
from .noise_floor import MIN_MULTI_RATED, RatingTable, floor_summary, noise_floor
from ..judging.results import ResultsFile
from ..numeric import ZERO_WIDTH, ZERO_WIDTH_NOTE, counted, fmt, fmt_interval
from ..rubric import Rubric


def matched(data: AgreementData, results: ResultsFile, where: str) -> str | None:
    """A scores file must be about these images: none of them is an error; some missing is a warning (returned)."""
    found = sum(i in results.records for i in data.image_ids)
    if found == 0:
        folder = "" if results.datasets else (
            "; it scored a folder of images, and the human-data statistics need the dataset's own: rank a new "
            "generator's images with tpb leaderboard instead, which reads them beside the rated ones")
        raise ValueError(f"{results.path} has results for none of the {counted(len(data.image_ids), 'image')} "
                         f"of {where} (its "
                         f"{len(results.records)} results are for other images): check --dataset, --config and "
                         f"--split{folder}")
    if found < len(data.image_ids):
        return (f"{len(data.image_ids) - found} of the {counted(len(data.image_ids), 'image')} of {where} have "
                f"no result in "
                f"{results.path}: they count against coverage")
    return None


def agreement_data(dataset: str | Path, results: ResultsFile, split: str, config: str = "images") -> AgreementData:
    rubric = config_rubric(dataset, config, split)
    rows = list(dataset_rows(dataset, config, split, ["image_id", "poem_id", "quality", *rubric.keys]))
    return agreement_data_of(rows, results, rubric)


def agreement_data_of(rows: list[dict], results: ResultsFile, rubric: Rubric) -> AgreementData:
    """Image rows (image_id, poem_id, quality and every dimension) beside an evaluator's results."""
    keys, records = list(rubric.keys), results.records
    human = np.array([[np.nan if r[k] is None else r[k] for k in keys] for r in rows], dtype=float).reshape(len(rows), len(keys))
    pred = np.full_like(human, np.nan)
    pred_quality = np.full(len(rows), np.nan)
    for i, row in enumerate(rows):
        record = records.get(row["image_id"])
        if record is None:
            continue
        pred[i] = [np.nan if v is None else v for v in results.rubric_scores(row["image_id"], keys)]
        pred_quality[i] = np.nan if record.get("quality") is None else record["quality"]
    return AgreementData(
        image_ids=[r["image_id"] for r in rows], poem_ids=[r["poem_id"] for r in rows], keys=rubric.keys,
        anchors=np.array([rubric.anchor_step(k) for k in keys]), human=human, pred=pred,
        human_quality=np.array([np.nan if r["quality"] is None else r["quality"] for r in rows], dtype=float),
        pred_quality=pred_quality, scalar=results.record_type.compared_with == "ranking",
    )


def judged_of(rows: list[dict], results: ResultsFile, rubric: Rubric, where: str) -> Judged:
    """Image rows (image_id, poem_id, quality and every dimension) beside a rubric judge's records, for calibration."""
    data = agreement_data_of(rows, results, rubric)
    if data.scalar:
        raise ValueError(f"{where} holds a scalar metric's scores, on its own scale, not the people's: there is no "
                         "residual to calibrate (calibrate a rubric judge: pae, api)")
    return Judged(data, [results.records.get(i) for i in data.image_ids], rubric, where)


def judged_file(dataset: str | Path, scores: ResultsFile | Path | str, split: str,
                config: str) -> tuple[Judged, ResultsFile, list[str]]:
    """A results file read once beside a config's split: (judged, the results, warnings)."""
    results = ResultsFile.of(scores)
    rubric = config_rubric(dataset, config, split)
    rows = list(dataset_rows(dataset, config, split, ["image_id", "poem_id", "quality", *rubric.keys]))
    judged = judged_of(rows, results, rubric, str(results.path))
    extra = len(set(results.records) - set(judged.data.image_ids))
    outside = (f"{counted(extra, 'result')} in {results.path} for images not in {config}/{split}: left out"
               if extra else None)
    warnings = [matched(judged.data, results, f"{dataset} ({config}, {split})"),
                results.scored_on(dataset, split, (config,)), outside]
    return judged, results, [w for w in warnings if w]


def calibrate(dataset: str | Path, scores: ResultsFile | Path | str, alpha: float = DEFAULT_ALPHA,
              split: str = "validation", config: str = "images", floor: float = SPREAD_FLOOR,
              selective: SelectiveOptions | None = None) -> tuple[Calibration, list[str]]:
    """`tpb calibrate`: (the calibration, warnings) from a rubric judge's results on a split of a built dataset;
    with `selective.epsilon`, its selective-judging threshold too."""
    judged, results, warnings = judged_file(dataset, scores, split, config)
    return fit(judged, one_way(results.records, results.path), dataset_identity(dataset, config, split), alpha,
               floor, selective), warnings


RATING_COLUMNS = ["image_id", "image_config", "poem_id", "rater_id"]


def rating_table(dataset: str | Path, split: str, image_config: str = "images") -> RatingTable:
    """The kept ratings of a split's images of one config, for the noise floor."""
    rubric = config_rubric(dataset, image_config, split)
    rows = list(dataset_rows(dataset, "ratings", split, [*RATING_COLUMNS, *rubric.keys]))
    return rating_table_of(rows, rubric, image_config)


def rating_table_of(rows: list[dict], rubric: Rubric, image_config: str = "images") -> RatingTable:
    """Rating rows (RATING_COLUMNS and every dimension) of one image config, as the noise floor's table."""
    keys = list(rubric.keys)
    rows = [r for r in rows if r["image_config"] == image_config]
    scores = np.array([[np.nan if r[k] is None else r[k] for k in keys] for r in rows], dtype=float).reshape(len(rows), len(keys))
    return RatingTable([r["image_id"] for r in rows], [r["poem_id"] for r in rows], [r["rater_id"] for r in rows],
                       rubric.keys, np.array([rubric.anchor_step(k) for k in keys]), scores)


def agree(dataset: str | Path, scores: ResultsFile | Path | str, split: str = "test",
          n_bootstrap: int = DEFAULT_BOOTSTRAP, seed: int = 0, config: str = "images",
          margin: float = DEFAULT_MARGIN, calibration: Calibration | None = None) -> dict:
    """The statistics of docs/statistics.md for one evaluator's results (a results file, or its path) on one config
    and split (`images`: the held-out test poems; `unseen_generator` and `song_ci`: the paper's two generalization
    tests), beside the same images' noise floor; with a `calibration`, how its intervals fare on these images
    (`calibration.evaluate_records`)."""
    results = ResultsFile.of(scores)
    if not results.pointwise:
        raise ValueError(f"{results.path} holds a pairwise judge's verdicts (tpb compare), not scores of images: "
                         "`stats.pairs.pair_agreement` compares them with people")
    data = agreement_data(dataset, results, split, config)
    warnings = [matched(data, results, f"{dataset} ({config}, {split})"),
                results.scored_on(dataset, split, (config,))]
    warning = "; ".join(w for w in warnings if w) or None
    result = {
        "evaluator": results.name, "model": results.model, "dataset": str(dataset), "config": config,
        "split": split, "scores": str(results.path), "random_weights": results.random_weights,
        "parse_status": results.status_counts(data.image_ids),
        "missing": sum(i not in results.records for i in data.image_ids), "warning": warning,
        "agreement": agreement(data, n_bootstrap=n_bootstrap, seed=seed, margin=margin),
    }
    result["noise_floor"] = noise_floor(rating_table(dataset, split, config))
    if calibration is not None:
        judged = Judged(data, [results.records.get(i) for i in data.image_ids], config_rubric(dataset, config, split),
                        str(results.path))
        result["calibration"] = evaluate_records(calibration, judged, results.records, dataset, n_bootstrap, seed)
    return result


def _fmt(value, ci=None) -> str:
    return fmt(value) + (f"  {fmt_interval(ci)}" if ci else "")


RANDOM_WEIGHTS_NOTE = ("NOTE: random weights (a tiny test model): these scores test the pipeline and measure nothing.")
LEGEND = ("human noise floor, from this split's images rated more than once: LOO dev = mean |one rater − the mean of "
          "the other raters| (beside MAE); ±1 level = share of pairs of raters within one anchor step (beside within "
          "one anchor); α = Krippendorff's alpha, interval; τ = one rater's ranking against the others', per poem")


def format_table(result: dict) -> str:
    a, nf = result["agreement"], result["noise_floor"]
    unit = a["bootstrap"]["unit"]
    lines = [RANDOM_WEIGHTS_NOTE] if result["random_weights"] else []
    if result.get("warning"):
        lines.append(f"WARNING: {result['warning']}")
    lines += [
        f"Agreement of {result['evaluator']} ({result['model']}) with human scores — {result.get('config', 'images')}, "
        f"{result['split']} split, {counted(a['n_images'], 'image')}, {counted(a['n_poems'], 'poem')}",
        f"answers: {result['parse_status']['ok']} ok, {result['parse_status']['repaired']} repaired, "
        f"{result['parse_status']['failed']} failed, {result['missing']} without a result",
        f"95% intervals: bootstrap over {unit}s, {a['bootstrap']['resamples']} resamples, seed {a['bootstrap']['seed']}",
        "",
        f"{'statistic':<24}{'value   [95% CI]':<30}{'human noise floor' if nf['enough'] else ''}",
    ]
    floor = floor_summary(nf) if nf["enough"] else None  # none: its columns are left out, the last lines say why
    for stat in ("coverage", "mae", "within_0.05", "within_one_anchor", "kendall_tau", "spearman", "ccc",
                 "pairwise_accuracy"):
        if stat in a:
            label = {"kendall_tau": f"kendall_tau ({counted(a['kendall_tau_poems'], 'poem')})",
                     "pairwise_accuracy": f"pairwise ({a['n_judged_pairs']}/{a['n_human_pairs']})"}.get(stat, stat)
            lines.append(f"{label:<24}{_fmt(a[stat], a.get(f'{stat}_ci')):<30}"
                         + (_fmt(floor.get(stat)) if floor is not None else ""))
    if "per_dimension" in a:
        lines += ["", f"{'dimension':<22}{'scored/pairs':>13}  {'MAE   [95% CI]':<27}{'within 0.05   [95% CI]':<27}"
                      + (f"{'LOO dev':>9}{'±1 level':>10}{'α':>8}" if floor is not None else "")]
        for key, d in a["per_dimension"].items():
            scored = f"{d['n_scored_pairs']}/{d['n_pairs']}"
            line = (f"{key:<22}{scored:>13}  {_fmt(d['mae'], d.get('mae_ci')):<27}"
                    f"{_fmt(d['within_0.05'], d.get('within_0.05_ci')):<27}")
            if floor is not None:
                h = nf["per_dimension"][key]
                line += (f"{_fmt(h.get('loo_deviation')):>9}{_fmt(h.get('within_one_level')):>10}"
                         f"{_fmt(h.get('krippendorff_alpha')):>8}")
            lines.append(line)
        lines += ["", f"{'dimension':<22}{'judged/pairs':>13}  {'pairwise acc.   [95% CI]':<27}"
                      f"{'SRCC   [95% CI]':<27}{'CCC   [95% CI]':<27}"]
        for key, d in a["per_dimension"].items():
            judged = f"{d['n_judged_pairs']}/{d['n_human_pairs']}"
            lines.append(f"{key:<22}{judged:>13}  {_fmt(d['pairwise_accuracy'], d.get('pairwise_accuracy_ci')):<27}"
                         f"{_fmt(d['spearman'], d.get('spearman_ci')):<27}{_fmt(d['ccc'], d.get('ccc_ci')):<27}")
    if nf["enough"]:
        lines += ["", textwrap.fill(LEGEND + ".", width=110),
                  f"noise floor: {multi_rated(nf)}; rater-vs-rest τ over "
                  f"{counted(nf['rater_vs_rest_tau_cases'], '(poem, rater) case')}"]
    else:
        lines += ["", f"noise floor: too few images rated more than once ({multi_rated(nf)}; at least "
                      f"{MIN_MULTI_RATED} needed), so none is shown"]
    if any(ZERO_WIDTH in line for line in lines):
        lines += [ZERO_WIDTH_NOTE]
    if "calibration" in result:
        where = f"{result.get('config', 'images')}/{result['split']}"
        lines += ["", format_evaluation(result["calibration"], a, where)]
    return "\n".join(line.rstrip() for line in "\n".join(lines).splitlines())  # no padding at line ends


def multi_rated(nf: dict) -> str:
    """"3 of the 12 rated images were rated more than once"."""
    n, of = nf["n_multi_rated_images"], nf["n_images"]
    return f"{n} of the {counted(of, 'rated image')} {'was' if n == 1 else 'were'} rated more than once"
