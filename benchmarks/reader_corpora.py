"""The answer readers on the project's answer corpora: for each corpus, how many answers read exactly as asked
(`ok`), read with repairs (`repaired`), or failed; of the failed, how many had a value a careful person reads
(`lost`: the repair round asks again); how many reads are **confident-wrong** (a value other than the labelled
one, or any value where the label says the answer admits no one reading); and, for scores, how many are `partial`
(some dimension that always applies left null, so the answer's quality is null, every score read being right).

The corpora (tests/data/): `parser_cases.jsonl` (scores), `reasons_cases.jsonl` (explain mode's scores),
`winner_cases.jsonl`, `letter_cases.jsonl`, `handwritten_answers.jsonl` (hand-written answers of all three tasks,
written before the issue-44 readers), `handwritten_redteam.jsonl` (hand-written against those readers' design,
before they were run on them) and `redteam_i44b.jsonl` (the second red team's, written from the docs against the
first round's readers, labelled before running). A row's label is its `intended` value where it has one, else the
reading its table expects (`scores` or `expected`), `null` or "failed" meaning no one reading.

It uses only the readers' public functions, whose signatures have not changed, so the same script measures any
version of the package: run it with `PYTHONPATH` pointing at an older checkout for the figures before a change.

    python benchmarks/reader_corpora.py                    # the table
    python benchmarks/reader_corpora.py --wrong            # and every confident-wrong read
    python benchmarks/reader_corpora.py --speed            # and answers/s on one core (the schema's object, and
                                                           # the corpora's answers of every kind)
    PYTHONPATH=/path/to/old/checkout python benchmarks/reader_corpora.py --data tests/data
"""

from __future__ import annotations

import argparse
import json
import math
from collections import Counter
from pathlib import Path

from tangpoetrybench.judging.reading import excludable, parse_answer, parse_letter, parse_pair_answer
from tangpoetrybench.rubric import load_rubric

DATA = Path(__file__).resolve().parents[1] / "tests" / "data"
CORPORA = {"parser_cases.jsonl": "scores", "reasons_cases.jsonl": "explain", "winner_cases.jsonl": "winner",
           "letter_cases.jsonl": "letter", "handwritten_answers.jsonl": None,
           "handwritten_redteam.jsonl": None, "redteam_i44b.jsonl": None}  # None: each row names its task
COLUMNS = ("n", "ok", "repaired", "failed", "lost", "partial", "wrong")


def label(row: dict):
    """The value a careful person reads from the row's answer, or None where it admits no one reading."""
    if "intended" in row:
        return row["intended"]
    if "expected" in row:
        return None if row["expected"] == "failed" else row["expected"]
    scores = row.get("scores")
    return None if scores == "failed" or row.get("status") == "failed" else scores


def read(task: str, row: dict, rubric) -> tuple[object, str]:
    """(the value read, or None; the reader's status) of one answer."""
    if task in ("scores", "explain"):
        parsed = parse_answer(row["answer"], rubric, explain=task == "explain")
        return (None if parsed.status == "failed" else [parsed.scores[k] for k in rubric.keys]), parsed.status
    if task == "winner":
        parsed = parse_pair_answer(row["answer"])
        return parsed.winner, parsed.status
    parsed = parse_letter(row["answer"], row.get("n_options", 4), row.get("titles"))
    return parsed.letter, parsed.status


def verdict(task: str, got, want, rubric) -> str | None:
    """None where a read value is the labelled one; "wrong" where it is another, or where the label says no one
    reading; "partial" for scores read without some dimensions that always apply (their quality is null), every
    score read being the labelled one. A dimension that can be excluded read as null where it has a score is wrong:
    it silently changes the quality."""
    if want is None:
        return "wrong"
    if task not in ("scores", "explain"):
        return None if got == want else "wrong"
    missing = False
    for key, g, w in zip(rubric.keys, got, want):
        if g is None and w is not None and not excludable(rubric, key):
            missing = True
        elif (g is None) != (w is None) or g is not None and not math.isclose(g, w, abs_tol=1e-6):
            return "wrong"
    return "partial" if missing else None


def measure(data: Path) -> tuple[list[dict], list[str]]:
    rubric = load_rubric("tang")
    rows, wrong = [], []
    for name, fixed in CORPORA.items():
        path = data / name
        if not path.exists():
            continue
        counts: dict[str, Counter] = {}
        for line in path.read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            row = json.loads(line)
            task = fixed or row["task"]
            got, status = read(task, row, rubric)
            want = label(row)
            c = counts.setdefault(task, Counter())
            c["n"] += 1
            c[status] += 1
            c["lost"] += got is None and want is not None
            if got is not None and (found := verdict(task, got, want, rubric)):
                c[found] += 1
                wrong.append(f"{name} [{task}] {row['case']!r}: {found}, read {got!r}, labelled {want!r}")
        rows += [{"corpus": name, "task": task, **{k: c[k] for k in COLUMNS}} for task, c in counts.items()]
    return rows, wrong


def speed(data: Path, seconds: float = 3.0) -> dict[str, float]:
    """Answers read per second on this core: the schema's object (what a constrained or a structured-output judge
    answers), and the scores corpora's answers of every kind, each read in turn."""
    import time

    from tangpoetrybench.judging.prompt import format_answer

    rubric = load_rubric("tang")
    exact = format_answer({k: 0.5 for k in rubric.keys}, rubric)
    mixed = [json.loads(line)["answer"] for name in ("parser_cases.jsonl", "handwritten_answers.jsonl")
             for line in (data / name).read_text(encoding="utf-8").splitlines() if line.strip()]
    out = {}
    for label_, answers in (("schema object", [exact]), ("scores corpora", mixed)):
        n, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            for answer in answers:
                parse_answer(answer, rubric)
            n += len(answers)
        out[label_] = n / (time.perf_counter() - start)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DATA, help="the folder of the corpora (default: tests/data)")
    parser.add_argument("--wrong", action="store_true", help="list every confident-wrong and partial read")
    parser.add_argument("--speed", action="store_true", help="also measure answers/s on one core")
    parser.add_argument("--out", type=Path, help="write the figures as JSON here too")
    args = parser.parse_args()
    rows, wrong = measure(args.data)
    print("| corpus | task | answers | ok | repaired | failed | of them lost | partial | confident-wrong |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['corpus']} | {r['task']} | " + " | ".join(str(r[k]) for k in COLUMNS) + " |")
    print("| all | | " + " | ".join(str(sum(r[k] for r in rows)) for k in COLUMNS) + " |")
    if args.wrong:
        print("\n".join(["", *wrong]))
    rates = speed(args.data) if args.speed else {}
    for what, rate in rates.items():
        print(f"parse_answer, {what}: {rate:,.0f} answers/s on one core")
    if args.out:
        args.out.write_text(json.dumps({"rows": rows, "wrong": wrong, "answers_per_s": rates}, ensure_ascii=False,
                                       indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
