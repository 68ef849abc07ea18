"""SemJudge: schemas, validation, the box check and the tree (fast); its three steps through a real `transformers
serve` with the tiny Qwen3-VL behind the fault proxy, which counts the requests and rewrites the answers (random
weights never write a graph: the proxy decides what the model says), and on the local tiny model (slow)."""

import json
import re

import pytest
from PIL import Image

from fault_proxy import FaultProxy
from tangpoetrybench.judging.reading import read_json, schema_problems
from tangpoetrybench.judging.semjudge import (RANDOM_WEIGHTS_NOTE, SCHEMAS, GraphCache, PairItem, box_problems,
                                              check, graph_tree, prompts)
from tangpoetrybench.judging.evaluators import load_evaluator
from tangpoetrybench.poems import sample_poems

POEM = sample_poems()[0]


def graph(boxes: list | None = None, children: int = 3) -> dict:
    """A well-formed HSG (synthetic: written by the test, not by a model)."""
    def node(name, grounds):
        return {"sign_description": f"{name} sign", "inferred_object": f"{name} object",
                "interpretant": f"{name} interpretant", "expected_grounds": grounds}

    kids = [{"node_id": f"c{i}", "semiosis": node(f"c{i}", ["iconic"]), "relation_to_root": "elaboration",
             **({"bounding_boxes": boxes} if boxes is not None else {})} for i in range(children)]
    return {"hsg_root": {"node_id": "root", "semiosis": node("root", ["symbolic", "indexical"]), "children": kids}}


# ---- fast ----

def test_the_prompts_are_versioned_data_with_a_schema_each():
    data = prompts()
    assert isinstance(data["version"], int) and data["repair"] == "Reply with valid JSON only, in the schema above."
    assert set(data["steps"]) == set(SCHEMAS) == {"poem_graph", "image_graph", "judgment"}


def test_schemas_and_validation():
    assert schema_problems(graph(), SCHEMAS["poem_graph"]) == []
    assert schema_problems(graph([[1, 2, 3, 4]]), SCHEMAS["image_graph"]) == []
    assert schema_problems(graph([[1, 2, 3, 4]]), SCHEMAS["poem_graph"])[0].endswith("unexpected 'bounding_boxes'")
    assert "6 items, not 3–5" in schema_problems(graph(children=6), SCHEMAS["poem_graph"])[0]
    bad = graph()
    bad["hsg_root"]["semiosis"]["expected_grounds"] = ["mystical"]
    assert schema_problems(bad, SCHEMAS["poem_graph"]) == [
        "$.hsg_root.semiosis.expected_grounds[0]: 'mystical' is not one of iconic, indexical, symbolic"]
    assert schema_problems(graph([[1, 2, 3]]), SCHEMAS["image_graph"])[0].endswith("3 items, not 4–4")
    assert schema_problems({"discussion": "", "winner": "C"}, SCHEMAS["judgment"]) == [
        "$.discussion: empty", "$.winner: 'C' is not one of A, B"]


def test_a_box_outside_the_image_is_refused():
    assert box_problems(graph([[0, 0, 64, 48]]), (64, 48)) == []
    for box in ([0, 0, 65, 48], [-1, 0, 10, 10], [0, 0, 10, 49]):
        [problem] = box_problems(_one(box), (64, 48))
        assert "is not inside the 64×48 image" in problem
    for box in ([10, 10, 5, 20], [10, 10, 10, 20]):  # inside, but no area: said so, not blamed on the image's edges
        [problem] = box_problems(_one(box), (64, 48))
        assert problem.endswith("has no area (it needs x_min < x_max and y_min < y_max)")
    value, problems = check("image_graph", json.dumps(graph([[0, 0, 100, 10]])), (64, 48), "pixels")
    assert problems and "not inside" in problems[0]


def test_boxes_on_qwen3_vls_relative_grid_and_in_pixels():
    """Qwen3-VL grounds on a 0–1000 grid whatever the image's size (Qwen2.5-VL in pixels of the image as sent): the
    prompt asks for one convention, the check reads that one, and either comes back in pixels."""
    from tangpoetrybench.judging.semjudge import image_messages

    relative = json.dumps(graph([[0, 0, 1000, 1000], [250, 500, 750, 1000]]))
    value, problems = check("image_graph", relative, (512, 384), "relative")
    assert problems == [] and value["hsg_root"]["children"][0]["bounding_boxes"] == [[0, 0, 512, 384],
                                                                                     [128, 192, 384, 384]]
    value, problems = check("image_graph", relative, (512, 384), "pixels")  # 1000 > 512: not a pixel box here
    assert "[0, 0, 1000, 1000] is not inside the 512×384 image" in problems[0]
    [problem] = box_problems(_one([0, 0, 1001, 10]), (512, 384), "relative")
    assert problem.endswith("is not inside the 0–1000 grid of relative coordinates")
    assert box_problems(_one([0, 0, 600, 600]), (512, 384), "relative") == []  # inside the grid, beyond 512 pixels
    asked = {b: image_messages(Image.new("RGB", (512, 384)), b)[0]["content"][0]["text"] for b in ("relative", "pixels")}
    assert "on a grid of 0 to 1000 over this image" in asked["relative"] and "<= 512" not in asked["relative"]
    assert "0 <= x_min < x_max <= 512 and 0 <= y_min < y_max <= 384" in asked["pixels"]
    assert "the image is 512 pixels wide and 384 high" in asked["relative"]


def _one(box):
    g = graph([])
    g["hsg_root"]["children"][0]["bounding_boxes"] = [box]
    return g


def test_answers_are_read_strictly():
    assert read_json('```json\n{"winner": "A"}\n```') == ({"winner": "A"}, None)
    assert read_json('<think>hm</think>{"winner": "B"}')[0] == {"winner": "B"}
    assert read_json('The winner is {"winner": "A"}')[1].startswith("not valid JSON")  # never fished out of prose
    assert prompts()["repair"].startswith("Reply with valid JSON only, in the schema above.")


def test_the_tree_and_the_cache(tmp_path):
    tree = graph_tree(graph([[1, 2, 30, 40]]), "image A").splitlines()
    assert tree[:3] == ["image A", "root (root)", "  sign: root sign"]
    assert "    c0 — elaboration" in tree and "        box: [1, 2, 30, 40]" in tree
    cache = GraphCache(tmp_path)
    cache.put("poem", "k", {"graph": graph()})
    assert GraphCache(tmp_path).get("poem", "k") == {"graph": graph()} and GraphCache(tmp_path).get("poem", "x") is None
    assert [p.name for p in (tmp_path / "poem").iterdir()] == ["k.json"]


# ---- slow: a real server behind the proxy ----

def step_of(request: dict) -> str:
    system = request["messages"][0]["content"]
    return "image_graph" if "reading a picture" in system else "judgment" if "two illustrations" in system else "poem_graph"


def is_repair(request: dict) -> bool:
    last = request["messages"][-1]["content"]
    return isinstance(last, str) and last.startswith(prompts()["repair"])


class Model:
    """What the proxy answers in place of the tiny model: a valid answer for each step, unless told otherwise
    (`bad[step]` answers for that step's first and repair requests)."""

    def __init__(self, bad: dict[str, tuple[str, str]] | None = None):
        self.bad = bad or {}

    def __call__(self, request: dict, response: dict) -> dict:
        step = step_of(request)
        if step in self.bad:
            content = self.bad[step][is_repair(request)]
        elif step == "image_graph":
            system = request["messages"][0]["content"]
            width, height = map(int, re.search(r"the image is (\d+) pixels wide and (\d+) high", system).groups())
            if "on a grid of 0 to 1000" in system:  # the boxes asked on Qwen3-VL's relative grid
                width = height = 1000
            content = json.dumps(graph([[0, 0, width, height], [1, 1, width // 2, height // 2]]))
        elif step == "judgment":
            content = json.dumps({"discussion": "A's graph reaches the poem's symbolic object.", "winner": "A"})
        else:
            content = json.dumps(graph())
        response["choices"][0]["message"]["content"] = content
        return response


def count(proxy: FaultProxy) -> dict[str, int]:
    counts: dict[str, int] = {}
    for r in proxy.requests:
        key = step_of(r["body"]) + (" repair" if is_repair(r["body"]) else "")
        counts[key] = counts.get(key, 0) + 1
    return counts


def images(n: int) -> list[Image.Image]:
    return [Image.new("RGB", (64 + 8 * i, 48), (30 * i, 90, 120)) for i in range(n)]


@pytest.mark.slow
def test_all_three_steps_with_the_poem_graph_asked_once(server, tmp_path):
    """Four images of one poem in three ordered pairs: the poem's graph is asked once, each image's once (also for a
    pair asked the other way round), one judgment per item; a second judge on the same cache asks judgments only."""
    a, b, c, d = images(4)
    items = [PairItem("ab", POEM, a, b), PairItem("cd", POEM, c, d), PairItem("ba", POEM, b, a)]
    with FaultProxy(server["url"], rewrite=Model()) as proxy:
        judge = load_evaluator("semjudge", model=server["model"], base_url=proxy.url, cache_dir=tmp_path, max_new_tokens=4)
        answers = judge.judge(items)
        assert count(proxy) == {"poem_graph": 1, "image_graph": 4, "judgment": 3} and judge.requests == 8
        again = load_evaluator("semjudge", model=server["model"], base_url=proxy.url, cache_dir=tmp_path, max_new_tokens=4).judge(items)
        assert count(proxy) == {"poem_graph": 1, "image_graph": 4, "judgment": 6}
    for item, answer in zip(items + items, answers + again):
        assert answer.status == "ok" and answer.winner == "A" and answer.error is None, answer
        assert answer.reason.startswith("A's graph") and set(answer.extra["graphs"]) == {"poem", "A", "B"}
        boxes = answer.extra["graphs"]["A"]["hsg_root"]["children"][0]["bounding_boxes"]
        assert boxes[0] == [0, 0, item.image_a.width, 48]  # in the pixels of this pair's image A
    assert answers[0].usage["prompt_tokens"] > 0 and answers[0].extra["steps"]["poem_graph"]["cached"] is False
    assert all(s["cached"] for k, s in again[0].extra["steps"].items() if k != "judgment")
    assert len(list((tmp_path / "poem").iterdir())) == 1 and len(list((tmp_path / "image").iterdir())) == 4
    sent = next(r["body"] for r in proxy.requests if step_of(r["body"]) == "poem_graph")
    assert sent["response_format"]["json_schema"]["schema"] == SCHEMAS["poem_graph"]  # the step's schema, as the
    # response format
    assert judge.settings()["prompt_version"] == prompts()["version"]


@pytest.mark.slow
def test_a_box_outside_the_image_fails_the_item_after_one_repair(server, tmp_path):
    outside = json.dumps(graph([[0, 0, 1500, 10]]))  # past the 0–1000 grid the boxes are asked on
    with FaultProxy(server["url"], rewrite=Model({"image_graph": (outside, outside)})) as proxy:
        judge = load_evaluator("semjudge", model=server["model"], base_url=proxy.url, cache_dir=tmp_path, max_new_tokens=4)
        [answer] = judge.judge([PairItem("ab", POEM, *images(2))])
    assert answer.status == "failed" and answer.winner is None
    assert answer.error.startswith("image_graph: still invalid after the repair round: ")
    assert "[0, 0, 1500, 10] is not inside the 0–1000 grid of relative coordinates" in answer.error
    assert count(proxy) == {"poem_graph": 1, "image_graph": 2, "image_graph repair": 2}  # no judgment asked
    assert not (tmp_path / "image").exists()  # a refused graph is never cached
    assert len(answer.raw) == 5 and answer.extra["graphs"]["A"] is None


@pytest.mark.slow
def test_a_repaired_step_and_a_step_that_stays_invalid(server, tmp_path):
    """The poem's graph is repaired by its second answer; the judgment stays invalid and the item fails naming it."""
    bad = {"poem_graph": ("Here is the graph you asked for.", json.dumps(graph())),
           "judgment": ('{"winner": "A"}', '{"discussion": "tie", "winner": "both"}')}
    with FaultProxy(server["url"], rewrite=Model(bad)) as proxy:
        judge = load_evaluator("semjudge", model=server["model"], base_url=proxy.url, cache_dir=tmp_path, max_new_tokens=4)
        [answer] = judge.judge([PairItem("ab", POEM, *images(2))])
    assert count(proxy) == {"poem_graph": 1, "poem_graph repair": 1, "image_graph": 2, "judgment": 1,
                            "judgment repair": 1}
    assert answer.status == "failed" and answer.winner is None
    assert answer.error == "judgment: still invalid after the repair round: $.winner: 'both' is not one of A, B"
    assert answer.extra["steps"]["poem_graph"]["status"] == "repaired"
    repair = next(r["body"] for r in proxy.requests if is_repair(r["body"]))
    assert repair["messages"][-2] == {"role": "assistant", "content": "Here is the graph you asked for."}
    assert "not valid JSON" in repair["messages"][-1]["content"]


@pytest.mark.slow
def test_the_local_tiny_model_runs_every_step_and_says_it_has_random_weights(tiny_models, tmp_path):
    """PAE's transformers machinery asks the local model; random weights write no JSON, so the item fails at the first
    step, after its repair, saying the weights are random."""
    judge = load_evaluator("semjudge", model=str(tiny_models["qwen3-vl"]), device="cpu", cache_dir=tmp_path,
                           max_new_tokens=8)
    assert judge.random_weights and judge.settings()["backend"] == "transformers"
    [answer] = judge.judge([PairItem("ab", POEM, *images(2))])
    assert answer.status == "failed" and answer.error.startswith("poem_graph: still invalid after the repair round")
    assert answer.error.endswith(f"({RANDOM_WEIGHTS_NOTE})") and answer.extra["random_weights"] == RANDOM_WEIGHTS_NOTE
    assert judge.requests == 6 and len(answer.raw) == 6  # poem and both images, each asked and repaired


def test_the_space_draws_each_sub_signs_boxes_in_the_judges_coordinates():
    from tangpoetrybench.hub.space import SIGN_COLOURS, draw_sign_boxes, reasons_markdown
    from tangpoetrybench.rubric import load_rubric

    image = Image.new("RGB", (256, 192), (255, 255, 255))
    g = graph([])
    g["hsg_root"]["children"][0]["bounding_boxes"] = [[32, 24, 64, 48]]  # in a 128×96 copy: ×2 here
    g["hsg_root"]["children"][2]["bounding_boxes"] = [[100, 60, 120, 90]]
    drawn = draw_sign_boxes(image, g, size=(128, 96))
    assert drawn.size == image.size and image.getpixel((0, 0)) == (255, 255, 255)  # the input is left as it was
    def edge(x, y):  # the outline's colour within a pixel or two of (x, y)
        return {drawn.getpixel((x + d, y)) for d in range(-2, 3)}

    assert SIGN_COLOURS[0] in edge(128, 80) and SIGN_COLOURS[0] in edge(64, 80)  # the first box, scaled ×2
    assert SIGN_COLOURS[2] in edge(240, 150) and drawn.getpixel((100, 170)) == (255, 255, 255)
    assert SIGN_COLOURS[0] not in edge(64, 170)  # nothing where the unscaled box would end
    rubric = load_rubric("tang")
    assert reasons_markdown(None, rubric) == ""
    assert reasons_markdown({"safety": "无害。"}, rubric) == "- **" + rubric.dimension("safety").name["en"] + " / " + \
        rubric.dimension("safety").name["zh"] + "**: 无害。"


@pytest.mark.slow
def test_tpb_explain_prints_both_graphs_as_trees(server, tmp_path, capsys):
    from tangpoetrybench.cli import main

    image = tmp_path / "g1" / "p1.png"
    image.parent.mkdir()
    images(1)[0].save(image)
    out = tmp_path / "graphs.jsonl"
    with FaultProxy(server["url"], rewrite=Model()) as proxy:
        args = ["explain", "--image", str(image), "--poem", POEM.poem_id, "--model", server["model"], "--base-url",
                proxy.url, "--max-new-tokens", "4", "--cache", str(tmp_path / "cache"), "--out", str(out)]
        assert main(args) == 0
        printed = capsys.readouterr().out
        assert main(args) == 0  # from the cache: nothing asked
        assert len(proxy.requests) == 2
    assert f"《{POEM.title}》 {POEM.author} — the poem's graph\nroot (root)\n  sign: root sign" in printed
    assert f"{image} — the image's graph" in printed and "        box: [0, 0, 64, 48]" in printed
    assert "2 requests; tokens: " in printed
    [first, second] = [json.loads(line) for line in out.read_text().splitlines()]
    assert first == second and first["image_id"] == "g1/p1" and first["size"] == [64, 48]
    assert first["image_graph"]["hsg_root"]["children"][0]["bounding_boxes"][0] == [0, 0, 64, 48]
    bad = json.dumps(graph([[0, 0, 1001, 1]]))
    with FaultProxy(server["url"], rewrite=Model({"image_graph": (bad, bad)})) as proxy:
        images(2)[1].save(image.with_name("p2.png"))
        args[2], args[args.index("--base-url") + 1] = str(image.with_name("p2.png")), proxy.url
        assert main(args) == 2
    assert "error: image_graph: still invalid after the repair round" in capsys.readouterr().err


@pytest.mark.slow
def test_tpb_compare_runs_semjudge_on_a_local_model_offline(tiny_models, demo_built, tmp_path, monkeypatch):
    """`tpb compare --evaluator semjudge --model DIR` asks the local model (no server, offline), with its cache; random
    weights write no graph, so the pair has no verdict, each order naming the step that failed."""
    from tangpoetrybench.cli import main
    from tangpoetrybench.judging.results import read_lines

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    out = tmp_path / "semjudge.jsonl"
    assert main(["compare", "--dataset", str(demo_built), "--evaluator", "semjudge", "--model",
                 str(tiny_models["qwen3-vl"]), "--device", "cpu", "--max-new-tokens", "4", "--cache",
                 str(tmp_path / "graphs"), "--limit", "1", "--out", str(out)]) == 0
    [row] = [line.record for line in read_lines(out)]
    assert row["judge"] == "semjudge" and row["settings"]["backend"] == "transformers" and row["verdict"] is None
    assert all(o["error"].startswith("poem_graph: still invalid after the repair round") for o in row["orders"])
