"""`tpb report`: the paper's human-data analysis, recomputed from any built dataset.

Writes `report.md`, a self-contained `report.html` (figures embedded), every figure as PNG under
`figures/`, and `numbers.json` with every number shown. The report is a list of blocks (headings,
paragraphs, tables, figures) rendered twice, to Markdown and to HTML, so both say the same.

Definitions where the paper leaves room (also stated in the report):
- Table 2 and the ranking use the `images` config, all splits; a generator's score on a dimension is the
  mean over the images where it is non-null; intervals resample images within each generator.
- "Strong" generators (the zoomed radar) are those within 10 quality points of the best.
- Poem difficulty is the mean overall impression over a poem's images; poem length counts Han characters.
- "Highly rated" images have quality ≥ 0.9.
"""

from __future__ import annotations

import base64
import html
import io
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from scipy import stats

from .agreement import DEFAULT_BOOTSTRAP, agreement
from .dataset_io import dataset_rows
from .evaluation import agreement_data, matched, rating_table, read_scores
from .noise import floor_summary, noise_floor
from .numeric import fmt, fmt_ci, mean_or_none
from .plots import radar, scatter
from .rubric import rubric_for_tradition

STRONG_GAP = 0.10
HIGH_QUALITY = 0.9
SPLITS = ("train", "validation", "test")


@dataclass
class Report:
    blocks: list[tuple] = field(default_factory=list)  # (kind, payload)
    numbers: dict = field(default_factory=dict)
    figures: dict[str, bytes] = field(default_factory=dict)  # file name -> PNG

    def heading(self, text: str, level: int = 2) -> None:
        self.blocks.append(("heading", (level, text)))

    def text(self, text: str) -> None:
        self.blocks.append(("text", text))

    def table(self, header: list[str], rows: list[list[str]]) -> None:
        self.blocks.append(("table", (header, rows)))

    def figure(self, name: str, fig, caption: str) -> None:
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png", dpi=110)
        self.figures[name] = buffer.getvalue()
        self.blocks.append(("figure", (name, caption)))


def _pct(x: float | None) -> str:
    return "—" if x is None or not np.isfinite(x) else f"{100 * x:.1f}"


def _spearman(x, y) -> tuple[float | None, int]:
    pairs = [(a, b) for a, b in zip(x, y) if a is not None and b is not None]
    if len(pairs) < 3:
        return None, len(pairs)
    a, b = zip(*pairs)
    if np.ptp(a) == 0 or np.ptp(b) == 0:
        return None, len(pairs)
    return float(stats.spearmanr(a, b).statistic), len(pairs)


def bootstrap_means(values: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """Means of `n` resamples (with replacement) of `values`."""
    if len(values) == 0:
        return np.full(n, np.nan)
    return values[rng.integers(0, len(values), size=(n, len(values)))].mean(axis=1)


def load_rows(dataset: str | Path, config: str, columns: list[str]) -> list[dict]:
    rows = []
    for split in SPLITS:
        try:
            rows += [dict(r, split=split) for r in dataset_rows(dataset, config, split, columns)]
        except ValueError:  # a split the dataset does not have
            continue
    return rows


def is_synthetic(dataset: str | Path) -> bool:
    from huggingface_hub import DatasetCard

    path = Path(dataset) / "README.md"
    card = DatasetCard.load(path if path.is_file() else str(dataset), repo_type="dataset")
    return "synthetic" in (card.data.tags or [])


def build_report(dataset: str | Path, scores: list[Path] = (), split: str = "test",
                 n_bootstrap: int = DEFAULT_BOOTSTRAP, seed: int = 0, ocr: Path | None = None) -> Report:
    rubric = rubric_for_tradition("tang")
    keys = list(rubric.keys)
    rows = load_rows(dataset, "images", ["image_id", "poem_id", "generator", "poem", *keys, "quality",
                                         "recognizability", "text_issue", "text_issue_type", "face_avoidance"])
    ratings = load_rows(dataset, "ratings", ["rater_group", "phase1_correct", "image_config"])
    generators = sorted({r["generator"] for r in rows})
    rng = np.random.default_rng(seed)
    rep = Report()
    rep.numbers["dataset"] = str(dataset)
    rep.numbers["n_images"] = len(rows)
    rep.numbers["generators"] = generators
    rep.heading("TangPoetryBench report", 1)
    if is_synthetic(dataset):
        rep.numbers["synthetic"] = True
        rep.text("**Synthetic data.** This dataset was made by `tpb demo-release`: its images and ratings are "
                 "simulated. The numbers below test the analysis; they describe no real model or rater.")
    rep.text(f"Dataset `{dataset}`, config `images`, all splits: {len(rows)} images of "
             f"{len({r['poem_id'] for r in rows})} poems by {len(generators)} generators. "
             f"Intervals: 95 %, {n_bootstrap:,} bootstrap resamples (seed {seed}).")

    # Table 2
    row_keys = keys + ["quality", "recognizability"]
    table2, table2_ci = {g: {} for g in generators}, {g: {} for g in generators}
    for g in generators:
        for key in row_keys:
            values = np.array([r[key] for r in rows if r["generator"] == g and r[key] is not None], dtype=float)
            if len(values):
                boot = bootstrap_means(values, n_bootstrap, rng)
                table2[g][key] = round(100 * float(values.mean()), 4)
                table2_ci[g][key] = [round(100 * float(np.percentile(boot, 2.5)), 4),
                                     round(100 * float(np.percentile(boot, 97.5)), 4)]
            else:
                table2[g][key], table2_ci[g][key] = None, None
    avg = {k: mean_or_none([table2[g][k] for g in generators]) for k in row_keys}
    rep.numbers.update(table2=table2, table2_ci=table2_ci, table2_avg=avg)
    rep.heading("Table 2 — human scores by generator (×100)")
    rep.text("Mean over the images where the dimension applies; best per row in bold; [95 % interval over images].")
    body = []
    for key in row_keys:
        present = [table2[g][key] for g in generators if table2[g][key] is not None]
        best = max(present) if present else None
        cells = []
        for g in generators:
            v, ci = table2[g][key], table2_ci[g][key]
            cell = "—" if v is None else f"{v:.1f} [{ci[0]:.1f}, {ci[1]:.1f}]"
            cells.append(f"**{cell}**" if v is not None and v == best else cell)
        name = rubric.dimension(key).name["en"] if key in keys else key.capitalize()
        body.append([name, *cells, fmt(avg[key], 1)])
    rep.table(["Dimension", *generators, "Avg"], body)

    # Figure 2
    profiles = {g: {k: None if table2[g][k] is None else table2[g][k] / 100 for k in keys} for g in generators}
    quality = {g: table2[g]["quality"] or 0.0 for g in generators}
    best_q = max(quality.values()) if quality else 0.0
    strong = [g for g in generators if quality[g] / 100 >= best_q / 100 - STRONG_GAP]
    rep.numbers["strong_generators"] = strong
    rep.heading("Figure 2 — profiles")
    every = [v for g in generators for v in profiles[g].values() if v is not None]
    floor = min(0.5, math.floor(min(every, default=0.5) * 10) / 10)  # never below the lowest value: nothing clipped
    rep.figure("figure2a_all.png", radar(profiles, rubric, f"All generators ({floor:.1f}–1)", rmin=floor),
               f"All generators on one scale ({floor:.1f} to 1, low enough for every value).")
    zoom = [v for g in strong for v in profiles[g].values() if v is not None]
    rmin = max(0.0, np.floor((min(zoom) if zoom else 0.5) * 50 - 1) / 50)
    rep.figure("figure2b_strong.png", radar({g: profiles[g] for g in strong}, rubric,
                                            f"Strong generators ({rmin:.2f}–1)", rmin=rmin),
               f"The strong generators (within {STRONG_GAP * 100:.0f} quality points of the best), zoomed.")

    # Table 3
    table3 = {}
    for g in generators:
        labelled = [r for r in rows if r["generator"] == g and r["text_issue"] is not None]
        table3[g] = {"leakage": sum(r["text_issue_type"] == "leakage" for r in labelled),
                     "fake_characters": sum(r["text_issue_type"] == "fake_characters" for r in labelled),
                     "total": sum(r["text_issue"] == 1 for r in labelled), "labelled_images": len(labelled)}
    rep.numbers["table3"] = table3
    rep.heading("Table 3 — text issues (adjudicated labels)")
    rep.table(["Generator", "Leakage", "Fake characters", "Total", "Labelled images"],
              [[g, *(str(table3[g][k]) for k in ("leakage", "fake_characters", "total", "labelled_images"))]
               for g in generators])
    if ocr is not None:  # text-ocr results: the OCR's Table 3 beside it (tangpoetrybench.text_labels)
        from .text_labels import report_ocr_table3

        report_ocr_table3(rep, rows, ocr)

    # Table 5 and the noise floor
    nf = noise_floor(rating_table_all(dataset))
    rep.numbers["noise_floor"] = nf
    rep.heading("Table 5 — agreement between raters (multi-rated images)")
    rep.text(f"{nf['n_multi_rated_images']} multi-rated images. Within one level: the share of pairs of raters "
             "of an image whose scores differ by at most one anchor step; leave-one-out deviation: mean |one rater "
             "− mean of the others|; Krippendorff's α on the interval scale.")
    rep.table(["Dimension", "Pairs", "Within one level (%)", "LOO deviation", "α"],
              [[rubric.dimension(k).name["en"], str(d["n_pairs"]), _pct(d["within_one_level"]),
                fmt(d["loo_deviation"]), fmt(d["krippendorff_alpha"])] for k, d in nf["per_dimension"].items()])

    _findings(rep, rows, ratings, keys, generators, rubric, n_bootstrap, rng)
    for path in scores:
        _table4(rep, dataset, Path(path), split, n_bootstrap, seed)
    return rep


def rating_table_all(dataset: str | Path):
    """The kept ratings of every split's `images` config, in one table."""
    tables = []
    for split in SPLITS:
        try:
            tables.append(rating_table(dataset, split))
        except ValueError:
            continue
    first = tables[0]
    return type(first)(
        units=[u for t in tables for u in t.units], poems=[p for t in tables for p in t.poems],
        raters=[r for t in tables for r in t.raters], keys=first.keys, anchors=first.anchors,
        scores=np.concatenate([t.scores for t in tables]),
    )


def _findings(rep: Report, rows, ratings, keys, generators, rubric, n_bootstrap, rng) -> None:
    f: dict = {}
    rep.heading("Findings of the paper's §4, recomputed")

    drivers = {k: _spearman([r[k] for r in rows], [r["overall_impression"] for r in rows]) for k in keys
               if k != "overall_impression"}
    f["spearman_with_overall"] = {k: v for k, (v, _) in drivers.items()}
    rep.heading("What drives overall impression", 3)
    rep.table(["Dimension", "Spearman ρ with overall impression", "Images"],
              [[rubric.dimension(k).name["en"], fmt(v), str(n)]
               for k, (v, n) in sorted(drivers.items(), key=lambda kv: -(kv[1][0] or -2))])

    by_poem: dict[str, list[dict]] = {}
    for r in rows:
        by_poem.setdefault(r["poem_id"], []).append(r)
    difficulty = {p: mean_or_none([r["overall_impression"] for r in rs]) for p, rs in by_poem.items()}
    difficulty = {p: d for p, d in difficulty.items() if d is not None}
    length = {p: sum("\u4e00" <= c <= "\u9fff" for c in rs[0]["poem"]) for p, rs in by_poem.items()}
    rho_len, n_len = _spearman([difficulty[p] for p in difficulty], [length[p] for p in difficulty])
    ordered = sorted(difficulty, key=difficulty.get)
    q = max(1, len(ordered) // 4)
    hard, easy = set(ordered[:q]), set(ordered[-q:])
    gap = {k: (mean_or_none([r[k] for p in easy for r in by_poem[p]]) or 0) - (mean_or_none([r[k] for p in hard for r in by_poem[p]]) or 0)
           for k in keys}
    f["difficulty"] = {"min": min(difficulty.values(), default=None), "max": max(difficulty.values(), default=None),
                       "spearman_with_length": rho_len, "poems": n_len, "quartile_poems": q,
                       "easy_minus_hard_gap": gap}
    rep.heading("What makes a poem hard", 3)
    rep.text(f"Per-poem difficulty (mean overall impression over the poem's images) ranges from "
             f"{fmt(f['difficulty']['min'], 2)} to {fmt(f['difficulty']['max'], 2)}; its Spearman ρ with poem length "
             f"(Han characters) is {fmt(rho_len)} over {n_len} poems. Easiest minus hardest quartile ({q} poems each):")
    rep.table(["Dimension", "Gap (easy − hard)"], [[rubric.dimension(k).name["en"], fmt(v)]
                                                  for k, v in sorted(gap.items(), key=lambda kv: -kv[1])])

    rho_q, n_q = _spearman([r["recognizability"] for r in rows], [r["quality"] for r in rows])
    rho_o, _ = _spearman([r["recognizability"] for r in rows], [r["overall_impression"] for r in rows])
    high = [r["recognizability"] for r in rows if r["quality"] is not None and r["quality"] >= HIGH_QUALITY]
    f["recognizability"] = {"spearman_with_quality": rho_q, "spearman_with_overall": rho_o, "images": n_q,
                            "mean_of_highly_rated": mean_or_none(high), "highly_rated_images": len(high)}
    rep.heading("Recognizing a poem is not illustrating it well", 3)
    rep.text(f"Per image, recognizability has Spearman ρ {fmt(rho_q)} with quality and {fmt(rho_o)} with overall "
             f"impression ({n_q} images). Images rated highly (quality ≥ {HIGH_QUALITY}) have mean recognizability "
             f"{fmt(f['recognizability']['mean_of_highly_rated'])} ({len(high)} images).")

    values = {g: np.array([r["quality"] for r in rows if r["generator"] == g and r["quality"] is not None]) for g in generators}
    ranked = [g for g in generators if len(values[g])]  # a generator without a kept rating has no mean to rank
    boots = np.stack([bootstrap_means(values[g], n_bootstrap, rng) for g in ranked]) if ranked else np.zeros((0, 0))
    first = {g: float(np.mean(np.argmax(boots, axis=0) == ranked.index(g))) if g in ranked else None for g in generators}
    last = {g: float(np.mean(np.argmin(boots, axis=0) == ranked.index(g))) if g in ranked else None for g in generators}
    f["ranking_stability"] = {"first": first, "last": last, "resamples": n_bootstrap}
    rep.heading("How stable is the ranking", 3)
    rep.text("Share of bootstrap resamples (images resampled within each generator) in which each generator "
             "has the highest and the lowest mean quality.")
    rep.table(["Generator", "Ranks first (%)", "Ranks last (%)"],
              [[g, _pct(first[g]), _pct(last[g])] for g in generators])

    face = {g: mean_or_none([r["face_avoidance"] for r in rows if r["generator"] == g]) for g in generators}
    emotion = {g: mean_or_none([r["emotional_resonance"] for r in rows if r["generator"] == g]) for g in generators}
    f["face_avoidance"] = {g: {"rate": face[g], "emotional_resonance": emotion[g]} for g in generators}
    rep.heading("Emotion and face avoidance", 3)
    rep.text("Face avoidance: the share of applicable emotion ratings answering \"emotion expected but not visible\".")
    rep.table(["Generator", "Face avoidance (%)", "Emotional resonance (×100)"],
              [[g, _pct(face[g]), _pct(emotion[g])] for g in generators])

    accuracy = {}
    for group in ("expert", "crowd"):
        answers = [r["phase1_correct"] for r in ratings if r["rater_group"] == group and r["image_config"] == "images"
                   and r["phase1_correct"] is not None]
        accuracy[group] = {"accuracy": mean_or_none([float(a) for a in answers]), "answers": len(answers)}
    f["phase1_accuracy_by_group"] = accuracy
    rep.heading("Experts and crowd workers", 3)
    rep.table(["Rater group", "Phase-1 accuracy (%)", "Answers"],
              [[g, _pct(a["accuracy"]), str(a["answers"])] for g, a in accuracy.items()])
    rep.numbers["findings"] = f


def _table4(rep: Report, dataset, path: Path, split: str, n_bootstrap: int, seed: int) -> None:
    evaluator, records = read_scores(path)
    data = agreement_data(dataset, records, split)
    warning = matched(data, records, path, f"the {split} split")
    result = agreement(data, n_bootstrap=n_bootstrap, seed=seed)
    random_weights = any(r.get("random_weights") for r in records.values())
    rep.numbers.setdefault("table4", {})[evaluator] = {**result, "scores": str(path), "random_weights": random_weights}
    rep.heading(f"Table 4 — {evaluator} against the human scores ({split} split)")
    if random_weights:
        rep.text("**Random weights.** These scores come from a tiny test model: they check the pipeline and measure nothing.")
    if warning:
        rep.text(f"**Warning.** {warning}.")
    floor = floor_summary(noise_floor(rating_table(dataset, split)))
    rows = []
    for stat in ("coverage", "mae", "within_0.05", "within_one_anchor", "kendall_tau", "spearman"):
        if stat in result:
            ci = result.get(f"{stat}_ci")
            rows.append([stat, fmt(result[stat]), fmt_ci(ci), fmt(floor[stat]) if stat in floor else ""])
    rep.table(["Statistic", "Value", "95 % CI (poems)", "Human noise floor"], rows)
    ok = np.isfinite(data.pred_quality) & np.isfinite(data.human_quality)
    if ok.any():
        rep.figure(f"scatter_{evaluator}.png", scatter(list(data.human_quality[ok]), list(data.pred_quality[ok]),
                                                        "human quality", f"{evaluator} quality"),
                   f"{evaluator}: predicted against human quality, one point per image.")


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
    """Markdown's **bold** and `code` in a line of text, as HTML."""
    text = html.escape(text)
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
    style = ("body{font-family:system-ui,sans-serif;max-width:980px;margin:2em auto;padding:0 1em;color:#222}"
             "table{border-collapse:collapse;margin:1em 0}th,td{border:1px solid #ccc;padding:4px 8px;text-align:right}"
             "th:first-child,td:first-child{text-align:left}img{max-width:100%}figcaption{color:#555;font-size:90%}")
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>TangPoetryBench report</title>'
            f"<style>{style}</style></head><body>\n" + "\n".join(parts) + "\n</body></html>\n")


def write_report(rep: Report, out: Path | str) -> Path:
    out = Path(out)
    (out / "figures").mkdir(parents=True, exist_ok=True)
    for name, png in rep.figures.items():
        (out / "figures" / name).write_bytes(png)
    (out / "report.md").write_text(render_markdown(rep), encoding="utf-8")
    (out / "report.html").write_text(render_html(rep), encoding="utf-8")
    (out / "numbers.json").write_text(json.dumps(rep.numbers, ensure_ascii=False, indent=1, default=float) + "\n",
                                      encoding="utf-8")
    return out
