"""A reward that a fleet of servers feeds: `load_reward(base_url=[…])` over replicas on loopback — a real `transformers
serve` of the tiny PAE (whose answers read) and the fault proxy in front of the same server playing a second replica
that dies and comes back — and a reward call that never hangs and never dies on one bad request (its deadline, its
`on_failure`), through a Flow-GRPO-style step. And, fast, the served backend's choice of replica (fewest requests in
flight, the cool-down doubled while a replica keeps failing, its health check, a replica that dies during a call)
against tiny stdlib HTTP servers on loopback, whose answers' content does not matter to the choice."""

from __future__ import annotations

import asyncio
import json
import logging
import math
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

from conftest import tiny_pae_items
from fault_proxy import FaultProxy
from tangpoetrybench.cli import main
from tangpoetrybench.judging.backends import Question
from tangpoetrybench.judging.backends.served import Replica, ServedBackend
from tangpoetrybench.poems import write_poems
from tangpoetrybench.reward import RewardFailed, Scalar, load_reward

WAIT = 60.0  # seconds a test waits for an event before it fails: a bound, never a pace


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def chats(proxy: FaultProxy) -> int:
    return sum(r["path"].endswith("/chat/completions") for r in proxy.requests)


def synthetic():
    """The tiny PAE's synthetic images (flat colours) and their poems."""
    items = tiny_pae_items()
    return [it.image for it in items], [it.poem for it in items]


# --- the choice of replica, fast: tiny stdlib servers on loopback ---

class Loopback:
    """A tiny HTTP server on loopback playing one replica. `GET /health` (and `/v1/models`) answers 200 while
    `healthy`, else 503, once `checked` is set (at first); a chat completion waits for `release` (set at first), then
    gets a fixed answer. `kill()`
    makes it die: a chat completion held or arriving after is dropped unanswered and its health check fails.
    `paths` logs every request; `wait_chats(n)` waits until n chat completions have arrived."""

    def __init__(self):
        self.healthy, self.dead = True, False
        self.release, self.checked = threading.Event(), threading.Event()
        self.release.set()
        self.checked.set()
        self.paths: list[str] = []
        self.changed = threading.Condition()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self):
                server.log(self.path)
                server.checked.wait(WAIT)
                ok = server.healthy and not server.dead and self.path in ("/health", "/v1/models")
                server.reply(self, 200 if ok else 503, {"data": []} if ok else {"error": "down"})

            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                server.log(self.path)
                server.release.wait(WAIT)
                if server.dead:
                    self.close_connection = True  # no answer: the client sees the connection closed
                    return
                server.reply(self, 200, {"model": "m", "choices": [{"message": {"role": "assistant",
                                                                                "content": "{}"}}]})

            def log_message(self, *args):
                pass

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.http.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.http.server_address[1]}/v1"

    def __enter__(self) -> "Loopback":
        threading.Thread(target=self.http.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self.release.set()
        self.checked.set()
        self.http.shutdown()
        self.http.server_close()

    def log(self, path: str) -> None:
        with self.changed:
            self.paths.append(path)
            self.changed.notify_all()

    @property
    def chats(self) -> int:
        return sum(p.endswith("/chat/completions") for p in self.paths)

    def wait_chats(self, n: int) -> bool:
        with self.changed:
            return self.changed.wait_for(lambda: self.chats >= n, WAIT)

    def kill(self) -> None:
        self.dead = True
        self.release.set()

    @staticmethod
    def reply(h: BaseHTTPRequestHandler, status: int, body: dict) -> None:
        data = json.dumps(body).encode()
        h.send_response(status)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)


def questions(n: int) -> tuple[list, list[Question]]:
    """n text questions, prepared as the served backend sends them."""
    asked = [Question([{"role": "user", "content": [{"type": "text", "text": f"question {i}"}]}], 8) for i in range(n)]
    return [[{"role": "user", "content": f"question {i}"}] for i in range(n)], asked


def choose(backend: ServedBackend) -> Replica:
    return asyncio.run(backend._replica(time.monotonic() + WAIT))


def test_the_replica_with_the_fewest_requests_in_flight_is_chosen():
    """From the counts alone (no replica is down, so none is asked anything): the least busy, the first on a tie —
    not the next in turn, as round robin would."""
    backend = ServedBackend("m", base_url=[f"http://127.0.0.1:{free_port()}/v1" for _ in range(3)])
    a, b, c = backend.replicas
    a.in_flight, b.in_flight, c.in_flight = 0, 2, 2
    chosen = [choose(backend) for _ in range(4)]
    assert [r.url for r in chosen] == [a.url, a.url, a.url, b.url]  # round robin: a, b, c, a
    assert (a.in_flight, b.in_flight, c.in_flight) == (3, 3, 2)


def test_while_one_replica_holds_a_request_the_others_take_the_rest():
    """Two replicas, one request in flight each at most (concurrency 1): `slow` holds its first request until the
    test releases it, so every other request goes to `quick`, whose count falls back to 0 as it answers. Round robin
    would send `slow` every second request and wait on it."""
    with Loopback() as slow, Loopback() as quick:
        slow.release.clear()
        backend = ServedBackend("m", base_url=[slow.url, quick.url], concurrency=1, retries=0)
        with ThreadPoolExecutor(1) as pool:
            call = pool.submit(backend.answer, *questions(8))
            try:
                assert quick.wait_chats(7), quick.paths
                assert slow.chats == 1
            finally:
                slow.release.set()
            answers = call.result(WAIT)
    assert [a.error for a in answers] == [None] * 8
    assert [a.meta["server"] for a in answers] == [slow.url] + [quick.url] * 7
    assert [r.in_flight for r in backend.replicas] == [0, 0] and quick.chats == 7


def test_a_replica_that_dies_during_a_call_is_left_out_and_rejoins_after_its_health_check():
    """`dying` dies holding the call's first request (its connection dropped): that request is tried again on the
    other replica, and every question is answered; the dead replica is left out for the rest of the call (its
    cool-down, or a failed health check). Alive again and its cool-down over, it is asked `/health` before it takes
    a request, and a request it answers clears its failures."""
    with Loopback() as dying, Loopback() as other:
        dying.release.clear()
        backend = ServedBackend("m", base_url=[dying.url, other.url], concurrency=1, retries=2, backoff=0.01)
        with ThreadPoolExecutor(1) as pool:
            call = pool.submit(backend.answer, *questions(6))
            try:
                assert other.wait_chats(3), other.paths  # the call is under way on both replicas
            finally:
                dying.kill()
            answers = call.result(WAIT)
        assert [a.error for a in answers] == [None] * 6
        assert [a.meta["server"] for a in answers] == [other.url] * 6  # the dropped one answered by the other
        assert dying.chats == 1 and other.chats == 6
        replica = backend.replicas[0]
        assert replica.failures >= 1 and replica.down_until > 0  # left out, not yet back
        dying.dead = False
        replica.down_until = time.monotonic()  # its cool-down over (set, not waited for)
        [answer] = backend.answer(*questions(1))
        assert answer.error is None and answer.meta["server"] == dying.url
        assert dying.paths[1:] == ["/health", "/v1/chat/completions"]
        assert (replica.failures, replica.down_until) == (0, 0.0)


def test_a_failing_replicas_cool_down_doubles_until_its_cap():
    """5 s, doubled at each failure in a row up to 2 minutes (docs/scale.md); a success clears it; a lone server is
    never left out (its requests back off instead)."""
    replica = Replica("http://127.0.0.1:9/v1")
    for failures, seconds in enumerate([5, 10, 20, 40, 80, 120, 120], start=1):
        before = time.monotonic()
        replica.fail(fleet=2)
        after = time.monotonic()
        assert replica.failures == failures and before + seconds <= replica.down_until <= after + seconds
    replica.succeed()
    assert (replica.failures, replica.down_until) == (0, 0.0)
    before = time.monotonic()
    replica.fail(fleet=2)
    assert before + 5 <= replica.down_until <= time.monotonic() + 5  # from the start again
    lone = Replica("http://127.0.0.1:9/v1")
    lone.fail(fleet=1)
    assert lone.failures == 1 and lone.down_until == 0.0


def test_a_replica_whose_health_check_fails_after_its_cool_down_is_left_out_twice_as_long():
    """Its cool-down over, a replica is asked `/health` (then `/models`) before it takes a request: failing, it is
    left out again for twice as long and the request goes elsewhere; answering, it rejoins (its failures kept until
    a request succeeds). With every replica left out past the deadline, the choice fails at once."""
    with Loopback() as sick, Loopback() as well:
        sick.healthy = False
        backend = ServedBackend("m", base_url=[sick.url, well.url])
        a, b = backend.replicas
        a.failures, a.down_until = 1, time.monotonic()  # its first cool-down (5 s) just over
        before = time.monotonic()
        assert choose(backend) is b
        after = time.monotonic()
        assert sick.paths == ["/health", "/v1/models"] and a.failures == 2
        assert before + 10 <= a.down_until <= after + 10
        sick.healthy = True
        a.down_until = time.monotonic()
        assert choose(backend) is a  # b has a request in flight, a none: a, once its health check answers
        assert sick.paths[2:] == ["/health"] and (a.failures, a.down_until, a.in_flight) == (2, 0.0, 1)
        a.down_until = b.down_until = time.monotonic() + 100
        with pytest.raises(TimeoutError, match="no server of .* was up"):
            asyncio.run(backend._replica(time.monotonic()))


def test_while_a_replica_is_health_checked_the_other_requests_go_elsewhere():
    """A replica back from its cool-down is checked by one request; while its `/health` is held, the others do not
    pile onto it (nor check it again): they go to the other replica. Then it rejoins with the request that checked
    it."""
    with Loopback() as back, Loopback() as well:
        back.checked.clear()
        backend = ServedBackend("m", base_url=[back.url, well.url], concurrency=2, retries=0)
        backend.replicas[0].failures, backend.replicas[0].down_until = 1, time.monotonic()  # its cool-down just over
        with ThreadPoolExecutor(1) as pool:
            call = pool.submit(backend.answer, *questions(4))
            try:
                assert well.wait_chats(3), (back.paths, well.paths)
                assert back.paths == ["/health"]  # checked once, and nothing sent while it is checked
            finally:
                back.checked.set()
            answers = call.result(WAIT)
    assert [a.error for a in answers] == [None] * 4
    assert back.paths == ["/health", "/v1/chat/completions"] and well.chats == 3


@pytest.mark.slow
def test_a_replica_that_dies_is_skipped_and_rejoins(pae_server, caplog):
    """Two replicas: the server itself and the proxy in front of it. Both take requests; the proxy dies between two
    reward calls (steps of a run) and every image is still scored, the refused replica left out; started again on
    the same port, it rejoins — its request log starts with its health check (one per request that found its
    cool-down over), then answers."""
    images, poems = synthetic()
    with FaultProxy(pae_server["url"]) as proxy:
        port = proxy.port
        reward = load_reward(pae_server["model"], base_url=[pae_server["url"] + "/v1", proxy.url], readout="decode",
                             backoff=0.05)
        _, info = reward(images, poems)
        assert info["status"] == ["ok"] * 3 and 1 <= chats(proxy) < 3  # each replica took its share
    with caplog.at_level(logging.WARNING, logger="tangpoetrybench.judging.backends.served"):
        _, info = reward(images, poems)  # the proxy is dead: nothing listens on its port
    assert info["status"] == ["ok"] * 3 and info["error"] == [None] * 3
    assert any("ConnectError" in m and f"127.0.0.1:{port}/v1" in m for m in caplog.messages), caplog.messages
    with FaultProxy(pae_server["url"], port=port) as back:
        for _ in range(100):  # until it has rejoined (its cool-down passed and its health check answered)
            _, info = reward(images, poems)
            assert info["status"] == ["ok"] * 3
            if chats(back):
                break
        paths = [r["path"] for r in back.requests]
    first_chat = next(i for i, path in enumerate(paths) if path.endswith("/chat/completions"))
    assert first_chat > 0 and set(paths[:first_chat]) == {"/health"}, paths  # held out until its health check


@pytest.mark.slow
def test_the_same_fleet_serves_tpb_score(pae_server, tmp_path, capsys):
    """`tpb score --evaluator api --base-url A,B` (a comma list; the option may also be given twice)."""
    images, poems = synthetic()
    folder = tmp_path / "synthetic"
    folder.mkdir()
    for image, poem in zip(images, poems):
        image.save(folder / f"{poem.poem_id}.png")
    poems_file = tmp_path / "poems.jsonl"
    write_poems(poems, poems_file)
    out = tmp_path / "fleet.jsonl"
    with FaultProxy(pae_server["url"]) as proxy:
        assert main(["score", "--images", str(folder), "--poems", str(poems_file), "--evaluator", "api", "--model",
                     pae_server["model"], "--base-url", f"{pae_server['url']}/v1,{proxy.url}", "--concurrency", "1",
                     "--out", str(out), "--quiet"]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["parse_status"] for r in rows] == ["ok"] * 3 and 1 <= chats(proxy) < 3
    assert "3 scored now (0 failed)" in capsys.readouterr().out


def test_with_every_replica_down_a_call_returns_within_its_deadline():
    """Nothing listens on either replica's port: each call returns once its deadline has passed, every image handled
    as asked and saying why; `raise` raises, naming the images."""
    dead = [f"http://127.0.0.1:{free_port()}/v1", f"http://127.0.0.1:{free_port()}/v1"]
    images, poems = synthetic()
    for on_failure, status, value in (("mean", "filled", 0.0), (0.25, "filled", 0.25), ("nan", "nan", math.nan)):
        reward = load_reward("pae", base_url=dead, readout="decode", deadline=0.5, on_failure=on_failure)
        start = time.monotonic()
        rewards, info = reward(images, poems)
        assert time.monotonic() - start < 0.5 + 30  # the deadline, and some room for a loaded machine: never a hang
        assert info["status"] == [status] * 3, info["status"]
        assert all("no answer within the call's deadline of 0.5 s" in e for e in info["error"]), info["error"]
        assert np.array_equal(rewards, [value] * 3, equal_nan=True)
    reward = load_reward("pae", base_url=dead, readout="decode", deadline=0.5, on_failure="raise")
    with pytest.raises(RewardFailed, match="3 of the 3 images could not be scored: image 0: no answer within"):
        reward(images, poems)


def test_reward_options_are_checked(tiny_models):
    with pytest.raises(ValueError, match="on_failure must be"):
        load_reward("pae", base_url="http://127.0.0.1:9/v1", on_failure="zero")
    with pytest.raises(ValueError, match="on_failure must be"):
        load_reward("pae", base_url="http://127.0.0.1:9/v1", on_failure=True)
    with pytest.raises(ValueError, match="deadline= applies to a served judge"):
        load_reward(model=str(tiny_models["qwen3-vl"]), device="cpu", deadline=5)


def brightness(images, prompts, metadata):
    """A second reward, as Flow-GRPO combines several: the mean pixel value, in [0, 1]."""
    return np.array([np.asarray(im, dtype=np.float64).mean() / 255 for im in images]), {}


def flow_grpo_step(reward, images, prompts, metadata, weights=(("pae", 0.8), ("brightness", 0.2))):
    """What a Flow-GRPO step does with its rewards: each scorer called as `fn(images, prompts, metadata)`, their
    weighted sum, then advantages standardised per prompt with plain np.mean / np.std (its per-prompt stat tracker).
    Returns the sum, the advantages and each scorer's (rewards, info)."""
    scorers = {"pae": reward, "brightness": brightness}
    called = {name: scorers[name](images, prompts, metadata) for name, _ in weights}
    total = sum(weight * called[name][0] for name, weight in weights)
    return total, per_prompt_advantages(total, prompts), called


def per_prompt_advantages(total: np.ndarray, prompts: list[str]) -> np.ndarray:
    advantages = np.empty_like(total)
    for prompt in dict.fromkeys(prompts):
        group = [i for i, p in enumerate(prompts) if p == prompt]
        advantages[group] = (total[group] - np.mean(total[group])) / (np.std(total[group]) + 1e-4)
    return advantages


def corner_variants(picture, k: int) -> list:
    """k distinct images of one picture: a 16 × 16 corner patch of another grey in each (black, then lighter), which
    the second scorer, brightness, tells apart."""
    variants = []
    for j in range(k):
        image = picture.copy()
        image.paste((80 * j,) * 3, (0, 0, 16, 16))
        variants.append(image)
    return variants


@pytest.mark.slow
def test_a_flow_grpo_step_with_one_failed_image(pae_server):
    """Three distinct images per prompt (its picture with a corner patch of another grey: the tiny PAE's answers
    stay its own, brightness tells them apart); the first image's request fails (503 twice, retries spent). No NaN
    reaches the advantages unless the caller asked for NaN. By default the failed image's PAE reward is the mean of
    its prompt's other images', so PAE's part of its centred reward is zero: with PAE alone its advantage is 0, in the
    weighted sum it is what brightness alone gives it (not 0). A fixed fill gives it that value; with "nan" its whole
    group's advantages are NaN, as Flow-GRPO's np.mean and np.std make them. The poems come as docs/reward.md shows
    them (no id), and the reward is scene consistency alone, null (so 0) for the second picture's poem: the call's
    mean is not the failed image's poem's."""
    pictures, poems = synthetic()
    images = [variant for picture in pictures for variant in corner_variants(picture, 3)]
    poems = [p for p in poems for _ in range(3)]
    prompts = [p.text for p in poems]
    metadata = [{"poem": {"title": p.title, "author": p.author, "text": p.text}} for p in poems]  # the poem itself
    group = [0, 1, 2]
    for on_failure in ("mean", 0.0, "nan"):
        with FaultProxy(pae_server["url"], faults=["503", "503"]) as proxy:
            reward = load_reward(pae_server["model"], base_url=proxy.url, readout="decode", concurrency=1, retries=1,
                                 backoff=0.05, on_failure=on_failure, scalar=Scalar(weights={"scene_consistency": 1}))
            total, advantages, called = flow_grpo_step(reward, images, prompts, metadata)
        (pae, info), (bright, _) = called["pae"], called["brightness"]
        assert info["status"] == ["nan" if on_failure == "nan" else "filled"] + ["ok"] * 8, info["status"]
        assert "HTTP 503" in info["error"][0] and info["error"][1:] == [None] * 8
        assert len(set(bright[group])) == 3  # distinct images: the second scorer differs within the group
        if on_failure == "nan":
            assert np.isnan(advantages[group]).all() and np.isfinite(advantages[3:]).all()
            continue
        assert np.isfinite(total).all() and np.isfinite(advantages).all()
        if on_failure == "mean":
            assert list(pae[1:]) == [1.0] * 2 + [0.0] * 3 + [1.0] * 3  # the poems' rewards differ
            assert pae[0] == np.mean(pae[1:3])  # its prompt's mean: PAE's part of its centred reward is zero
            assert per_prompt_advantages(pae, prompts)[0] == pytest.approx(0.0, abs=1e-9)  # PAE the only reward
            from_brightness = 0.2 * (bright[0] - bright[group].mean()) / (np.std(total[group]) + 1e-4)
            assert advantages[0] == pytest.approx(from_brightness, rel=1e-9) and advantages[0] < 0  # darkest patch
        else:
            assert pae[0] == 0.0 and advantages[0] < 0 < min(advantages[1:3])


def sent_image(request: dict):
    """The image a chat completion request carries (its data URL), as PIL."""
    import base64
    import io

    from PIL import Image

    part = next(p for m in request["messages"] if isinstance(m["content"], list) for p in m["content"]
                if p.get("type") == "image_url")
    return Image.open(io.BytesIO(base64.b64decode(part["image_url"]["url"].split(",", 1)[1])))


@pytest.mark.slow
def test_a_served_fleet_abstains_as_the_in_process_reward_does(pae_server, tmp_path):
    """Two replicas (proxies in front of the served tiny PAE) whose answers carry a readout's logprobs, which
    `transformers serve` does not return: sure (every anchor's mass on the answer) for an image with a grey corner,
    unsure (a third of the mass off the answer's anchor on several dimensions) for one with a black corner. Three
    distinct images per poem, one of them black-cornered. Through Flow-GRPO's signature and TRL's, the fleet abstains
    on exactly the unsure images, where `Calibration.abstains` says (`assert_abstains_as_calibrated`, the check the
    in-process reward passes too), and fills each with its poem's mean over the kept ones."""
    from test_readout import served_logprobs
    from test_reward import assert_abstains_as_calibrated, calibration_of

    from tangpoetrybench.judging.prompt import format_answer
    from tangpoetrybench.rubric import load_rubric

    tang = load_rubric("tang")
    answer = format_answer({k: tang.dimension(k).scores[0] for k in tang.keys}, tang)
    sure, tokens = served_logprobs(answer, {}, {})
    firsts = [i for i, t in enumerate(tokens) if t == "1"][:6]  # the first token of six dimensions' values
    unsure, _ = served_logprobs(answer, {i: [("0", math.log(1 / 3))] for i in firsts},
                                {i: math.log(2 / 3) for i in firsts})

    def respond(request: dict, data: dict) -> dict:
        black = sent_image(request).convert("RGB").getpixel((0, 0)) == (0, 0, 0)
        data["choices"][0]["message"]["content"] = answer
        data["choices"][0]["logprobs"] = unsure if black else sure
        return data

    pictures, poems = synthetic()
    images = [variant for picture in pictures for variant in corner_variants(picture, 3)]
    poems = [p for p in poems for _ in range(3)]
    metadata = [{"poem": {"title": p.title, "author": p.author, "text": p.text}} for p in poems]
    proxies = [FaultProxy(pae_server["url"], strip_fields=("logprobs", "top_logprobs"), rewrite=respond)
               for _ in range(2)]
    with proxies[0] as a, proxies[1] as b:
        fleet = [a.url, b.url]
        plain = load_reward(pae_server["model"], base_url=fleet, max_new_tokens=8)
        path = calibration_of(plain.evaluator, 0.01).write(tmp_path / "calibration.json")
        reward = load_reward(pae_server["model"], base_url=fleet, max_new_tokens=8, calibration=path, abstain="mean")
        scores, info = reward(images, [p.text for p in poems], metadata)
        trl = reward.trl(prompts=[p.text for p in poems], completions=images, poem=[m["poem"] for m in metadata])
        assert chats(a) and chats(b)  # both replicas answered
    assert info["status"] == ["ok"] * 9 and info["abstained"].tolist() == [True, False, False] * 3
    assert info["quality_sd"][0] > 0.01 and info["quality_sd"][1] == 0.0
    assert_abstains_as_calibrated(reward, scores, info, [p.text for p in poems])
    assert trl == pytest.approx(scores.tolist())
