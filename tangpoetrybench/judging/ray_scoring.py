"""`tpb score --engine ray`: the scoring run of `tpb score` on a Ray cluster, for image sets past one machine.

    >>> from tangpoetrybench import RayEngine
    >>> engine = RayEngine(workers=8, worker_gpus=1)        # joins `address` if given, else starts Ray here
    >>> pae = engine.load_evaluator("pae", adapter="ORG/PAE", constrained=True)
    >>> summary = engine.score(pae, "scores.jsonl", dataset="ORG/TangPoetryBench")

- **Ray Data reads the rows**: a built dataset's Parquet files (`read_parquet`: the image bytes travel in the blocks,
  no shared disk needed), or a folder's images with their poems (`from_items`: each worker opens the image by its path,
  so the folder must be where every node can read it). Only the images not yet in the output are read, and they go
  to the workers in blocks of one batch (`ray_rows`): a split stored as one Parquet file is spread over every worker,
  and each batch's records come back as soon as it is scored.
- **One actor per worker** (`ScoreWorker`, a callable class given to `map_batches`), each holding `worker_gpus` GPUs
  and `worker_cpus` CPUs and loading its evaluator once through the registry (`registry.load_evaluator`): any
  registered evaluator — PAE on transformers, a baseline, the served judge with its concurrency (many workers
  then feed a fleet of servers). PAE on vLLM runs on Ray Data's own vLLM engine stage instead (`judging.ray_vllm`).
- **Before any worker starts**, one probe task loads the evaluator where a worker would and reports what it is (its
  name, model and settings): a wrong option fails there, once, and a resume with other settings is refused
  (`results.Resume`) before the workers load their models.
- **The driver writes**, as the records stream back: through `results.Resume` (the one resume logic and append
  path of `tpb score`), each image once — a batch Ray runs again after a worker died may send its records twice,
  and `Resume.unseen` lets each image's through once — then the whole file rewritten in source order
  (`scoring.write_in_order`). The file is the one `tpb score` writes, but for the `seconds` timings; a killed driver
  leaves what it appended, and a rerun scores the rest.

Progress is Ray Data's (its bars; `progress=False` turns them off); the summary is `tpb score`'s (`ScoreSummary`).
Ray is imported only here, and only when an engine starts.
"""

from __future__ import annotations

import ipaddress
import json
import math
import os
import socket
from dataclasses import dataclass, field
from importlib import import_module
from pathlib import Path
from typing import Any

from ..files import check_offline
from .evaluators.base import Evaluator
from .scoring import DEFAULT_BATCH_SIZE, ROW_COLUMNS, DatasetSource, FolderSource, Run, ScoreSummary, Source, \
    row_item, source_of, write_in_order


MAX_FOLDER_BLOCKS = 10_000  # blocks a folder's rows are cut into on the driver (each one object in Ray's store)


def build_evaluator(name: str, options: dict, calibration=None) -> Evaluator:
    """The evaluator `name` with its options (`registry.load_evaluator`), calibrated where a calibration is given:
    what the probe and every worker load, in a Ray process. One that holds no GPU never uses another's."""
    import ray

    from .registry import load_evaluator

    if not ray.get_gpu_ids():
        os.environ["CUDA_VISIBLE_DEVICES"] = ""
    evaluator = load_evaluator(name, **options)
    if calibration is not None:
        from .calibrated import Calibrated

        evaluator = Calibrated(evaluator, calibration)
    return evaluator


@dataclass
class RayEvaluator:
    """An evaluator as the driver of a Ray run sees it: how each worker loads it (`spec`, `options`, `calibration`),
    and what it is, as the probe found it (what a resume is checked against, what the summary names)."""

    spec: str  # the registry's name
    options: dict[str, Any]
    calibration: Any
    name: str
    model_name: str
    described: dict[str, Any]  # the evaluator's settings()
    fingerprints: frozenset[str]
    random_weights: bool
    repair: int
    min_batch_size: int
    default_batch_size = DEFAULT_BATCH_SIZE  # rows a worker scores at once, where the run names no --batch-size

    def settings(self) -> dict[str, Any]:
        return dict(self.described)

    def rubric_fingerprints(self) -> set[str]:
        return set(self.fingerprints)

    def dataset(self, rows, engine: "RayEngine", batch_size: int, source: Source):
        """The records of `rows` (of `source`), scored by `engine.workers` actors, `batch_size` rows a batch."""
        import ray.data

        where = {"root": source.dataset if isinstance(source, DatasetSource) else source.root,
                 "max_image_pixels": source.max_image_pixels}  # a row's image path stays inside; pixels bounded
        return rows.map_batches(ScoreWorker, fn_constructor_kwargs={"evaluator": self, **where}, batch_format="pyarrow",
                                batch_size=batch_size,
                                compute=ray.data.ActorPoolStrategy(size=engine.workers), num_cpus=engine.worker_cpus,
                                num_gpus=engine.worker_gpus)


def describe(spec: str, options: dict, calibration) -> RayEvaluator:
    """The probe (run as a Ray task where a worker would run): the evaluator loaded once, described."""
    evaluator = build_evaluator(spec, options, calibration)
    return RayEvaluator(spec, options, calibration, evaluator.name, evaluator.model_name, evaluator.settings(),
                        frozenset(evaluator.rubric_fingerprints()), bool(evaluator.random_weights),
                        int(getattr(evaluator, "repair", 0)), evaluator.min_batch_size)


class ScoreWorker:
    """One Ray Data actor: its evaluator loaded once; a batch of rows (`scoring.ROW_COLUMNS`) in, their records out
    (`image_id`, and `record`: its JSON)."""

    def __init__(self, evaluator: RayEvaluator, root: str, max_image_pixels: int):
        self.evaluator = build_evaluator(evaluator.spec, evaluator.options, evaluator.calibration)
        self.root, self.max_image_pixels = root, max_image_pixels

    def __call__(self, batch):
        import pyarrow as pa

        results = self.evaluator.score([row_item(row, self.root, self.max_image_pixels).load()
                                        for row in batch.to_pylist()])
        return pa.table({"image_id": [r.image_id for r in results],
                         "record": [json.dumps(r.to_json(), ensure_ascii=False) for r in results]})


def ray_rows(source: Source, run: Run, rows_per_block: int):
    """The rows still to score, as a Ray dataset in the built dataset's row form, in blocks of `rows_per_block` rows
    (a batch). A block goes to one worker and its records come back when it is done, but Ray Data reads a Parquet
    file as one block, and from_items makes at most 200: blocks of a batch spread the rows over every worker and let
    the driver append each batch as it comes back. A dataset's blocks are split as they stream, by a task on the CPU
    that reading needs anyway (`RayEngine.check_room`); a folder's rows are cut on the driver (at most
    MAX_FOLDER_BLOCKS blocks), so its workers may take every CPU."""
    import ray.data
    from ray.data.expressions import col

    if isinstance(source, DatasetSource):
        rows = ray.data.read_parquet(source.files()).select_columns(list(ROW_COLUMNS))  # pushed down to the read
        if len(run.todo) != len(source.ids()):
            rows = rows.filter(expr=col("image_id").is_in(run.todo))
        return rows.repartition(target_num_rows_per_block=rows_per_block)
    if isinstance(source, FolderSource):
        todo = set(run.todo)
        items = [row for row in source.rows() if row["image_id"] in todo]
        return ray.data.from_items(items, override_num_blocks=min(MAX_FOLDER_BLOCKS,
                                                                  max(1, math.ceil(len(items) / rows_per_block))))
    raise TypeError(f"the Ray engine reads a built dataset or a folder of images, not a {type(source).__name__}")


def same_cluster(address: str, running: str, node_ip: str) -> bool:
    """Whether `address` (an --address: "auto", a head's host:port, "ray://host:port" of its client server) names the
    cluster whose GCS is at `running` (host:port), `node_ip` being this machine's address: "auto" does; a host:port
    does where the port is the same and the host the same machine (names resolved, loopback standing for this node);
    a ray:// address, whose port is the client server's, where the host is. "local" asks for a new cluster: never."""
    if address == "auto":
        return True
    if address == "local":
        return False
    client = address.startswith("ray://")
    host, _, port = address.removeprefix("ray://").rpartition(":")
    running_host, _, running_port = running.rpartition(":")
    return (client or port == running_port) and bool(machine(host.strip("[]"), node_ip) &
                                                     machine(running_host.strip("[]"), node_ip))


def machine(host: str, node_ip: str) -> set[str]:
    """The addresses a host name stands for, loopback as this node's address."""
    try:
        found = {info[4][0] for info in socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)}
    except (OSError, UnicodeError):
        found = {host}
    return {node_ip if is_loopback(ip) else ip for ip in found}


def is_loopback(ip: str) -> bool:
    try:
        return ipaddress.ip_address(ip).is_loopback
    except ValueError:
        return False


def ray_destinations(address: str | None) -> list[str]:
    """Where a Ray run sends its work (the rows with their images, the evaluator's options): the cluster `address`
    names; for "auto", the one RAY_ADDRESS names, else this machine's; none for "local" or no address (this
    machine)."""
    if address == "auto":
        address = os.environ.get("RAY_ADDRESS")
    return [] if address in (None, "", "auto", "local") else [address]


@dataclass
class RayEngine:
    """Where and how wide a Ray run goes (see the module's docstring). `address`: a running cluster ("auto", a
    head's host:port, "ray://host:10001"); without it Ray starts on this machine with room for the workers."""

    address: str | None = None
    workers: int = 1
    worker_gpus: float = 0.0
    worker_cpus: float = 1.0
    started: bool = field(default=False, init=False)

    def __post_init__(self):
        if self.workers < 1 or self.worker_gpus < 0 or self.worker_cpus <= 0:
            raise ValueError("--workers must be at least 1, --worker-gpus at least 0 and --worker-cpus above 0")
        check_offline(ray_destinations(self.address), "score on a Ray cluster of this machine or network")

    def start(self) -> None:
        """Ray joined or started (once). A Ray this process already runs is used as it is where `address` is None,
        "auto" or that cluster's; one that names another cluster is refused: the run would go elsewhere."""
        import ray

        if self.started:
            return
        if ray.is_initialized():
            running = ray.get_runtime_context().gcs_address
            if self.address and not same_cluster(self.address, running, ray.util.get_node_ip_address()):
                raise ValueError(f"Ray already runs in this process, joined to the cluster at {running}, but --address "
                                 f"is {self.address}: one process scores on one cluster; give --address {running}, "
                                 "or call ray.shutdown() first")
            self.started = True
            return
        if self.address:
            ray.init(address=self.address)
        else:
            ray.init(address="local", include_dashboard=False,
                     num_cpus=max(os.cpu_count() or 1, math.ceil(self.workers * self.worker_cpus) + 1))
        self.started = True

    def check_room(self, source: Source) -> None:
        """Refuse workers that would take every CPU of the cluster where Ray Data's read tasks need one (a built
        dataset's Parquet files): the run would wait for a CPU forever."""
        import ray

        cpus, taken = ray.cluster_resources().get("CPU", 0.0), self.workers * self.worker_cpus
        if isinstance(source, DatasetSource) and cpus - taken < 1:
            raise ValueError(f"{self.workers} workers of {self.worker_cpus:g} CPUs take {taken:g} of the cluster's "
                             f"{cpus:g}, leaving none for Ray Data to read the dataset: give fewer --workers or "
                             "--worker-cpus, or a larger cluster")

    def load_evaluator(self, name: str, calibration=None, **options):
        """The evaluator `name` as a Ray run uses it: on a backend that Ray Data runs as a stage of its own
        (`Backend.ray_stage`: vLLM's, `ray_vllm.VLLMStage`), that stage; any other evaluator probed once on the
        cluster (`describe`) and loaded by each worker."""
        import ray

        from .registry import chosen_backend

        backend = chosen_backend(name, options)
        if backend is not None and backend.ray_stage:
            module, _, stage = backend.ray_stage.partition(":")
            if calibration is not None:
                raise ValueError(f"--calibration does not apply to the {backend.name} backend's Ray Data stage")
            return getattr(import_module(module), stage).of(name, options)
        self.start()
        probe = ray.remote(num_cpus=self.worker_cpus, num_gpus=self.worker_gpus)(describe)
        try:
            return ray.get(probe.remote(name, options, calibration))
        except ray.exceptions.RayTaskError as exc:  # the evaluator's own error (a bad option, a missing model)
            raise exc.cause from None

    def score_to_jsonl(self, evaluator, source: Source, out: Path | str, batch_size: int | None = None,
                       limit: int | None = None, progress: bool = True) -> ScoreSummary:
        """Score every item of `source` not yet in `out` on the cluster (see the module's docstring)."""
        self.start()
        self.check_room(source)
        run = Run.start(evaluator, source, out, limit)
        if run.todo:
            from ray.data import DataContext

            DataContext.get_current().enable_progress_bars = progress
            batch_size = max(batch_size or evaluator.default_batch_size, evaluator.min_batch_size)
            records = evaluator.dataset(ray_rows(source, run, batch_size), self, batch_size, source)
            with run.resume.appending() as append:
                write = run.writer(append)
                for batch in records.iter_batches(batch_size=None, batch_format="pyarrow"):
                    write([run.record(r) for r in run.resume.unseen(map(json.loads, batch["record"].to_pylist()))])
                run.finish(append)
            if run.tally.scored != len(run.todo):
                raise RuntimeError(f"Ray returned {run.tally.scored} of the {len(run.todo)} images to score; rerun "
                                   "to score the rest")
        if run.tally.scored or run.parts:
            write_in_order(run.out, run.order)
        return run.summary(run.tally, run.tally.scored)

    def score(self, evaluator, out: Path | str, dataset: str | Path | None = None, images: Path | str | None = None,
              poems: Path | str | None = None, config: str = "images", split: str = "test", **kwargs) -> ScoreSummary:
        """`scoring.score` on the cluster: a dataset's split or a folder of images (`scoring.source_of`) into `out`;
        other keyword arguments (batch_size, limit, progress) go to `score_to_jsonl`."""
        return self.score_to_jsonl(evaluator, source_of(dataset, images, poems, config, split), out, **kwargs)
