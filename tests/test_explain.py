"""Explain mode: the rubric question answered with a one-sentence reason per dimension. Fast tests check the prompt,
the schema, the parser and the decoding grammar; slow ones run the tiny Qwen3-VL with constrained decoding and a
real `transformers serve` behind the fault proxy (whose answers the proxy rewrites: random weights never write a
whole answer by themselves)."""

import json

import pytest
from PIL import Image

from tangpoetrybench.judging.constrained import Grammar, state
from tangpoetrybench.judging.evaluators import load_evaluator
from tangpoetrybench.judging.evaluators.base import ScoresResult, ScoringItem
from tangpoetrybench.judging.reading import parse_answer
from tangpoetrybench.judging.prompt import MAX_REASON_CHARS, answer_schema, format_answer, system_prompt
from tangpoetrybench.poems import sample_poems
from tangpoetrybench.rubric import load_rubric

TANG = load_rubric("tang")
SCORES = {k: 0.5 for k in TANG.keys} | {"scene_consistency": None, "safety": 1.0, "core_imagery": 0.25}
REASONS = {k: f"画中{k}之处如此。" for k in TANG.keys}


def test_the_explain_prompt_is_the_rubric_question_with_a_reasons_object():
    plain, poem, en = system_prompt(TANG), system_prompt(TANG, "poem"), system_prompt(TANG, "en")
    head = plain[:plain.index("Answer format")]
    assert poem.startswith(head) and en.startswith(head)  # the same rubric, the same words: only the format grows
    assert '"reasons"' in poem and "Chinese, the poem's language" in poem and "one sentence in English" in en
    assert all(f'"{k}": "<sentence>"' in en for k in TANG.keys) and '"reasons"' not in plain
    with pytest.raises(ValueError, match="unknown reason language 'fr'"):
        system_prompt(TANG, "fr")


def test_explain_schema_and_answer_form():
    schema = answer_schema(TANG, explain=True)
    assert schema["required"] == ["scores", "reasons"] and schema["properties"]["scores"] == answer_schema(TANG)
    reason = schema["properties"]["reasons"]["properties"]["safety"]
    assert reason == {"type": "string", "minLength": 1, "maxLength": MAX_REASON_CHARS}
    text = format_answer(SCORES, TANG, REASONS)
    assert list(json.loads(text)) == ["scores", "reasons"] and json.loads(text)["scores"] == json.loads(
        format_answer(SCORES, TANG))


def test_reasons_are_read_beside_the_scores_and_never_change_them():
    plain = parse_answer(format_answer(SCORES, TANG), TANG)
    explained = parse_answer(format_answer(SCORES, TANG, REASONS), TANG, explain=True)
    assert explained.status == "ok" and explained.scores == plain.scores and explained.quality == plain.quality
    assert explained.reasons == REASONS
    gaps = dict(REASONS, safety="", core_imagery="   ")
    gaps.pop("artistic_style")
    partial = parse_answer(format_answer(SCORES, TANG, gaps), TANG, explain=True)
    assert partial.scores == plain.scores and partial.status == "ok"
    assert set(partial.reasons) == set(TANG.keys) - {"safety", "core_imagery", "artistic_style"}
    answer = parse_answer('{"scores": %s}' % format_answer(SCORES, TANG), TANG, explain=True)
    assert answer.scores == plain.scores and answer.reasons == {}
    for broken in ('{"scores": %s, "reasons": ["a", "b"]}', '{"scores": %s, "reasons": {"safety": 3}}'):
        answer = parse_answer(broken % format_answer(SCORES, TANG), TANG, explain=True)  # no sentences: no form
        assert answer.status == "failed" and answer.reasons == {}, broken
    # A plain-mode reader of an explained answer reads its scores one level down; explain mode reads them as ok.
    assert parse_answer(format_answer(SCORES, TANG, REASONS), TANG).scores == plain.scores
    assert parse_answer("not json", TANG, explain=True).status == "failed"


def test_the_explain_grammar():
    g = Grammar.of(TANG, explain=True)
    whole = format_answer({k: 0.5 for k in TANG.keys}, TANG, {k: "月色如霜" for k in TANG.keys})
    assert state(whole, g) == ("done", "")
    reason_at = whole.index("月色")
    assert state(whole[:reason_at + 1], g) == ("string", "月")
    assert state(whole[:reason_at] + '"', g)[0] == "bad"  # an empty reason
    assert state(whole[:reason_at] + "x" * (MAX_REASON_CHARS + 1), g)[0] == "bad"  # too long
    assert state(whole[:reason_at] + "a\\n", g)[0] != "string"  # no escapes, no newlines
    assert state('{"scores": {"safety": 0.5', g)[0] == "value"


def test_records_keep_reasons_only_when_there_are_some():
    record = ScoresResult("x", "pae", SCORES, 0.5, "{}", "ok", None, 0.1, reasons={"safety": "无害。"}).to_json()
    assert record["reasons"] == {"safety": "无害。"}
    assert "reasons" not in ScoresResult("x", "pae", SCORES, 0.5, "{}", "ok", None, 0.1).to_json()


def test_explain_options(tmp_path, capsys):
    with pytest.raises(ValueError, match=r"--explain does not apply to clipscore \(it applies to pae, api\)"):
        load_evaluator("clipscore", explain="en")
    judge = load_evaluator("api", model="pae", base_url="http://127.0.0.1:8000/v1", explain="en")
    assert judge.settings()["explain"] == "en" and judge.max_new_tokens == 1536
    assert "explain" not in load_evaluator("api", model="pae", base_url="http://127.0.0.1:8000/v1").settings()
    from tangpoetrybench.cli import make_parser

    base = ["score", "--dataset", "d", "--evaluator", "pae", "--out", "x.jsonl"]
    assert make_parser().parse_args(base + ["--explain"]).explain == "poem"  # the poem's language by default
    assert make_parser().parse_args(base + ["--explain", "en"]).explain == "en"
    assert make_parser().parse_args(base).explain is None
    with pytest.raises(SystemExit):
        make_parser().parse_args(base + ["--explain", "fr"])
    assert "invalid choice: 'fr'" in capsys.readouterr().err


@pytest.mark.slow
def test_constrained_explain_answers_are_whole_on_the_tiny_model(tiny_models):
    """Random weights write gibberish; constrained, every explain answer is the whole form: a scores object that
    reads plainly and a non-empty reason per dimension. The reasons' slot is read by its closed rule
    (docs/reading.md): gibberish that names an option or a level fails the read, saying which reason did; an answer
    that reads has the same scores as a plain reading of its scores object."""
    poems = sample_poems()[:2]
    items = [ScoringItem(f"x/{i}", Image.new("RGB", (64, 48), (40 * i, 90, 120)), p) for i, p in enumerate(poems)]
    pae = load_evaluator("pae", model=str(tiny_models["qwen3-vl"]), device="cpu", constrained=True, explain="en")
    assert pae.settings()["explain"] == "en" and pae.random_weights
    for item, r in zip(items, pae.score(items)):
        rubric = pae.rubric_for(item)
        answer = json.loads(r.raw_output)
        assert list(answer) == ["scores", "reasons"] and list(answer["reasons"]) == list(rubric.keys), r.raw_output
        assert all(answer["reasons"].values()) and parse_answer(json.dumps(answer["scores"]), rubric).status == "ok"
        assert r.settings["explain"] == "en"
        if r.parse_status == "failed":
            assert r.error.startswith("the reason for "), r.error
            continue
        assert r.parse_status == "ok" and list(r.reasons) == list(rubric.keys)
        assert r.scores == parse_answer(json.dumps(answer["scores"]), rubric).scores
        assert r.to_json()["reasons"] == r.reasons


def _answer(response: dict, content: str) -> dict:
    response["choices"][0]["message"]["content"] = content
    return response


@pytest.mark.slow
def test_explain_through_a_served_model(server, demo_built, tmp_path):
    """The same answers in both modes (the proxy writes them): explain mode asks with the explain prompt and schema,
    keeps every reason, and its scores equal plain mode's; a resume in the other mode is refused."""
    from fault_proxy import FaultProxy
    from tangpoetrybench.judging.scoring import DatasetSource, score_to_jsonl

    source = DatasetSource(demo_built, "images", "test")
    gaps = dict(REASONS, safety="")

    def rewrite(request: dict, response: dict) -> dict:
        explained = '"reasons"' in request["messages"][0]["content"]
        return _answer(response, format_answer(SCORES, TANG, gaps if explained else None))

    with FaultProxy(server["url"], rewrite=rewrite) as proxy:
        plain = load_evaluator("api", model=server["model"], base_url=proxy.url, max_new_tokens=8)
        explain = load_evaluator("api", model=server["model"], base_url=proxy.url, max_new_tokens=8, explain="poem")
        score_to_jsonl(plain, source, tmp_path / "plain.jsonl", limit=3, progress=False)
        score_to_jsonl(explain, source, tmp_path / "explain.jsonl", limit=3, progress=False)
        with pytest.raises(ValueError, match="explain"):
            score_to_jsonl(explain, source, tmp_path / "plain.jsonl", progress=False)
    rows = {name: [json.loads(line) for line in (tmp_path / f"{name}.jsonl").read_text().splitlines()]
            for name in ("plain", "explain")}
    assert [r["scores"] for r in rows["plain"]] == [r["scores"] for r in rows["explain"]]
    assert all(r["parse_status"] == "ok" for r in rows["plain"] + rows["explain"])
    assert all(r["reasons"] == {k: v for k, v in gaps.items() if v} for r in rows["explain"])
    assert all("reasons" not in r and "explain" not in r["settings"] for r in rows["plain"])
    assert all(r["settings"]["explain"] == "poem" for r in rows["explain"])
    sent = [r["body"] for r in proxy.requests]
    explained = [b for b in sent if '"reasons"' in b["messages"][0]["content"]]
    assert len(explained) == 3 and all(b["response_format"]["json_schema"]["schema"] == answer_schema(TANG, explain=True)
                                       for b in explained)


def test_the_report_quotes_each_generators_weakest_dimension_and_shows_a_graph(demo_built, tmp_path):
    """Synthetic explained results (written by the test) for the test split, and a synthetic graphs file: the report
    names each generator's lowest dimension, quotes its reasons lowest score first, and draws one graph per
    generator."""
    from tangpoetrybench.judging.scoring import DatasetSource
    from tangpoetrybench.reporting.explanations import lowest_dimension_reasons
    from tangpoetrybench.reporting.report import build_report, read_inputs
    from test_semjudge import graph

    rows = {r["image_id"]: r for r in read_inputs(demo_built).images}
    ids = DatasetSource(demo_built, "images", "test").ids()
    lines = []
    for i, image_id in enumerate(ids):
        scores = dict(SCORES, core_imagery=0.1 + 0.01 * i)  # the weakest everywhere, rising with i
        lines.append({"image_id": image_id, "evaluator": "api", "model": "synthetic", "scores": scores,
                      "quality": 0.5, "raw_output": None, "parse_status": "ok", "error": None, "seconds": 0.0,
                      "settings": {"explain": "en"}, "reasons": {**REASONS, "core_imagery": f"synthetic reason {i}"}})
    scores_path = tmp_path / "explained.jsonl"
    scores_path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in lines), encoding="utf-8")
    graphs_path = tmp_path / "graphs.jsonl"
    graphs_path.write_text("".join(json.dumps({"image_id": i, "poem_id": "p", "model": "synthetic", "random_weights": True,
                                               "poem_graph": graph(), "image_graph": graph([[1, 2, 3, 4]])}) + "\n"
                                   for i in ids), encoding="utf-8")
    records = {r["image_id"]: r for r in lines}
    found = lowest_dimension_reasons(records, {i: rows[i]["generator"] for i in ids}, TANG)
    generators = sorted({rows[i]["generator"] for i in ids})
    assert sorted(found) == generators and all(d["dimension"] == "core_imagery" for d in found.values())
    first = found[generators[0]]
    assert [q["score"] for q in first["quotes"]] == sorted(q["score"] for q in first["quotes"])
    assert first["quotes"][0]["reason"] == f"synthetic reason {ids.index(first['quotes'][0]['image_id'])}"
    rep = build_report(demo_built, [scores_path], n_bootstrap=20, graphs=graphs_path)
    assert rep.numbers["explanations"]["reasons"]["api (explained.jsonl)"] == found
    assert sorted(rep.numbers["explanations"]["graphs"]) == generators
    headings = [payload[1] for kind, payload in rep.blocks if kind == "heading"]
    assert "Why — the judges' reasons and semiosis graphs" in headings
    texts = [payload for kind, payload in rep.blocks if kind == "text"]
    assert sum("random weights: a plumbing check" in t for t in texts) == len(generators)
