"""Why, in the report: the reasons explain mode gave for each generator's weakest dimension, and one SemJudge graph
per generator.

`explanations` computes (with `lowest_dimension_reasons` and `graph_examples`); `lay_out_explanations` lays it out
as report blocks.
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping, Sequence

from ..files import json_lines
from ..judging.results import ResultsFile
from ..numeric import fmt, mean_or_none
from ..rubric import Rubric

QUOTES_PER_GENERATOR = 3


def lowest_dimension_reasons(records: Mapping[str, dict], generator_of: Mapping[str, str], rubric: Rubric,
                             quotes: int = QUOTES_PER_GENERATOR) -> dict[str, dict]:
    """Per generator with explained results: its lowest-scored dimension (mean over its images where non-null; the
    first in rubric order on a tie), that mean, and up to `quotes` of its images' reasons for that dimension, lowest
    scores first."""
    out: dict[str, dict] = {}
    by_generator: dict[str, list[dict]] = {}
    for image_id, record in sorted(records.items()):
        if record.get("reasons") and image_id in generator_of:
            by_generator.setdefault(generator_of[image_id], []).append(record)
    for generator, explained in sorted(by_generator.items()):
        means = {k: mean_or_none([r["scores"].get(k) for r in explained]) for k in rubric.keys}
        scored = [k for k in rubric.keys if means[k] is not None]
        if not scored:
            continue
        worst = min(scored, key=lambda k: (means[k], rubric.keys.index(k)))
        cited = sorted((r for r in explained if r["reasons"].get(worst) and r["scores"].get(worst) is not None),
                       key=lambda r: (r["scores"][worst], r["image_id"]))[:quotes]
        out[generator] = {"dimension": worst, "mean": means[worst], "images": len(explained),
                          "quotes": [{"image_id": r["image_id"], "score": r["scores"][worst],
                                      "reason": r["reasons"][worst]} for r in cited]}
    return out


def graph_examples(path: Path | str, generator_of: Mapping[str, str]) -> dict[str, dict]:
    """The first graph record (`tpb explain --out`: image_id, poem_id, poem_graph, image_graph) of each generator in a
    graphs file."""
    out: dict[str, dict] = {}
    for lineno, record in json_lines(path):
        missing = [k for k in ("image_id", "image_graph") if k not in record]
        if missing:
            raise ValueError(f"{path}:{lineno}: no {missing[0]} field")
        generator = generator_of.get(record["image_id"], record["image_id"].split("/")[0])
        out.setdefault(generator, record)
    return out


def graph_rows(graph: dict) -> list[list[str]]:
    """An HSG as table rows: node, relation to the root, sign, object, interpretant, grounds, boxes."""
    root = graph["hsg_root"]

    def row(node: dict, relation: str) -> list[str]:
        s = node["semiosis"]
        boxes = "; ".join("[" + ", ".join(f"{v:g}" for v in b) + "]" for b in node.get("bounding_boxes", []))
        return [str(node["node_id"]), relation, s["sign_description"], s["inferred_object"], s["interpretant"],
                ", ".join(s["expected_grounds"]), boxes]

    return [row(root, "root")] + [row(c, c["relation_to_root"]) for c in root["children"]]


def explanations(rows: Sequence[dict], scores: Sequence[ResultsFile], graphs: Path | None,
                 rubric: Rubric) -> dict | None:
    """Explain mode's reasons for each generator's weakest dimension (from every scores file with reasons) and, with
    a graphs file, one SemJudge image graph per generator; None when there is neither."""
    generator_of = {r["image_id"]: r["generator"] for r in rows}
    explained = {}
    for scored in scores:
        if any(r.get("reasons") for r in scored.records.values()):
            explained[f"{scored.name} ({scored.path.name})"] = lowest_dimension_reasons(scored.records, generator_of,
                                                                                         rubric)
    examples = graph_examples(graphs, generator_of) if graphs else {}
    return {"reasons": explained, "graphs": examples} if explained or examples else None


def lay_out_explanations(rep, found: dict | None, rubric: Rubric) -> None:
    """The report's section on why (`explanations`'s result), when there is one."""
    if found is None:
        return
    explained, examples = found["reasons"], found["graphs"]
    rep.heading("Why — the judges' reasons and semiosis graphs")
    for name, per_generator in explained.items():
        rep.text(f"{name}: for each generator, the dimension with its lowest mean score, and the reasons the judge gave "
                 f"on up to {QUOTES_PER_GENERATOR} of its images (lowest scores first).")
        rep.table(["Generator", "Lowest dimension", "Mean", "Image", "Score", "Reason"],
                  [[g, rubric.dimension(d["dimension"]).name["en"], fmt(d["mean"], 2), q["image_id"], fmt(q["score"], 2),
                    q["reason"]] for g, d in per_generator.items() for q in d["quotes"] or [{"image_id": "—",
                                                                                          "score": None, "reason": "—"}]])
    for generator, record in examples.items():
        note = " (random weights: a plumbing check, not an interpretation)" if record.get("random_weights") else ""
        rep.text(f"SemJudge's graph of {generator}'s image `{record['image_id']}` (poem {record.get('poem_id', '?')}, "
                 f"model {record.get('model', '?')}){note}.")
        rep.table(["Node", "Relation", "Sign", "Object", "Interpretant", "Grounds", "Boxes"],
                  graph_rows(record["image_graph"]))
