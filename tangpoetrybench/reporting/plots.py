"""Figures: radar charts of per-dimension profiles (like the paper's Figure 2), a score scatter, a win-rate heatmap
and a reliability diagram.

Built with matplotlib's object-oriented API (no pyplot state, no display needed)."""

from __future__ import annotations

import math
from typing import Mapping

from matplotlib.figure import Figure

from ..fonts import cjk_family as cjk_font
from ..rubric import Rubric

PALETTE = ("#8c2d19", "#1f4e79", "#4f7942", "#b8860b", "#6a3d9a", "#555555")
def label(text: str, fallback: str) -> str:
    """`text` where a Chinese font can draw it, else `fallback` (never tofu boxes)."""
    if cjk_font() or text.isascii():
        return text
    return fallback


def ring_floor(profiles: Mapping[str, Mapping[str, float | None]], default: float = 0.5) -> float:
    """The inner ring of a radar over these profiles: `default`, or lower in steps of 0.1 so that no value is clipped."""
    every = [v for scores in profiles.values() for v in scores.values() if v is not None]
    return min(default, math.floor(min(every, default=default) * 10) / 10)


def colours_for(names) -> dict[str, str]:
    """A colour per name, in order: pass the same mapping to several charts and a name keeps its colour in each."""
    return {name: PALETTE[i % len(PALETTE)] for i, name in enumerate(names)}


def radar(profiles: Mapping[str, Mapping[str, float | None]], rubric: Rubric, title: str = "",
          rmin: float = 0.0, rmax: float = 1.0, size: float = 5.5, colours: Mapping[str, str] | None = None) -> Figure:
    """One polygon per profile over the rubric's dimensions; a null score leaves a gap. A value below `rmin` is drawn
    on the inner ring with a ▼ marker, so a clipped value is never mistaken for the ring's own. `colours` (from
    `colours_for`) keeps a profile's colour the same across charts; by default they go in order."""
    colours = colours or colours_for(profiles)
    keys = list(rubric.keys)
    angles = [2 * math.pi * i / len(keys) for i in range(len(keys))]
    fig = Figure(figsize=(size, size), layout="constrained")
    ax = fig.add_subplot(projection="polar")
    ax.set_theta_offset(math.pi / 2)
    ax.set_theta_direction(-1)
    for name, scores in profiles.items():
        # a value below the inner ring sits on it (polar axes would draw it through the centre)
        values = [math.nan if scores.get(k) is None else max(float(scores[k]), rmin) for k in keys]
        colour = colours[name]
        ax.plot(angles + angles[:1], values + values[:1], color=colour, linewidth=1.8, label=name)
        if not any(math.isnan(v) for v in values):  # a null is a gap, never filled in as the inner ring
            ax.fill(angles + angles[:1], values + values[:1], color=colour, alpha=0.08)
        below = [a for a, k in zip(angles, keys) if scores.get(k) is not None and float(scores[k]) < rmin]
        if below:
            ax.plot(below, [rmin] * len(below), linestyle="none", marker="v", color=colour, markersize=7)
    ax.set_xticks(angles)
    ax.set_xticklabels([rubric.dimension(k).name["en"].replace(" ", "\n", 1) for k in keys], fontsize=8)
    ax.tick_params(axis="x", pad=6)
    ax.set_ylim(rmin, rmax)
    # the ring values sit halfway between the first two spokes, on a light backing so that no line crosses them
    ax.set_rlabel_position(180 / len(keys))
    ax.tick_params(axis="y", labelsize=7)
    for tick in ax.get_yticklabels():
        tick.set_bbox({"facecolor": "white", "edgecolor": "none", "alpha": 0.8, "pad": 0.5})
        tick.set_zorder(5)
    if len(profiles) > 1:
        fig.legend(loc="outside lower center", ncols=min(len(profiles), 4), fontsize=8, frameon=False)
    if title:
        ax.set_title(title, fontsize=10, pad=18, **({"fontfamily": cjk_font()} if cjk_font() else {}))
    return fig


def scatter(x: list[float], y: list[float], xlabel: str, ylabel: str, title: str = "") -> Figure:
    fig = Figure(figsize=(4.5, 4.5), layout="constrained")
    ax = fig.add_subplot()
    ax.scatter(x, y, s=14, alpha=0.6, color=PALETTE[1])
    lo, hi = min(x + y + [0.0]), max(x + y + [1.0])
    ax.plot([lo, hi], [lo, hi], color="#999999", linewidth=0.8, linestyle="--")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title, fontsize=10)
    return fig


def reliability_diagram(reliability: Mapping[str, Mapping], title: str = "") -> Figure:
    """Accuracy against mean confidence per bin, before and after temperature scaling (`stats.calibration
    .reliability`'s bins, the empty ones left out), beside the diagonal of perfect calibration."""
    fig = Figure(figsize=(4.5, 4.5), layout="constrained")
    ax = fig.add_subplot()
    ax.plot([0, 1], [0, 1], color="#999999", linewidth=0.8, linestyle="--")
    for (name, found), colour in zip(reliability.items(), PALETTE):
        bins = [b for b in found["bins"] if b["n"]]
        if bins:
            ax.plot([b["confidence"] for b in bins], [b["accuracy"] for b in bins], marker="o", color=colour,
                    label=f"{name} (ECE {found['ece']:.3f})")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_xlabel("confidence of the most likely anchor")
    ax.set_ylabel("share where it is the people's anchor")
    ax.legend(loc="upper left", fontsize=8)
    if title:
        ax.set_title(title, fontsize=10)
    return fig


def heatmap(matrix: list[list[float | None]], labels: list[str], title: str = "") -> Figure:
    """A win-rate matrix: the share of their pairs that the row's generator won against the column's, in each cell
    (blank where two generators never met)."""
    n = len(labels)
    fig = Figure(figsize=(1.2 + 0.9 * n, 0.9 + 0.8 * n), layout="constrained")
    ax = fig.add_subplot()
    values = [[math.nan if v is None else float(v) for v in row] for row in matrix]
    image = ax.imshow(values, cmap="RdBu", vmin=0.0, vmax=1.0)
    for i, row in enumerate(values):
        for j, v in enumerate(row):
            if not math.isnan(v):
                ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=8,
                        color="white" if abs(v - 0.5) > 0.3 else "black")
    ax.set_xticks(range(n), labels, rotation=30, ha="right", fontsize=8)
    ax.set_yticks(range(n), labels, fontsize=8)
    ax.set_xlabel("against")
    ax.set_ylabel("winner")
    fig.colorbar(image, ax=ax, shrink=0.8, label="win rate")
    if title:
        ax.set_title(title, fontsize=10)
    return fig
