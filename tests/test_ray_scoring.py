"""`tpb score --engine ray`, for real: Ray Data on a local Ray cluster on the CPU (`ray.init(num_cpus=2)`, started by
the module) with the tiny PAE, against `tpb score`'s own records; a worker killed mid-run, a driver killed mid-run.
And PAE on Ray Data's vLLM engine stage as far as the CPU allows: its configuration, request rows, processor and
records, against the real `ray.data.llm` (vLLM itself needs a GPU: `benchmarks/ray_vllm_check.py`)."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import threading
import time
from types import SimpleNamespace

import psutil
import pytest

from conftest import tiny_pae_items, tiny_pae_targets
from tangpoetrybench.judging.backends import Answer
from tangpoetrybench.judging.backends.vllm import TOP_LOGPROBS
from tangpoetrybench.judging.evaluators import load_evaluator
from tangpoetrybench.judging.reading import parse_answer
from tangpoetrybench.judging.prompt import answer_schema, format_answer
from tangpoetrybench.judging.ray_scoring import RayEngine, same_cluster
from tangpoetrybench.judging.ray_vllm import ENGINE, stage_logprobs
from tangpoetrybench.judging.results import read_lines
from tangpoetrybench.judging.scoring import DatasetSource, FolderSource, score_to_jsonl
from tangpoetrybench.poems import sample_poems, write_poems
from tangpoetrybench.rubric import load_rubric

pytest.importorskip("ray.data")


def records(path):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def without_timing(rows):
    return [{k: v for k, v in r.items() if k != "seconds"} for r in rows]


@pytest.fixture(scope="module")
def cluster():
    import ray

    ray.init(address="local", num_cpus=2, include_dashboard=False)
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    """The tiny PAE's synthetic images (flat colours, in a folder named synthetic) under two generators, and the
    poems file: six images (`source`: their FolderSource)."""
    root = tmp_path_factory.mktemp("ray") / "synthetic"
    for generator in ("g1", "g2"):
        (root / generator).mkdir(parents=True)
        for item in tiny_pae_items():
            item.image.save(root / generator / f"{item.poem.poem_id}.png")
    poems = root.parent / "poems.jsonl"
    write_poems(sample_poems(), poems)
    return SimpleNamespace(root=root, poems=poems, source=FolderSource(root, poems))


def pae_options(tiny_models, tiny_pae, **extra):
    return dict(model=str(tiny_models["qwen3-vl"]), adapter=str(tiny_pae), constrained=True, **extra)


@pytest.mark.slow
def test_records_equal_tpb_scores_and_resume_the_same_way(cluster, tiny_models, tiny_pae, demo_built, tmp_path):
    """A built dataset's split read by Ray Data (Parquet, the images already there filtered out): the file `tpb score`
    writes on the same images (same scores, statuses, settings and dataset; not the timings), in
    source order. A rerun scores nothing; a rerun with other settings is refused before anything is written."""
    source = DatasetSource(demo_built, "images", "test")
    local, far = tmp_path / "local.jsonl", tmp_path / "ray.jsonl"
    score_to_jsonl(load_evaluator("pae", **pae_options(tiny_models, tiny_pae)), source, local, batch_size=1, limit=4,
                   progress=False)
    engine = RayEngine(workers=1)  # one CPU for the worker, one for reading the Parquet files
    pae = engine.load_evaluator("pae", **pae_options(tiny_models, tiny_pae))
    with pytest.raises(ValueError, match="2 workers of 1 CPUs take 2 of the cluster's 2, leaving none for Ray Data"):
        RayEngine(workers=2).score_to_jsonl(pae, source, far)
    import ray

    running = ray.get_runtime_context().gcs_address  # the module's cluster: an --address naming it uses it as it is
    RayEngine(address=running).start()
    RayEngine(address="auto").start()
    with pytest.raises(ValueError, match=f"joined to the cluster at {running}, but --address is 10.255.255.1:6379"):
        RayEngine(address="10.255.255.1:6379").start()
    first = engine.score_to_jsonl(pae, source, far, batch_size=1, limit=2, progress=False)
    rest = engine.score_to_jsonl(pae, source, far, batch_size=1, limit=4, progress=False)
    assert (first.scored, rest.scored, rest.skipped, rest.total) == (2, 2, 2, 4)
    assert without_timing(records(far)) == without_timing(records(local))
    assert [r["image_id"] for r in records(far)] == source.ids()[:4]
    again = engine.score_to_jsonl(pae, source, far, limit=4, progress=False)
    assert (again.scored, again.skipped) == (0, 4)
    other = engine.load_evaluator("pae", **pae_options(tiny_models, tiny_pae, max_new_tokens=300))
    with pytest.raises(ValueError, match="max_new_tokens 256, not 300"):
        engine.score_to_jsonl(other, source, far, progress=False)
    with pytest.raises(ValueError, match="does not apply to clipscore"):  # the probe's error, unwrapped
        engine.load_evaluator("clipscore", adapter=str(tiny_pae))


def score_workers() -> list[psutil.Process]:
    """This test process's Ray Data actors that score (Ray titles each worker process by its actor's class)."""
    found = []
    for process in psutil.Process().children(recursive=True):
        try:
            if "ScoreWorker" in " ".join(process.cmdline()):
                found.append(process)
        except psutil.Error:
            pass
    return found


@pytest.mark.slow
def test_a_worker_killed_mid_run_leaves_every_image_recorded_once(cluster, tiny_models, tiny_pae, images,
                                                                    tmp_path):
    """Once the first record is in the file (the event waited for), one of the two workers is killed (SIGKILL):
    Ray restarts it and runs its lost batches again; the file has every image once, in source order."""
    out = tmp_path / "killed.jsonl"
    killed: dict = {}

    def kill_one_worker() -> None:
        while not killed.get("done") and (not out.exists() or not out.read_text()):
            time.sleep(0.05)
        workers = score_workers()
        if workers and not killed.get("done"):
            killed["lines"] = len(out.read_text().splitlines())
            killed["pid"] = workers[0].pid
            os.kill(workers[0].pid, signal.SIGKILL)

    engine = RayEngine(workers=2)
    pae = engine.load_evaluator("pae", **pae_options(tiny_models, tiny_pae))
    killer = threading.Thread(target=kill_one_worker)
    killer.start()
    try:
        summary = engine.score_to_jsonl(pae, images.source, out, batch_size=1, progress=False)
    finally:
        killed["done"] = True
        killer.join()
    assert "pid" in killed and killed["lines"] < 6, killed  # killed while images were still to score
    rows = records(out)
    assert [r["image_id"] for r in rows] == images.source.ids() and summary.scored == 6
    assert all(r["parse_status"] == "ok" for r in rows)


@pytest.mark.slow
def test_a_driver_killed_mid_run_is_completed_by_a_rerun(cluster, tiny_models, tiny_pae, images, tmp_path):
    """`tpb score --engine ray` in a process of its own (its own local Ray), killed once its file has two records;
    a rerun scores the rest, and the file has every image once. The killed run was given its folder relative to its
    working directory, the rerun absolute: every image is read either way."""
    out = tmp_path / "driver.jsonl"
    cmd = [sys.executable, "-m", "tangpoetrybench.cli", "score", "--engine", "ray", "--images", images.root.name,
           "--poems", str(images.poems), "--evaluator", "pae", "--model", str(tiny_models["qwen3-vl"]), "--adapter",
           str(tiny_pae), "--constrained", "--batch-size", "1", "--out", str(out), "--quiet"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=images.root.parent)
    family: list[psutil.Process] = []
    try:
        while proc.poll() is None and (not out.exists() or out.read_text().count("\n") < 2):
            time.sleep(0.05)
        family = psutil.Process(proc.pid).children(recursive=True)  # its Ray: raylet, GCS, workers
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    finally:
        _, alive = psutil.wait_procs(family, timeout=30)
        for process in alive:  # whatever of its Ray outlived it, ended by its pid
            process.kill()
    before = len(read_lines(out, partial="cut"))
    assert 2 <= before < 6, f"the driver should have been killed part-way ({before} records)"
    engine = RayEngine(workers=1)
    rerun = engine.score(engine.load_evaluator("pae", **pae_options(tiny_models, tiny_pae)), out, images=images.root,
                         poems=images.poems, batch_size=1, progress=False)  # the Python API of `tpb score`'s
    assert (rerun.skipped, rerun.scored) == (before, 6 - before)
    assert [r["image_id"] for r in records(out)] == images.source.ids()
    assert all(r["parse_status"] == "ok" for r in records(out)), [r["error"] for r in records(out)]


@pytest.mark.slow
def test_a_built_dataset_is_spread_over_the_workers_and_appended_as_it_goes(cluster, tiny_models, tiny_pae,
                                                                           demo_built, tmp_path):
    """The demo's test split is one Parquet file (12 images), which Ray Data reads as one block. Its rows reach the
    workers in blocks of one batch each (so every worker takes some), and the driver appends each batch's records as
    they come back: `tpb score --engine ray --workers 2` on it, in a process of its own killed once its file has a
    record, has scored part of the split; a rerun scores the rest, and the file has every image once."""
    from tangpoetrybench.judging.ray_scoring import ray_rows
    from tangpoetrybench.judging.scoring import Run

    source = DatasetSource(demo_built, "images", "test")
    out = tmp_path / "dataset.jsonl"
    cmd = [sys.executable, "-m", "tangpoetrybench.cli", "score", "--engine", "ray", "--workers", "2", "--worker-cpus",
           "0.5", "--dataset", str(demo_built), "--split", "test", "--evaluator", "pae", "--model",
           str(tiny_models["qwen3-vl"]), "--adapter", str(tiny_pae), "--constrained", "--batch-size", "1", "--out",
           str(out), "--quiet"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    family: list[psutil.Process] = []
    try:
        while proc.poll() is None and (not out.exists() or "\n" not in out.read_text()):
            time.sleep(0.05)
        family = psutil.Process(proc.pid).children(recursive=True)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    finally:
        _, alive = psutil.wait_procs(family, timeout=30)
        for process in alive:
            process.kill()
    before = len(read_lines(out, partial="cut"))
    assert 1 <= before < 12, f"the driver should have been killed part-way ({before} records)"
    engine = RayEngine(workers=2, worker_cpus=0.5)  # half a CPU each: the other CPU reads the Parquet file
    pae = engine.load_evaluator("pae", **pae_options(tiny_models, tiny_pae))
    rows = ray_rows(source, Run.start(pae, source, out), 3).materialize()
    assert rows.count() == 12 - before and rows.num_blocks() == math.ceil((12 - before) / 3)
    rerun = engine.score_to_jsonl(pae, source, out, batch_size=1, progress=False)
    assert (rerun.skipped, rerun.scored) == (before, 12 - before)
    assert [r["image_id"] for r in records(out)] == source.ids()
    assert all(r["parse_status"] == "ok" for r in records(out)), [r["error"] for r in records(out)]


# ---- PAE on Ray Data's vLLM engine stage, against the real ray.data.llm (no vLLM: no engine runs) ----


ADAPTER = "ORG/pae-adapter"  # a LoRA adapter by name: the engine loads it, nothing here does


def stage(tiny_models, **options):
    return RayEngine(workers=2, worker_gpus=1).load_evaluator(
        "pae", backend="vllm", model=str(tiny_models["qwen3-vl"]), adapter=ADAPTER, **options)


def dataset_row(item) -> dict:
    """A row in the built dataset's form, as Ray Data reads it."""
    import io

    buffer = io.BytesIO()
    item.image.save(buffer, format="PNG")
    poem = item.poem
    return {"image_id": item.image_id, "poem_id": poem.poem_id, "title": poem.title, "author": poem.author,
            "poem": poem.text, "tradition": poem.tradition, "image": {"bytes": buffer.getvalue(), "path": None}}


def test_the_vllm_stages_configuration_is_what_ray_data_llm_accepts(tiny_models):
    """The real `vLLMEngineProcessorConfig` (its fields are checked: an unknown one is refused) with PAE's engine
    arguments: the adapter enabled for LoRA requests, one image per prompt, prefix caching, a replica per worker,
    each worker's GPUs as tensor parallelism, every row's failure kept to its row."""
    from ray.data.llm import vLLMEngineProcessorConfig

    pae = stage(tiny_models)
    config = pae.config(workers=4, worker_gpus=2, batch_size=16)
    assert isinstance(config, vLLMEngineProcessorConfig)
    assert config.model_source == str(tiny_models["qwen3-vl"]) and config.concurrency == 4 and config.batch_size == 16
    assert config.should_continue_on_error and config.prepare_multimodal_stage.enabled
    kwargs = config.engine_kwargs
    assert kwargs["enable_lora"] and kwargs["max_lora_rank"] >= 1 and kwargs["limit_mm_per_prompt"] == {"image": 1}
    assert kwargs["enable_prefix_caching"] and kwargs["tensor_parallel_size"] == 2 and "model" not in kwargs
    assert pae.settings()["backend"] == "vllm" and pae.settings()["engine"] == ENGINE
    assert pae.model_name == f"{tiny_models['qwen3-vl']}+{ADAPTER}"
    for bad, message in (({"constrained": True}, "--constrained applies to the transformers backend"),
                         ({"concurrency": 4}, "--concurrency applies to a served judge"),
                         ({"device": "cuda"}, "--device applies to the transformers backend")):
        with pytest.raises(ValueError, match=message):
            stage(tiny_models, **bad)
    with pytest.raises(ValueError, match="asks the rubric's scores, which semjudge does not answer"):
        RayEngine().load_evaluator("semjudge", backend="vllm")


def test_the_vllm_stages_requests_carry_the_questions_schema_and_the_adapter(tiny_models):
    """A row's request: PAE's own messages with the image as vLLM's `image_pil` part, greedy, the answer held to the
    question's JSON schema (as text), log-probabilities for the readout, the adapter as the row's LoRA model, and the
    image's bytes dropped from the row."""
    item = tiny_pae_items()[0]
    pae = stage(tiny_models, readout="expected")
    request = pae.request(dataset_row(item))
    [question] = pae.judge.task.questions(item, pae.judge)
    assert request["image"] is None and request["model"] == ADAPTER and not request["input_error"]
    [system, user] = request["messages"]
    assert system["content"] == question.messages[0]["content"]
    image = next(p["image_pil"] for p in user["content"] if p["type"] == "image_pil")
    assert image.size == item.image.size and image.tobytes() == item.image.tobytes()
    params = request["sampling_params"]
    assert params["temperature"] == 0.0 and params["max_tokens"] == question.max_new_tokens
    assert json.loads(params["structured_outputs"]["json"]) == question.schema == answer_schema(load_rubric("tang"))
    assert params["logprobs"] == TOP_LOGPROBS
    assert "logprobs" not in stage(tiny_models).request(dataset_row(item))["sampling_params"]  # decode
    broken = {**dataset_row(item), "image": {"bytes": b"not a png", "path": None}}
    stand_in = pae.request(broken)
    assert stand_in["input_error"].startswith("unreadable image") and stand_in["model"] == ADAPTER
    assert set(stand_in) == set(request)  # the same columns as every other row


def test_the_vllm_stages_answers_become_tpb_scores_records(tiny_models):
    """Rows as the stage returns them: the decoded answer, read as the local judge reads it; the readout from the
    stage's log-probabilities (token id → logprob, rank, decoded token), read as a served judge's; a row the engine
    failed on, a failed record a rerun asks again; an unreadable image, a failed record of its own."""
    from test_readout import served_logprobs

    tang = load_rubric("tang")
    item = tiny_pae_items()[0]
    answer = format_answer(tiny_pae_targets(tang)[0], tang)
    row = {k: v for k, v in dataset_row(item).items() if k != "image"} | {"image": None, "input_error": ""}
    decoded = json.loads(stage(tiny_models).record({**row, "generated_text": answer,
                                                               "time_taken_llm": 0.25})["record"])
    assert decoded["parse_status"] == "ok" and decoded["scores"] == parse_answer(answer, tang).scores
    assert decoded["seconds"] == 0.25 and decoded["model"] == f"{tiny_models['qwen3-vl']}+{ADAPTER}"
    assert decoded["raw_output"] == answer and decoded["settings"]["engine"] == ENGINE

    _, tokens = served_logprobs(answer, {}, {})
    first = tokens.index("1")
    openai, _ = served_logprobs(answer, {first: [("0", math.log(0.4))]}, {first: math.log(0.6)})
    ids = {t: i for i, t in enumerate(dict.fromkeys(tokens + ["0"]))}
    stage_rows = [{ids[e["token"]]: {"logprob": e["logprob"], "rank": rank, "decoded_token": e["token"]}
                   for rank, e in enumerate(entry["top_logprobs"], start=1)} for entry in openai["content"]]
    assert stage_logprobs([ids[t] for t in tokens], stage_rows)["content"][first]["top_logprobs"][1] == {
        "token": "0", "logprob": math.log(0.4)}
    pae = stage(tiny_models, readout="expected")
    read = json.loads(pae.record({**row, "generated_text": answer, "generated_tokens": [ids[t] for t in tokens],
                                  "logprobs": stage_rows})["record"])
    served = load_evaluator("api", model="pae", base_url="http://127.0.0.1:9/v1", readout="expected")
    [question] = served.task.questions(item, served)
    reading = served.task.read(question, Answer(answer, logprobs=openai))
    assert read["readout"]["dimensions"]["safety"]["distribution"] == reading.value.to_json()["dimensions"]["safety"][
        "distribution"] == pytest.approx({"1.0": 0.6, "0.5": 0.2, "0.0": 0.2})

    failed = json.loads(pae.record({**row, "generated_text": "", "__inference_error__": "ValueError: too long"})
                        ["record"])
    assert failed["parse_status"] == "failed" and failed["error_kind"] == "model" and "too long" in failed["error"]
    unreadable = json.loads(pae.record({**row, "input_error": "unreadable image: cannot identify"})["record"])
    assert unreadable["error_kind"] == "input" and unreadable["error"] == "unreadable image: cannot identify"


@pytest.mark.slow
def test_the_vllm_processor_builds_on_ray_data(cluster, tiny_models, images, tmp_path):
    """`build_processor` on the real Ray Data (no vLLM needed to build): the stages in order, the engine stage with
    PAE's engine arguments on a GPU per replica, and the lazy plan from the rows to the records (not executed)."""
    from tangpoetrybench.judging.ray_scoring import ray_rows
    from tangpoetrybench.judging.scoring import Run
    from ray.data.llm import build_processor

    pae = stage(tiny_models)
    processor = build_processor(pae.config(workers=2, worker_gpus=1), preprocess=pae.request)
    assert processor.list_stage_names() == ["PrepareMultimodalStage", "ChatTemplateStage", "TokenizeStage",
                                            "vLLMEngineStage", "DetokenizeStage"]
    engine_stage = processor.get_stage_by_name("vLLMEngineStage")
    assert engine_stage.fn_constructor_kwargs["engine_kwargs"]["enable_lora"]
    assert engine_stage.fn_constructor_kwargs["should_continue_on_error"]
    assert engine_stage.map_batches_kwargs["num_gpus"] == 1
    rows = ray_rows(images.source, Run.start(pae, images.source, tmp_path / "plan.jsonl"), pae.default_batch_size)
    plan = str(pae.dataset(rows, RayEngine(workers=2, worker_gpus=1), pae.default_batch_size))
    assert plan.index("Map(VLLMStage.record)") < plan.index("vLLMEngineStageUDF") < plan.index("Map(_preprocess)")


def test_the_engine_options_on_the_command_line(images, tmp_path, capsys):
    """The Ray options apply to --engine ray, which places its workers itself (no --num-workers, no launcher)."""
    from tangpoetrybench.cli import main

    base = ["score", "--images", str(images.root), "--poems", str(images.poems), "--evaluator", "clipscore",
            "--out", str(tmp_path / "s.jsonl"), "--quiet"]
    assert main(base + ["--workers", "2"]) == 2
    assert "--address, --workers, --worker-gpus and --worker-cpus apply to --engine ray" in capsys.readouterr().err
    assert main(base + ["--engine", "ray", "--num-workers", "2"]) == 2
    assert "--engine ray places its workers itself" in capsys.readouterr().err
    with pytest.raises(ValueError, match="--workers must be at least 1"):
        RayEngine(workers=0)


def test_an_address_is_compared_with_the_cluster_ray_already_runs_on():
    """`RayEngine.start` in a process where Ray already runs (the slow tests start one) goes on only where --address
    names that cluster; here the comparison itself, with no cluster."""
    node = "10.0.0.7"
    assert same_cluster("auto", "10.0.0.7:6379", node)
    assert same_cluster("10.0.0.7:6379", "10.0.0.7:6379", node)
    assert same_cluster("127.0.0.1:6379", "10.0.0.7:6379", node)  # loopback: this machine
    assert same_cluster("localhost:6379", "10.0.0.7:6379", node)
    assert same_cluster("ray://10.0.0.7:10001", "10.0.0.7:6379", node)  # the client server's port, the head's host
    assert not same_cluster("10.0.0.8:6379", "10.0.0.7:6379", node)  # another head
    assert not same_cluster("10.0.0.7:6380", "10.0.0.7:6379", node)  # another cluster on the same machine
    assert not same_cluster("127.0.0.1:6379", "10.0.0.5:6379", node)  # this machine, but Ray runs on another
    assert not same_cluster("ray://10.0.0.9:10001", "10.0.0.7:6379", node)
    assert not same_cluster("local", "10.0.0.7:6379", node)  # a new cluster here


def test_resume_lets_each_image_through_once(tmp_path):
    """What a retried Ray task sends again is dropped: an image done before the run, or given to this run already
    (whatever its record said); an image that failed in the model before the run is let through once."""
    from tangpoetrybench.judging.results import Resume

    def record(image_id, kind=None):
        return {"image_id": image_id, "evaluator": "e", "model": "m", "settings": {}, "scores": {},
                "quality": None if kind else 0.5, "parse_status": "failed" if kind else "ok", "error_kind": kind}

    out = tmp_path / "r.jsonl"
    out.write_text("".join(json.dumps(r) + "\n" for r in (record("done"), record("retry", "transient"))))
    maker = SimpleNamespace(name="e", model_name="m", settings=dict)
    resume = Resume(maker, out)
    assert resume.unseen([record("done"), record("retry"), record("new", "transient"), record("new")]) == [
        record("retry"), record("new", "transient")]
    assert resume.unseen([record("retry"), record("new"), record("later")]) == [record("later")]
