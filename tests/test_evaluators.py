"""Every evaluator end to end on tiny random-weight models over the demo dataset (plumbing, not quality)."""

import dataclasses
import json

import pytest
import torch
from PIL import Image

from conftest import Flaky, without_engine
from tangpoetrybench.judging.evaluators import load_evaluator
from tangpoetrybench.judging.evaluators.base import ScoringItem
from tangpoetrybench.models import fit_pixels
from tangpoetrybench.judging.backends import BACKENDS, Answer, Backend, BackendRow
from tangpoetrybench.judging.backends.vllm import engine_kwargs, sampling_kwargs
from tangpoetrybench.judging.registry import BUILTIN, JudgeOptions, evaluator_spec
from tangpoetrybench.judging.tiny_models import BUILDERS, PIPELINE, models
from tangpoetrybench.judging.tasks.pairwise import PairItem, Pairwise
from tangpoetrybench.judging.tasks.scores import RubricScores
from tangpoetrybench.judging.reading import VERSIONS
from tangpoetrybench.poems import Poem, sample_poems
from tangpoetrybench.judging.prompt import answer_schema, build_messages
from tangpoetrybench.rubric import load_rubric
from tangpoetrybench.judging.scoring import DatasetSource, score_to_jsonl

FIELDS = {"image_id", "evaluator", "task", "scores", "quality", "raw_output", "parse_status", "error", "seconds",
          "model", "error_kind", "settings", "random_weights", "dataset"}  # dataset: what tpb score --dataset scored
CASES = [("pae", "qwen3-vl", None), ("vqascore", "qwen3-vl", (0, 1)), ("clipscore", "clip", (0, 2.5)),
         ("clipscore", "chinese-clip", (0, 2.5)), ("blipscore", "blip", (0, 1))]


@pytest.mark.parametrize("name,model,bounds", CASES)
def test_end_to_end_over_the_demo_dataset(name, model, bounds, tiny_models, demo_built, tmp_path):
    evaluator = load_evaluator(name, model=str(tiny_models[model]))
    assert evaluator.random_weights
    out = tmp_path / "scores.jsonl"
    summary = score_to_jsonl(evaluator, DatasetSource(demo_built, "images", "test"), out, batch_size=5, progress=False)
    records = [json.loads(line) for line in out.read_text().splitlines()]
    ids = [it.image_id for it in DatasetSource(demo_built, "images", "test")]
    assert [r["image_id"] for r in records] == ids and summary.scored == len(ids) == 12
    for r in records:
        assert set(r) == FIELDS | ({"evidence"} if name in ("clipscore", "blipscore") else set())
        assert r["evaluator"] == name and r["random_weights"] is True
        assert r["task"] == ("scores" if name == "pae" else "scalar")  # the task each record names
        assert r["model"] == str(tiny_models[model])
        if name == "pae":
            assert r["parse_status"] in ("ok", "repaired", "failed") and isinstance(r["raw_output"], str)
            assert set(r["scores"]) == set(load_rubric("tang").keys)
            assert r["settings"] == {"backend": "transformers", "max_pixels": 1024 * 1024, "max_new_tokens": 256,
                                     "parser": VERSIONS["scores"], "rubric": load_rubric("tang").fingerprint}
            if r["parse_status"] == "failed":
                assert all(v is None for v in r["scores"].values()) and r["quality"] is None and r["error"]
                assert r["error_kind"] == "parse"
        else:
            assert r["scores"] == {} and r["parse_status"] == "ok" and bounds[0] <= r["quality"] <= bounds[1]
            assert r["error_kind"] is None
            assert r["settings"] == ({"max_pixels": 1024 * 1024, "question": "t2v_metrics"} if name == "vqascore" else
                                     {"max_text_tokens": {"clip": 77, "chinese-clip": 52, "blip": 35}[model]})
    if name in ("clipscore", "blipscore"):
        assert summary.truncated == sum(r["evidence"]["text_seen"]["truncated"] for r in records)


@pytest.mark.parametrize("name,model,limit", [("clipscore", "clip", 77), ("clipscore", "chinese-clip", 52),
                                              ("blipscore", "blip", 35)])
def test_each_result_says_how_much_of_the_poem_the_text_encoder_saw(name, model, limit, tiny_models):
    """A short poem is seen whole; a long one (synthetic: a real poem's lines repeated) only up to the limit, and the
    record says how many tokens it had and how many of its characters the kept tokens cover."""
    evaluator = load_evaluator(name, model=str(tiny_models[model]))
    tokenizer = evaluator.processor.tokenizer
    short = sample_poems()[0]
    long = Poem("synthetic-long", short.title, short.author, "\n".join([short.text] * 6), "tang")
    image = Image.new("RGB", (32, 32), "white")
    seen_short, seen_long = [r.evidence["text_seen"] for r in evaluator([image, image], [short, long])]
    text = " ".join(long.lines)
    assert seen_short["truncated"] is False and seen_short["characters_seen"] == seen_short["characters"]
    assert seen_long["truncated"] is True
    assert seen_long["max_tokens"] == limit == evaluator.settings()["max_text_tokens"]
    assert seen_long["tokens"] == len(tokenizer(text)["input_ids"]) > limit and seen_long["characters"] == len(text)
    kept = tokenizer(text, truncation=True, max_length=limit)["input_ids"]
    assert len(kept) == limit and 0 < seen_long["characters_seen"] < len(text)
    # the characters seen are those the kept tokens spell: that prefix holds every kept token, one character less not
    n = seen_long["characters_seen"]
    assert tokenizer(text[:n])["input_ids"][:len(kept) - 1] == kept[:-1]
    assert tokenizer(text[:n - 1])["input_ids"][:len(kept) - 1] != kept[:-1]


def test_tpb_score_warns_when_the_text_encoder_saw_only_part_of_a_poem(tiny_models, tmp_path, capsys):
    """Two poems, one of them synthetic and long: `tpb score` names how many the encoder cut."""
    from tangpoetrybench.cli import main
    from tangpoetrybench.poems import write_poems

    short = sample_poems()[0]
    long = Poem("synthetic-long", short.title, short.author, "\n".join([short.text] * 6), "tang")
    write_poems([short, long], tmp_path / "poems.jsonl")
    (tmp_path / "images").mkdir()
    for poem in (short, long):
        Image.new("RGB", (32, 32), "white").save(tmp_path / "images" / f"{poem.poem_id}.png")
    out = tmp_path / "blip.jsonl"
    assert main(["score", "--images", str(tmp_path / "images"), "--poems", str(tmp_path / "poems.jsonl"), "--evaluator",
                 "blipscore", "--model", str(tiny_models["blip"]), "--out", str(out), "--quiet"]) == 0
    assert "warning: the text encoder saw only the start of 1 of the 2 poems" in capsys.readouterr().out
    assert sorted(json.loads(line)["evidence"]["text_seen"]["truncated"] for line in out.read_text().splitlines()) == [
        False, True]


def test_vqascore_asks_t2v_metrics_question_by_default(tiny_models):
    from tangpoetrybench.judging.evaluators.vqascore import question

    poem = sample_poems()[0]
    assert question(poem) == f'Does this figure show "{" ".join(poem.lines)}"? Please answer yes or no.'
    assert question(poem, "poem").startswith("Does this image illustrate the following poem?\n《")
    own = load_evaluator("vqascore", model=str(tiny_models["qwen3-vl"]), question="poem")
    assert own.settings() == {"max_pixels": 1024 * 1024, "question": "poem"}
    default = load_evaluator("vqascore", model=str(tiny_models["qwen3-vl"]))
    image = Image.new("RGB", (64, 64), "white")
    [a], [b] = default([image], [poem]), own([image], [poem])
    assert a.settings["question"] == "t2v_metrics" and b.settings["question"] == "poem" and a.quality != b.quality
    with pytest.raises(ValueError, match="unknown VQAScore question 'mine'"):
        load_evaluator("vqascore", model=str(tiny_models["qwen3-vl"]), question="mine")
    with pytest.raises(ValueError, match="--question does not apply to clipscore"):
        load_evaluator("clipscore", question="poem")


def test_batching_does_not_change_scalar_scores(tiny_models):
    clip = load_evaluator("clipscore", model=str(tiny_models["chinese-clip"]))
    poems = sample_poems()[:4]
    images = [Image.new("RGB", (64, 48), (40 * i, 100, 200 - 30 * i)) for i in range(4)]
    one = [r.quality for r in clip(images, poems, batch_size=1)]
    four = [r.quality for r in clip(images, poems, batch_size=4)]
    assert one == pytest.approx(four, abs=1e-5)
    assert len(set(round(q, 6) for q in one)) > 1  # the images and poems differ, and so do the scores


def test_pae_with_an_adapter(tiny_models, tmp_path):
    """A LoRA adapter (peft, safetensors) is loaded and merged: answers change against the bare base model."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForImageTextToText

    base = AutoModelForImageTextToText.from_pretrained(tiny_models["qwen3-vl"])
    torch.manual_seed(1)
    lora = get_peft_model(base, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"],
                                           exclude_modules=r".*\.visual\..*", init_lora_weights=False))
    lora.save_pretrained(tmp_path / "adapter")
    assert (tmp_path / "adapter" / "adapter_model.safetensors").is_file()
    poems, images = sample_poems()[:2], [Image.new("RGB", (64, 64), "white")] * 2
    bare = load_evaluator("pae", model=str(tiny_models["qwen3-vl"]), max_new_tokens=16)
    adapted = load_evaluator("pae", model=str(tiny_models["qwen3-vl"]), adapter=str(tmp_path / "adapter"),
                             max_new_tokens=16)
    assert adapted.model_name.endswith("+" + str(tmp_path / "adapter"))
    assert [r.raw_output for r in bare(images, poems)] != [r.raw_output for r in adapted(images, poems)]
    assert [r.raw_output for r in adapted(images, poems)] == [r.raw_output for r in adapted(images, poems)]


def test_unreadable_image_is_a_failed_result_not_a_crash(tiny_models):
    clip = load_evaluator("clipscore", model=str(tiny_models["clip"]))
    poem = sample_poems()[0]
    items = [ScoringItem("bad", None, poem, "unreadable image: truncated"), ScoringItem("good", Image.new("RGB", (8, 8)), poem)]
    bad, good = clip.score(items)
    assert bad.parse_status == "failed" and bad.error == "unreadable image: truncated" and bad.quality is None
    assert good.parse_status == "ok" and good.quality is not None


def test_fit_pixels():
    assert fit_pixels(Image.new("RGB", (4000, 2000)), 1024 * 1024).size == (1448, 724)
    assert fit_pixels(Image.new("L", (100, 50)), 1024 * 1024).size == (100, 50)
    assert fit_pixels(Image.new("L", (100, 50)), 1024).mode == "RGB"


def test_load_evaluator_errors():
    with pytest.raises(ValueError, match="unknown evaluator"):
        load_evaluator("fid")
    with pytest.raises(ValueError, match=r"--adapter does not apply to clipscore \(it applies to pae, recognize\)"):
        load_evaluator("clipscore", adapter="x")
    with pytest.raises(ValueError, match="--backend does not apply to vqascore"):
        load_evaluator("vqascore", backend="vllm")
    with pytest.raises(ValueError, match="pae runs on transformers, vllm, not api"):
        load_evaluator("pae", backend="api")
    with pytest.raises(ValueError, match="--constrained applies to the transformers backend"):
        load_evaluator("pae", backend="vllm", constrained=True)


class SchemaBackend(Backend):
    """A backend of this test module, a whole `backends.Backend` in a few lines: it answers from the question alone,
    prose at first and, asked again, the best score for every key of the answer's JSON schema. A local backend that
    repairs by default: the judge must do what its class says, whatever its name."""

    name, default_repair = "schema", 1

    def __init__(self, model: str = "answers-from-the-schema"):
        self.model_name = model

    def settings(self) -> dict:
        return {"answers": "from the schema"}

    def prepare(self, questions):
        return None

    def answer(self, prepared, questions):
        return [Answer(json.dumps({k: 1 for k in q.schema["properties"]}, ensure_ascii=False)
                       if any(m["role"] == "assistant" for m in q.messages) else "Let me look at the image first.")
                for q in questions]


def test_a_backend_is_one_class_and_one_row(monkeypatch):
    """Registered by its row alone, a backend is offered to every evaluator that runs on any (local) backend, takes
    the options its constructor names, refuses a served judge's, and sets the judge's repair round."""
    monkeypatch.setitem(BACKENDS, "schema", BackendRow(f"{__name__}:SchemaBackend", "answers from the JSON schema"))
    assert "schema" in evaluator_spec("pae").backends() and "schema" in evaluator_spec("recognize").backends()
    assert "schema" not in evaluator_spec("api").backends()
    judge = load_evaluator("pae", backend="schema", model="m")
    [result] = judge([Image.new("RGB", (32, 32))], [sample_poems()[0]])
    assert result.parse_status == "repaired" and set(result.scores.values()) == {1.0}
    assert result.model == "m" and result.settings["backend"] == "schema" and result.settings["repair"] == 1
    assert result.settings["answers"] == "from the schema"
    with pytest.raises(ValueError, match="--concurrency applies to a served judge"):
        load_evaluator("recognize", backend="schema", concurrency=2, candidates="c.jsonl")
    with pytest.raises(ValueError, match="--device applies to the transformers backend, not schema"):
        load_evaluator("pae", backend="schema", device="cpu")
    with pytest.raises(ValueError, match="--constrained applies to the transformers backend, not schema"):
        load_evaluator("pae", backend="schema", constrained=True)
    [backend] = [f for f in dataclasses.fields(JudgeOptions) if f.name == "backend"]
    assert backend.metadata["choices"] == ("transformers", "vllm", "api")  # the rows this package ships


def test_the_tiny_models_are_the_ones_the_registry_names():
    """`tpb tiny-models` builds each evaluator's tiny models as the registry names them, then the pipeline's own;
    each case above is an evaluator on a tiny model the registry gives it."""
    named = [m for spec in BUILTIN for m in spec.tiny_models]
    assert models() == tuple(dict.fromkeys(named)) + PIPELINE and set(models()) <= set(BUILDERS)
    assert all(model in evaluator_spec(name).tiny_models for name, model, _ in CASES)


def test_vllm_requests_are_the_prompt_builders():
    rubric, poem = load_rubric("tang"), sample_poems()[1]
    image = Image.new("RGB", (2048, 2048))
    _, [messages], [question] = without_engine(RubricScores(), rubric)._prepare([ScoringItem("x", image, poem)])
    reference = build_messages(poem, rubric, image)
    assert messages[0] == reference[0]
    assert messages[1]["content"][0]["type"] == "image_pil" and messages[1]["content"][0]["image_pil"].size == (1024, 1024)
    assert messages[1]["content"][1] == reference[1]["content"][1]
    params = sampling_kwargs(question)
    assert params["temperature"] == 0.0 and params["max_tokens"] == 256
    assert params["structured_outputs"]["json"] == answer_schema(rubric)
    assert params["structured_outputs"]["json"]["required"] == list(rubric.keys)
    assert engine_kwargs("m", None, 8)["enable_prefix_caching"] is True and "enable_lora" not in engine_kwargs("m", None, 8)
    assert engine_kwargs("m", "a", 8)["enable_lora"] is True
    assert engine_kwargs("m", None, 8)["limit_mm_per_prompt"] == {"image": 1}


def test_vllm_pairwise_requests_are_the_pair_prompt_builders():
    """The vLLM pairwise judge's plain-Python half: both images as `image_pil` parts of the pair prompt (A first),
    the pairwise answer's schema, and an engine that takes two images per prompt."""
    from tangpoetrybench.judging.prompt import build_pair_messages, pair_answer_schema

    rubric, poem = load_rubric("tang"), sample_poems()[1]
    judge = without_engine(Pairwise(), rubric)
    a, b = Image.new("RGB", (2048, 2048), "white"), Image.new("RGB", (300, 200), "black")
    _, [messages], [question] = judge._prepare([PairItem("x", poem, a, b)])
    reference = build_pair_messages(poem, rubric, a, b)
    assert messages[0] == reference[0]
    parts = messages[1]["content"]
    assert [p["type"] for p in parts] == ["text", "image_pil", "text", "image_pil", "text"]
    assert parts[1]["image_pil"].size == (1024, 1024) and parts[3]["image_pil"].size == (300, 200)
    assert parts[4] == reference[1]["content"][4]
    assert sampling_kwargs(question)["structured_outputs"]["json"] == pair_answer_schema()
    assert engine_kwargs("m", None, 8, images=2)["limit_mm_per_prompt"] == {"image": 2}


def test_vllm_backend_says_what_it_needs():
    pytest.importorskip("torch")
    try:
        import vllm  # noqa: F401
        pytest.skip("vLLM is installed here; the GPU run is done on the lent machine")
    except ImportError:
        pass
    with pytest.raises(ImportError, match=r"tangpoetrybench\[vllm\]"):
        load_evaluator("pae", backend="vllm", model="m")


def test_an_item_the_processor_refuses_fails_alone(tiny_models):
    """Qwen's image processor refuses aspect ratios over 200: that image fails as bad input and the rest of the batch
    is scored; alone, or with the whole batch refused, it is still a failed result, never an exception."""
    pae = load_evaluator("pae", model=str(tiny_models["qwen3-vl"]), max_new_tokens=4)
    poem = sample_poems()[0]
    sliver, fine = Image.new("RGB", (16, 4000)), Image.new("RGB", (64, 64))
    bad, good = pae.score([ScoringItem("sliver", sliver, poem), ScoringItem("fine", fine, poem)])
    assert bad.parse_status == "failed" and "aspect ratio" in bad.error and bad.raw_output is None
    assert bad.error_kind == "input" and good.raw_output is not None and good.error_kind in (None, "parse")
    for results in (pae.score([ScoringItem("a", sliver, poem), ScoringItem("b", sliver, poem)]), pae([sliver], [poem])):
        assert all(r.parse_status == "failed" and r.error_kind == "input" and "aspect ratio" in r.error
                   for r in results)


def test_a_batch_that_fails_is_retried_item_by_item(tiny_models):
    clip = load_evaluator("clipscore", model=str(tiny_models["clip"]))
    poems, images = sample_poems()[:3], [Image.new("RGB", (64, 64), (60 * i, 90, 120)) for i in range(3)]
    flaky = Flaky(clip, {"1"}, RuntimeError("shape mismatch\nsecond line"))
    results = clip(images, poems, batch_size=3)
    assert flaky.calls == [["0", "1", "2"], ["0"], ["1"], ["2"]]
    assert [r.parse_status for r in results] == ["ok", "failed", "ok"]
    assert results[1].error == "RuntimeError: shape mismatch" and results[1].error_kind == "model"
    oom = Flaky(load_evaluator("clipscore", model=str(tiny_models["clip"])), {"1"},
                torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"), alone=False)
    results = oom.evaluator(images, poems, batch_size=3)
    assert [r.parse_status for r in results] == ["ok"] * 3  # too big together, fine one by one
    oom.alone = True
    assert oom.evaluator(images, poems, batch_size=3)[1].error_kind == "transient"


def test_a_pickled_evaluator_prepares_without_its_model(tiny_models):
    """Data-loader workers get a copy of the evaluator: it must leave the model behind and still prepare batches."""
    import pickle

    pae = load_evaluator("pae", model=str(tiny_models["qwen3-vl"]), max_new_tokens=4)
    copy = pickle.loads(pickle.dumps(pae))
    assert not hasattr(copy.backend, "model") and hasattr(pae.backend, "model")
    items = [ScoringItem("a", Image.new("RGB", (64, 64)), sample_poems()[0])]
    mine, theirs = pae.prepare(items), copy.prepare(items)
    assert torch.equal(mine.inputs[1][0][1]["input_ids"], theirs.inputs[1][0][1]["input_ids"])
    assert pae.run(theirs)[0].raw_output == pae.score(items)[0].raw_output


def test_tiny_qwen3_vl_processor_is_the_real_ones(tiny_models):
    """The published Qwen3-VL-8B-Instruct preprocessor config: a 1024×1024 image is 1,024 image tokens."""
    from transformers import AutoProcessor

    config = json.loads((tiny_models["qwen3-vl"] / "processor_config.json").read_text())["image_processor"]
    assert config["size"] == {"longest_edge": 16777216, "shortest_edge": 65536}
    assert (config["patch_size"], config["merge_size"], config["temporal_patch_size"]) == (16, 2, 2)
    assert config["image_mean"] == config["image_std"] == [0.5, 0.5, 0.5]
    processor = AutoProcessor.from_pretrained(tiny_models["qwen3-vl"])
    inputs = processor(images=[Image.new("RGB", (1024, 1024))], text=["<|vision_start|><|image_pad|><|vision_end|>"],
                       return_tensors="pt")
    assert (inputs["input_ids"] == processor.image_token_id).sum() == 1024
    assert inputs["image_grid_thw"].tolist() == [[1, 64, 64]]


def test_constrained_decoding_makes_every_answer_a_whole_rubric_answer(tiny_models):
    """A random-weight model answers gibberish; constrained, the same model's answers are whole rubric answers,
    with null only where a dimension can be excluded, in a batch that mixes two rubrics."""
    from tangpoetrybench.judging.constrained import Grammar, state
    from tangpoetrybench.judging.reading import parse_answer
    from tangpoetrybench.judging.prompt import format_answer

    tang, song = load_rubric("tang"), load_rubric("song_ci")
    poems = sample_poems()[:3]
    items = [ScoringItem(f"x/{i}", Image.new("RGB", (64, 48), (30 * i, 90, 120)), p) for i, p in enumerate(poems)]
    free = load_evaluator("pae", model=str(tiny_models["qwen3-vl"]), device="cpu", max_new_tokens=40)
    assert not any(r.parse_status == "ok" for r in free.score(items))
    pae = load_evaluator("pae", model=str(tiny_models["qwen3-vl"]), device="cpu", constrained=True)
    assert pae.settings()["constrained"] is True
    pae.rubric_for = lambda item: song if item.image_id.endswith("/1") else tang  # one batch, two rubrics
    results = pae.score(items)
    for item, r in zip(items, results):
        rubric = pae.rubric_for(item)
        assert r.parse_status == "ok" and r.quality is not None, r.raw_output
        assert list(json.loads(r.raw_output)) == list(rubric.keys)
        assert r.raw_output == format_answer(r.scores, rubric)  # the trained form, exactly
    assert [r.raw_output for r in results] == [r.raw_output for r in pae.score(items)]  # still greedy
    g = Grammar.of(tang)
    assert state('{"safety": 0.6', g)[0] == "value" and state('{"safety": 0.67, "technical_quality": null', g)[0] == "bad"
    assert state('{"safety": 1.5', g)[0] == "bad" and state('{"safety": 1.0, "te', g) == ("literal", 'chnical_quality": ')
    whole = format_answer({k: 0.5 for k in tang.keys}, tang)
    assert state(whole, g) == ("done", "") and parse_answer(whole, tang).status == "ok"
