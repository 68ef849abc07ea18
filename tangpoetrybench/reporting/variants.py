"""One generator under several prompt variants (`tpb generate --prompt`), side by side in the leaderboard: each
variant's quality as the judge estimates it and judged recognizability with their intervals, and whether the ranking
of the generators changes with the prompt — the paper's "operating point" question, measured.

A leaderboard row is a generator key (`images/<key>/`); `generation.json` says which pipeline and which prompt
variant made it, so the keys of one pipeline under different variants are grouped into one line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

from scipy import stats

from ..generation.prompt_variants import DEFAULT_VARIANT, VARIANTS
from ..numeric import fmt, fmt_interval


def variant_of(manifests: Sequence[Path]) -> dict[str, tuple[str, str]]:
    """generator key → (pipeline, prompt variant), from `generation.json` files (older ones, without a variant,
    made with the paper's prompt unless they name another file)."""
    out: dict[str, tuple[str, str]] = {}
    for path in manifests:
        try:
            generators = json.loads(Path(path).read_text(encoding="utf-8"))["generators"]
        except (OSError, ValueError, KeyError) as exc:
            raise ValueError(f"{path} is not a generation.json written by tpb generate ({exc})") from None
        for key, entry in generators.items():
            default = entry.get("prompt_file", "").endswith(VARIANTS[DEFAULT_VARIANT])
            out[key] = (entry["pipeline"], entry.get("prompt_variant", DEFAULT_VARIANT if default else "file"))
    return out


def _cell(row: dict) -> str:
    quality, ci = row["judge"]["quality"], row["judge"]["quality_ci"]
    text = "—" if quality is None else f"{100 * quality:.1f}" + (f" {fmt_interval(ci, 1, scale=100)}" if ci else "")
    judged = (row.get("recognizability") or {}).get("judge")
    if judged and judged["value"] is not None:
        text += f" · recog. {100 * judged['value']:.1f}" + (
            f" {fmt_interval(judged['ci'], 1, scale=100)}" if judged["ci"] else "")
    return text


def variant_comparison(board: list[dict], manifests: Sequence[Path]) -> dict:
    """Per pipeline and variant: the leaderboard's figures; per variant: the ranking of the pipelines by the judge's
    quality, and its Kendall τ-b with the default variant's ranking over the pipelines both rank."""
    rows = {r["generator"]: r for r in board}
    made = {g: v for g, v in variant_of(manifests).items() if g in rows}
    if not made:
        raise ValueError(f"no generator of {', '.join(map(str, manifests))} is on the leaderboard: score their images "
                         "(tpb score --images RAW/images) and give those results to --scores")
    order = list(VARIANTS) + ["file"]
    variants = sorted({v for _, v in made.values()}, key=order.index)
    pipelines = sorted({p for p, _ in made.values()})
    cells = {p: {v: g for g, (pp, v) in made.items() if pp == p} for p in pipelines}
    quality = {v: {p: rows[cells[p][v]]["judge"]["quality"] for p in pipelines
                   if v in cells[p] and rows[cells[p][v]]["judge"]["quality"] is not None} for v in variants}
    ranking = {v: sorted(q, key=lambda p: (-q[p], p)) for v, q in quality.items()}
    base = DEFAULT_VARIANT if DEFAULT_VARIANT in variants else variants[0]
    agreement = {}
    for v in variants:
        common = [p for p in pipelines if p in quality[v] and p in quality[base]]
        tau = stats.kendalltau([quality[v][p] for p in common], [quality[base][p] for p in common]).statistic \
            if len(common) >= 2 else float("nan")
        agreement[v] = {"pipelines": len(common), "kendall_tau_with_" + base: None if tau != tau else float(tau),
                        "same_order": [p for p in ranking[v] if p in common] == [p for p in ranking[base] if p in common]}
    return {"variants": variants, "pipelines": pipelines, "generator": cells, "ranking": ranking, "base": base,
            "agreement": agreement,
            "ranking_changes": any(not a["same_order"] for a in agreement.values())}


def lay_out_variants(rep: Any, board: list[dict], c: dict | None, label: str) -> None:
    """The comparison (`variant_comparison`'s) as a leaderboard section (in `rep`, a `report.Report`)."""
    if c is None:
        return
    rows = {r["generator"]: r for r in board}
    rep.heading(f"Prompt variants — {label} quality (×100) and judged recognizability, per variant [95 % CI]")
    rep.text("Each pipeline illustrated the same poems with each prompt variant (`tpb generate --prompt`): "
             f"{', '.join(c['variants'])}. A cell is the {label} quality, then the recognizability judge's share where "
             "one was given (--recognize), each with its interval over the leaderboard's resamples of poems.")
    rep.table(["Pipeline", *c["variants"]],
              [[p, *(_cell(rows[c["generator"][p][v]]) if v in c["generator"][p] else "—" for v in c["variants"])]
               for p in c["pipelines"]])
    base = c["base"]
    rep.table(["Variant", f"Ranking by {label} quality", f"Kendall τ with {base}", f"Same order as {base}"],
              [[v, " > ".join(c["ranking"][v]) or "—", fmt(c["agreement"][v][f"kendall_tau_with_{base}"]),
                "yes" if c["agreement"][v]["same_order"] else "no"] for v in c["variants"]])
    rep.text("The ranking of the pipelines " + ("changes with the prompt." if c["ranking_changes"] else
                                                "is the same under every variant."))
