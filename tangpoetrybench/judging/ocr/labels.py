"""Text labels from the `text-ocr` evaluator: a draft of the raw release's `text_labels.csv` for people to
adjudicate (`tpb build RAW --text-labels-from ocr.jsonl`), and the OCR's Table 3 beside the adjudicated one, with
the precision and recall of each issue type (`tpb report --ocr ocr.jsonl`, `benchmarks/ocr_text.py`).

The draft never replaces the release's own `text_labels.csv`: it is written beside it, as `text_labels.draft.csv`
(the same columns, so it passes the release's validation once renamed; cells a spreadsheet would run as formulas are
quoted, `files.quote_cell`, and read back as they were) with the OCR's evidence for each row in
`text_labels.draft.evidence.jsonl` (verdict, matched poem characters, regions with box, text and confidence).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from ...errors import DataError, Problem
from ...files import refuse_links, write_csv, write_file
from ..records import TextResult
from ..results import ResultsFile
from ...dataset.raw_release import ISSUE_TYPES, TEXT_LABEL_COLUMNS, read_release

DRAFT_NAME = "text_labels.draft.csv"
EVIDENCE_NAME = "text_labels.draft.evidence.jsonl"
ISSUES = tuple(t for t in ISSUE_TYPES if t != "none")  # leakage, fake_characters


def read_ocr(ocr: ResultsFile | Path | str) -> dict[str, dict]:
    """The records of a text task's file (`tpb score --evaluator text-ocr`), or its path, by image_id (failed ones
    included)."""
    results = ResultsFile.of(ocr)
    if results.task != TextResult.task:
        name = ocr_evaluator()
        raise ValueError(f"{results.path} holds {results.name} results, not {name} ones (the {TextResult.task} "
                         f"task's): make them with `tpb score --evaluator {name} ... --out {results.path}`")
    return results.records


def ocr_evaluator() -> str:
    """The evaluator that answers the text task (text-ocr), by the registry's name for it."""
    from ..registry import evaluator_names

    return evaluator_names(TextResult.task)[0]


def ocr_issue_type(record: dict) -> str | None:
    """none | leakage | fake_characters for a scored record; None for a failed one (no evidence)."""
    evidence = record.get("evidence")
    return None if record.get("parse_status") == "failed" or not evidence else evidence["issue_type"]


@dataclass
class DraftSummary:
    draft: Path
    evidence: Path
    rows: int
    issues: dict[str, int]  # issue_type -> rows
    failed: list[str] = field(default_factory=list)  # image_ids whose OCR failed: not in the draft
    missing: int = 0  # images of the release without an OCR result


def draft_text_labels(raw: Path | str, ocr: Path | str, overwrite: bool = False) -> DraftSummary:
    """Write `RAW/text_labels.draft.csv` and its evidence from the OCR results of the release's images."""
    raw = Path(raw)
    draft, evidence_path = raw / DRAFT_NAME, raw / EVIDENCE_NAME
    for path in (draft, evidence_path):
        refuse_links(path, raw)  # a link planted in the release would send the draft anywhere, even with --overwrite
        if path.exists() and not overwrite:
            raise FileExistsError(f"{path} exists (a draft being adjudicated?): move it away, or pass --overwrite")
    release = read_release(raw)
    records = read_ocr(ocr)
    unknown = [Problem(str(ocr), f"no image {image_id!r} in {raw}", field="image_id") for image_id in records
               if image_id not in release.images]
    if unknown:
        raise DataError(unknown + [Problem(str(ocr), f"score the release's own images: tpb score --images {raw}/images "
                                                     f"--poems {raw}/poems.jsonl --evaluator {ocr_evaluator()} "
                                                     f"--out {ocr}")])
    rows, evidence, failed = [], [], []
    for image_id in sorted(release.images):
        record = records.get(image_id)
        if record is None:
            continue
        issue = ocr_issue_type(record)
        if issue is None:
            failed.append(image_id)
            continue
        generator, poem_id = image_id.split("/", 1)
        rows.append({"generator": generator, "poem_id": poem_id, "text_issue": int(issue != "none"), "issue_type": issue})
        evidence.append({"generator": generator, "poem_id": poem_id, **record["evidence"]})
    write_csv(draft, TEXT_LABEL_COLUMNS, rows, root=raw)
    write_file(evidence_path, "".join(json.dumps(e, ensure_ascii=False) + "\n" for e in evidence), root=raw)
    issues = {t: sum(r["issue_type"] == t for r in rows) for t in ISSUES}
    return DraftSummary(draft, evidence_path, len(rows), issues, failed, len(release.images) - len(records))


@dataclass
class IssueAgreement:
    """One issue type, over the images with both an adjudicated label and an OCR result."""

    human: int
    ocr: int
    both: int

    @property
    def precision(self) -> float | None:
        return self.both / self.ocr if self.ocr else None

    @property
    def recall(self) -> float | None:
        return self.both / self.human if self.human else None

    def to_json(self) -> dict:
        return {"human": self.human, "ocr": self.ocr, "both": self.both, "precision": self.precision,
                "recall": self.recall}


def issue_agreement(human: dict[str, str], ocr: dict[str, str]) -> dict[str, IssueAgreement]:
    """Per issue type (and `any` for any text issue), over images in both: `human` and `ocr` map image_id to
    none | leakage | fake_characters."""
    shared = sorted(set(human) & set(ocr))

    def has(label: str, issue: str) -> bool:
        return label != "none" if issue == "any" else label == issue

    return {issue: IssueAgreement(human=sum(has(human[i], issue) for i in shared),
                                  ocr=sum(has(ocr[i], issue) for i in shared),
                                  both=sum(has(human[i], issue) and has(ocr[i], issue) for i in shared))
            for issue in (*ISSUES, "any")}


def issue_counts(labels: dict[str, str], generators: list[str]) -> dict[str, dict[str, int]]:
    """Table 3's counts per generator: leakage, fake_characters, total and labelled images."""
    table = {}
    for g in generators:
        mine = [t for image_id, t in labels.items() if image_id.split("/", 1)[0] == g]
        table[g] = {**{t: mine.count(t) for t in ISSUES}, "total": sum(t != "none" for t in mine),
                    "labelled_images": len(mine)}
    return table


def ocr_table3(rows: list[dict], ocr: ResultsFile | Path | str) -> dict:
    """The OCR's Table 3 beside the adjudicated one (`rows`: the report's image rows): counts per generator, the
    OCR's verdicts, and each issue type's agreement with the adjudicated labels."""
    results = ResultsFile.of(ocr)
    records = read_ocr(results)
    ocr = {i: t for i, r in records.items() if (t := ocr_issue_type(r)) is not None}
    human = {r["image_id"]: r["text_issue_type"] for r in rows if r["text_issue"] is not None}
    generators = sorted({r["generator"] for r in rows})
    in_report = {r["image_id"] for r in rows}
    ocr = {i: t for i, t in ocr.items() if i in in_report}
    verdicts: dict[str, int] = {}
    for image_id in ocr:
        verdict = records[image_id]["evidence"]["verdict"]
        verdicts[verdict] = verdicts.get(verdict, 0) + 1
    return {"scores": str(results.path), "by_generator": issue_counts(ocr, generators), "verdicts": verdicts,
            "agreement": {k: v.to_json() for k, v in issue_agreement(human, ocr).items()},
            "images_compared": len(set(human) & set(ocr))}
