"""tpb annotate's app for real: two raters in a real Chromium, each through Phase 1 then Phase 2 for three images; the
same flows through gradio_client against `tpb annotate serve` killed mid-session and started again; a six-dimension
rubric of another tradition through the API. Every wait is on an event (a page element, a line from the server)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
from contextlib import contextmanager
from dataclasses import asdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from test_annotation import HAIKU, TANG_KEYS, haiku_release, unrated_release
from tangpoetrybench.annotation.app import launch
from tangpoetrybench.annotation.assignment import Plan
from tangpoetrybench.annotation.campaign import load_campaign
from tangpoetrybench.annotation.export import export_release
from tangpoetrybench.annotation.protocol import ui_text
from tangpoetrybench.annotation.store import Store
from tangpoetrybench.hub.annotation_space import annotation_app

pytestmark = pytest.mark.slow
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]


def task_of(outputs) -> dict:
    """The task (`Task.to_json`) among an API call's outputs."""
    return next(o for o in outputs if isinstance(o, dict) and "phase" in o)


def right_position(store: Store, rater: str) -> int:
    held = store.open_assignment(rater)
    return held.candidates.index(held.poem_id) + 1


@pytest.fixture
def served(tmp_path):
    """The app over a fresh campaign, in this process, on 127.0.0.1: (url, store, raw)."""
    raw = unrated_release(tmp_path / "raw")
    store = Store(tmp_path / "c.sqlite")
    demo = annotation_app(load_campaign(raw), store, Plan(overlap=2)).blocks()
    _, url, _ = launch(demo, server_name="127.0.0.1", server_port=None, prevent_thread_lock=True, quiet=True)
    try:
        yield url, store, raw
    finally:
        demo.close()


def rate_in_browser(page, store: Store, campaign, rater: str, lang: str, answers: str, done: int,
                    leave_one_out: bool = False) -> None:
    """One image in the page: check the poem is hidden, choose the right poem, check it is revealed, answer every
    question (with `leave_one_out`, first submit with the last unanswered and check that it is refused)."""
    page.locator("#candidates label").first.wait_for(state="visible")
    held = store.open_assignment(rater)
    # the reveal is not in the page, hidden or not (gradio renders no element of an invisible column)
    assert page.locator("#poem").count() == 0 and page.locator("h3").count() == 0
    src = page.locator("#picture img").get_attribute("src")
    assert src.rsplit("/", 1)[-1] == "image.png"  # pixels under a neutral name: no generator, no poem id
    labels = page.locator("#candidates label")
    assert labels.count() == 4
    labels.nth(held.candidates.index(held.poem_id)).click()
    page.locator("#choose").click()
    page.locator("#poem textarea").wait_for(state="visible")
    poem = campaign.poem(held.poem_id)
    assert page.locator("#poem textarea").input_value().startswith(f"《{poem.title}》\n{poem.author}\n")
    keys = list(TANG_KEYS)
    for key, letter in zip(keys[:-1], answers):
        page.locator(f"#q-{key} input[value='{letter}']").check()
    if leave_one_out:
        page.locator("#submit").click()
        unanswered = ui_text("unanswered", lang, names="")[:12]
        page.get_by_text(unanswered).first.wait_for(state="visible")
        assert store.open_assignment(rater).id == held.id and store.open_assignment(rater).answers is None
    page.locator(f"#q-{keys[-1]} input[value='{answers[-1]}']").check()
    page.locator("#submit").click()
    page.get_by_text(ui_text("welcome", lang, name=rater, done=done + 1)).wait_for(state="visible")


@pytest.mark.skipif(not shutil.which("chromium"), reason="Debian's chromium is not installed")
def test_two_raters_in_a_real_browser(served, tmp_path):
    playwright = pytest.importorskip("playwright.sync_api")
    url, store, raw = served
    campaign = load_campaign(raw)
    raters = {"alice": ("en", "abbaeaabcb"), "bo": ("zh", "aacadbbadc")}
    tokens = {name: store.invite(name, "crowd", lang, 0.0) for name, (lang, _) in raters.items()}
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=shutil.which("chromium"), headless=True, args=CHROMIUM_ARGS)
        try:
            pages = {}
            for name in raters:
                page = browser.new_context(viewport={"width": 1300, "height": 1000}).new_page()
                page.set_default_timeout(0)  # wait for each event however long a loaded machine takes (0: no limit)
                errors = []
                page.on("pageerror", lambda e, errors=errors: errors.append(str(e)))
                page.goto(f"{url}?token={tokens[name]}")
                pages[name] = (page, errors)
            for n in range(3):  # the two raters take turns
                for name, (lang, answers) in raters.items():
                    rate_in_browser(pages[name][0], store, campaign, name, lang, answers, n, leave_one_out=n == 0)
            pages["alice"][0].screenshot(path=str(tmp_path / "phase1.png"), full_page=True)
            assert all(not errors for _, errors in pages.values())
            admin = browser.new_page()
            admin.set_default_timeout(0)
            admin.goto(f"{url}?token={store.invite('lead', 'admin', 'en', 0.0)}")
            admin.get_by_text("6 ratings from 2 raters").wait_for(state="visible")
            admin.locator("#qc-progress").get_by_text("all", exact=True).filter(visible=True).first.wait_for()
            assert not admin.locator("#candidates").is_visible()
            stranger = browser.new_page()
            stranger.goto(f"{url}?token=not-a-token")
            stranger.get_by_text(ui_text("no_token", "en")).wait_for(state="visible")
            assert not stranger.locator("#candidates").is_visible() and not stranger.locator("#qc-summary").is_visible()
        finally:
            browser.close()
    rated = [a for a in store.assignments() if a.done]
    assert [sum(a.rater == name for a in rated) for name in raters] == [3, 3]
    assert len(rated) == 6 and len({(a.rater, a.image_id) for a in rated}) == 6
    for a in rated:
        lang, answers = raters[a.rater]
        assert a.answers == dict(zip(TANG_KEYS, answers)) and a.choice == a.poem_id
        assert set(a.answer_seconds) == set(TANG_KEYS)
        assert all(0 <= s <= a.seconds - a.phase1_seconds + 0.01 for s in a.answer_seconds.values())
    path, mine, _ = export_release(store, raw)
    assert mine == 6


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve(raw: Path, db: Path, log: Path, env: dict[str, str] | None = None) -> tuple[subprocess.Popen, str]:
    """`tpb annotate serve` in a process of its own (`env` added to its environment): (the process, its URL) once it
    says it is serving."""
    port = free_port()
    command = [sys.executable, "-m", "tangpoetrybench.cli", "annotate", "serve", str(raw), "--db", str(db), "--port",
               str(port), "--overlap", "2"]
    with log.open("a") as errors:
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=errors, text=True,
                                env={**os.environ, "HF_HUB_OFFLINE": "1", "GRADIO_ANALYTICS_ENABLED": "False",
                                     **(env or {})})
    for line in proc.stdout:  # until the server says where it is, or ends
        if line.startswith("Serving on "):
            threading.Thread(target=proc.stdout.read, daemon=True).start()  # its later lines never fill the pipe
            return proc, line.split()[2]
    raise AssertionError(f"tpb annotate serve ended ({proc.wait()}): {log.read_text()[-3000:]}")


def test_killed_and_started_again_every_submitted_answer_is_there_once(tmp_path):
    from gradio_client import Client

    raw = unrated_release(tmp_path / "raw")
    db = tmp_path / "c.sqlite"
    store = Store(db)
    tokens = {name: store.invite(name, "crowd", "en", 0.0) for name in ("ana", "ben")}
    answers = {"ana": list("abbaeaabcb"), "ben": list("aacadbbadc")}
    sent: dict[tuple[str, int], list[str]] = {}

    def rate(client, name: str, ticket: int) -> dict:
        sent[(name, ticket)] = answers[name]
        return task_of(client.predict(tokens[name], str(ticket), *answers[name], api_name="/rate"))

    def choose(client, name: str, ticket: int) -> dict:
        return task_of(client.predict(tokens[name], str(ticket), str(right_position(store, name)), api_name="/choose"))

    proc, url = serve(raw, db, tmp_path / "serve.log")
    try:
        ana, ben = Client(url, verbose=False), Client(url, verbose=False)
        first = task_of(ana.predict(tokens["ana"], api_name="/open"))
        assert first["phase"] == "phase1" and first["poem"] is None
        assert choose(ana, "ana", first["ticket"])["poem"]["title"]
        second = rate(ana, "ana", first["ticket"])
        assert choose(ana, "ana", second["ticket"])["phase"] == "phase2"  # ana is in Phase 2 of her second image
        b1 = task_of(ben.predict(tokens["ben"], api_name="/open"))
        assert choose(ben, "ben", b1["ticket"])["phase"] == "phase2"
    finally:
        proc.send_signal(signal.SIGKILL)  # no shutdown of any kind
        proc.wait()
    proc, url = serve(raw, db, tmp_path / "serve.log")
    try:
        ana, ben = Client(url, verbose=False), Client(url, verbose=False)
        resumed = task_of(ana.predict(tokens["ana"], api_name="/open"))
        assert (resumed["phase"], resumed["ticket"]) == ("phase2", second["ticket"])  # where she was
        again = rate(ana, "ana", first["ticket"])  # her first rating sent again (its answer lost in the kill)
        assert again["ticket"] == second["ticket"] and again["done"] == 1
        assert choose(ana, "ana", second["ticket"])["phase"] == "phase2"  # her choice sent again: nothing changes
        third = rate(ana, "ana", second["ticket"])
        fourth = rate(ana, "ana", choose(ana, "ana", third["ticket"])["ticket"])
        assert fourth["done"] == 3
        b2 = rate(ben, "ben", task_of(ben.predict(tokens["ben"], api_name="/open"))["ticket"])
        for _ in range(2):
            b2 = rate(ben, "ben", choose(ben, "ben", b2["ticket"])["ticket"])
        assert b2["done"] == 3
        with pytest.raises(Exception, match="Please answer every question"):
            ben.predict(tokens["ben"], str(b2["ticket"]), *answers["ben"][:-1], None, api_name="/rate")
        out = tmp_path / "copy.sqlite"  # a backup and an export while it serves
        assert subprocess.run([sys.executable, "-m", "tangpoetrybench.cli", "annotate", "backup", str(db), str(out)],
                              capture_output=True).returncode == 0
        export_release(store, raw)
    finally:
        proc.terminate()
        proc.wait()
    rated = [a for a in store.assignments() if a.done]
    assert {(a.rater, a.id): a.answers for a in rated} == {k: dict(zip(TANG_KEYS, v)) for k, v in sent.items()}
    assert len(rated) == 6 and len({(a.rater, a.image_id) for a in rated}) == 6
    lines = (raw / "ratings.csv").read_text().splitlines()
    assert len(lines) == 7 and len({line.split(",")[0] for line in lines[1:]}) == 6
    assert len([a for a in Store(out).assignments() if a.done]) == 6


def test_a_six_dimension_rubric_drives_the_api(tmp_path):
    from gradio_client import Client

    raw = haiku_release(tmp_path / "raw")
    store = Store(tmp_path / "c.sqlite")
    demo = annotation_app(load_campaign(raw, rubric=HAIKU), store, Plan()).blocks()
    _, url, _ = launch(demo, server_name="127.0.0.1", server_port=None, prevent_thread_lock=True, quiet=True)
    try:
        token = store.invite("yuki", "expert", "zh", 0.0)
        client = Client(url, verbose=False)
        params = client.view_api(return_format="dict")["named_endpoints"]["/rate"]["parameters"]
        assert len(params) == 2 + 6
        task = task_of(client.predict(token, api_name="/open"))
        task = task_of(client.predict(token, str(task["ticket"]), str(right_position(store, "yuki")),
                                      api_name="/choose"))
        assert [q["name"] for q in task["questions"]] == ["清晰度", "季语", "切字", "意象", "留白", "总体"]
        client.predict(token, str(task["ticket"]), *"abcaba", api_name="/rate")
    finally:
        demo.close()
    [done] = [a for a in store.assignments() if a.done]
    assert done.answers == dict(zip(["clarity", "seasonal_word", "cutting_word", "imagery", "restraint", "overall"],
                                    "abcaba"))


def test_the_published_rating_space_runs_from_its_folder(tmp_path):
    """`tpb publish --annotation RAW` → the folder's own app.py with its Space variables (the sealed release's key
    from a folder, as it would come from its private dataset) → an admin invites a rater on the page, the rater
    rates, and the files the CommitScheduler would commit are written (the Hub itself is not reachable from the
    tests: the scheduler is not started here; test_annotation.py runs it against a loopback stand-in)."""
    from gradio_client import Client

    from conftest import launched_space
    from tangpoetrybench.annotation.export import write_campaign_files
    from tangpoetrybench.hub.annotation_space import export_folder
    from tangpoetrybench.hub.publish import publish

    raw = unrated_release(tmp_path / "raw")
    written = publish(tmp_path / "hub", org="acme", annotation=raw)
    folder, key = written["annotation"], written["annotation-key"]
    assert "datasets:\n- acme/TangPoetryBench" in (folder / "README.md").read_text()
    assert (key / "candidates.jsonl").is_file() and not (folder / "release" / "candidates.jsonl").exists()
    assert not (folder / "release" / "ratings.csv").exists()
    secret = "the-admin-secret-of-this-space"
    db = tmp_path / "data" / "annotations.sqlite"
    env = {"TPB_ANNOTATE_RELEASE": str(folder / "release"), "TPB_ANNOTATE_DB": str(db), "TPB_ADMIN_TOKEN": secret,
           "TPB_ANNOTATE_KEY": str(key)}
    with launched_space(env, "annotation_space_app", folder / "app.py") as (module, url):
        assert module.scheduler is None  # no TPB_ANNOTATE_REPO
        client = Client(url, verbose=False)
        link = client.predict(secret, "mei", True, "zh", api_name="/invite")
        token = link.rsplit("?token=", 1)[1].rstrip("`")
        with pytest.raises(Exception, match="协调者页面|coordinators"):
            client.predict(token, api_name="/qc")
        task = task_of(client.predict(token, api_name="/open"))
        store = Store(db)
        task = task_of(client.predict(token, str(task["ticket"]), str(right_position(store, "mei")),
                                      api_name="/choose"))
        client.predict(token, str(task["ticket"]), *"aaaaaaaaaa", api_name="/rate")
        summary = client.predict(secret, api_name="/qc")[0]
        assert summary.startswith("1 ratings from 1 raters")
    ratings, annotations = write_campaign_files(store, export_folder(db))
    assert ratings.parent == tmp_path / "data" / "export"
    rows = ratings.read_text().splitlines()
    assert len(rows) == 2 and rows[1].split(",")[1:3] == ["mei", "expert"]


# --- what a rater's browser receives (issue 45) ----------------------------------------------------------------------

# Tees every fetch's response (the config, the API's answers, the event stream gradio's client reads them from) into
# window.__received as it arrives: Playwright's own response bodies wait for a stream's end, which never comes.
CAPTURE = """
window.__received = [];
const fetched = window.fetch;
window.fetch = async (...args) => {
  const response = await fetched(...args);
  const entry = {url: String((args[0] && args[0].url) || args[0]), text: ""};
  window.__received.push(entry);
  if (response.body) {
    const reader = response.clone().body.getReader(), decoder = new TextDecoder();
    (async () => { for (;;) { const {done, value} = await reader.read(); if (done) break;
                              entry.text += decoder.decode(value, {stream: true}); } })();
  }
  return response;
};
"""
STATIC = ("/assets/", "/static/", "/theme.css", "/favicon")  # gradio's own files, the same for every app
PIXELS_ONLY_CHUNKS = {b"IHDR", b"PLTE", b"tRNS", b"IDAT", b"IEND"}  # what a PNG of pixels alone is made of


def png_chunks(data: bytes) -> list[bytes]:
    """The chunk types of a PNG, in order."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", data[:16]
    found, at = [], 8
    while at < len(data):
        length = int.from_bytes(data[at:at + 4], "big")
        found.append(data[at + 4:at + 8])
        at += 12 + length
    return found


class Received:
    """Everything a page received from the app, from the moment it opened: the page, its config, every API answer
    and event stream (as text), and the images (as bytes). `collect` after an element the last answer shows."""

    def __init__(self, page):
        self.page, self.responses = page, []
        page.add_init_script(CAPTURE)
        page.on("response", lambda r: self.responses.append(r))

    def collect(self) -> tuple[str, list[bytes]]:
        texts, images = [], []
        for r in self.responses:
            kind = r.headers.get("content-type") or ""
            if any(s in r.url for s in STATIC) or "event-stream" in kind:
                continue  # a stream is read from the page's own copy below
            (images if kind.startswith("image/") else texts).append(r.body())
        streams = self.page.evaluate("window.__received.map(e => e.url + '\\n' + e.text)")
        return "\n".join([*(t.decode("utf-8", "replace") for t in texts), *streams]), images


def leaky_release(root: Path) -> tuple[Path, dict]:
    """A release made to leak its answer: poems with ids, titles, authors and texts found nowhere else; the image to
    rate first illustrates a ci (tradition song_ci) whose three distractors are Tang poems, so the ci's rubric alone
    would name the answer; its PNG carries the poem in every kind of metadata (tEXt, zTXt, iTXt, XMP, EXIF) and a
    colour profile. Returns (the release, the answer's poem)."""
    from PIL import Image, ImageCms, PngImagePlugin

    from conftest import write_release
    from tangpoetrybench.dataset.distractors import CandidateSet, write_candidates
    from tangpoetrybench.poems import read_poems

    poems = [{"poem_id": f"poemid-{k}-q7x", "title": title, "author": author, "text": text, "tradition": "tang"}
             for k, (title, author, text) in enumerate([
                 ("静夜思", "李白", "床前明月光，疑是地上霜。\n举头望明月，低头思故乡。"),
                 ("春晓", "孟浩然", "春眠不觉晓，处处闻啼鸟。\n夜来风雨声，花落知多少。"),
                 ("登鹳雀楼", "王之涣", "白日依山尽，黄河入海流。\n欲穷千里目，更上一层楼。"),
                 ("鹿柴", "王维", "空山不见人，但闻人语响。\n返景入深林，复照青苔上。")])]  # no title in a text
    answer = {"poem_id": "poemid-answer-z9k", "title": "卜算子·咏梅", "author": "陆游",
              "text": "驿外断桥边，寂寞开无主。\n已是黄昏独自愁，更著风和雨。", "tradition": "song_ci"}
    poems.append(answer)
    generators = {"gensecret-a": {"display": "A", "unseen": False}, "gensecret-b": {"display": "B", "unseen": False}}
    raw = write_release(root, [], poems=poems, generators=generators,
                        images=[f"{g}/{p['poem_id']}" for g in generators for p in poems])
    (raw / "ratings.csv").unlink()
    ids = [p["poem_id"] for p in poems]
    sets = [CandidateSet(pid, tuple([pid] + [o for o in ids[:4] if o != pid][:3]), (), "test") for pid in ids]
    write_candidates(sets, read_poems(raw / "poems.jsonl"), raw / "candidates.jsonl", {"similarity": "test"})
    told = f"{answer['poem_id']} {answer['title']} {answer['author']} {answer['text']} song_ci gensecret-a"
    latin = f"{answer['poem_id']}.png song_ci gensecret-a"  # tEXt and zTXt are Latin-1
    info = PngImagePlugin.PngInfo()
    info.add_text("parameters", latin)
    info.add_text("Description", latin, zip=True)
    info.add_itxt("Title", told)
    info.add_itxt("XML:com.adobe.xmp", f'<x:xmpmeta xmlns:x="adobe:ns:meta/"><dc:title>{told}</dc:title></x:xmpmeta>')
    exif = Image.Exif()
    exif[0x010E] = told  # ImageDescription
    path = raw / "images" / "gensecret-a" / f"{answer['poem_id']}.png"
    srgb = ImageCms.ImageCmsProfile(ImageCms.createProfile("sRGB")).tobytes()
    Image.open(path).convert("RGB").save(path, pnginfo=info, exif=exif, icc_profile=srgb)
    assert {b"tEXt", b"zTXt", b"iTXt", b"eXIf", b"iCCP"} <= set(png_chunks(path.read_bytes()))
    return raw, answer


def assert_nothing_names_the_answer(text: str, images: list[bytes], answer: dict, distractors: list[dict]) -> None:
    """Phase 1's bytes: images of pixels alone; no poem id, file name, tradition or rubric wording of the answer
    anywhere; its title, author and text exactly as often as each distractor's (in the candidate list alone)."""
    assert images and all(set(png_chunks(b)) <= PIXELS_ONLY_CHUNKS for b in images), [png_chunks(b) for b in images]
    everything = text + "".join(b.decode("latin-1") for b in images)
    for secret in [answer["poem_id"], "poemid-", "gensecret", f"{answer['poem_id']}.png", "song_ci", "Song Ci",
                   "宋词", "the ci specifies no setting", "the ci describes no such elements", "词作未"]:
        assert secret not in everything, secret
    for field in ("title", "author"):
        counts = {p[field]: text.count(p[field]) for p in [answer, *distractors]}
        assert len(set(counts.values())) == 1 and counts[answer[field]] > 0, (field, counts)
    first_lines = {p["text"].split("\n")[0]: text.count(p["text"].split("\n")[0]) for p in [answer, *distractors]}
    assert len(set(first_lines.values())) == 1, first_lines


@pytest.mark.skipif(not shutil.which("chromium"), reason="Debian's chromium is not installed")
def test_phase_1_sends_the_browser_nothing_that_names_the_poem(tmp_path):
    """A rater opens their link in Chromium; everything the page receives before the choice (the page and its config,
    every API answer on the event stream, the image's bytes) is checked for the answer's id, file name, tradition and
    rubric wording, for metadata in the image, and for its title, author and text anywhere but the candidate list.
    Before the fix the image came back with its tEXt chunks (gradio writes a PIL image's text `info` back) and the
    instructions quoted the ci's rubric. The same through the API (`/open` with gradio_client)."""
    playwright = pytest.importorskip("playwright.sync_api")
    from gradio_client import Client

    raw, answer = leaky_release(tmp_path / "raw")
    campaign = load_campaign(raw)
    store = Store(tmp_path / "c.sqlite")
    first = f"gensecret-a/{answer['poem_id']}"
    demo = annotation_app(campaign, store, Plan(priority=(first,))).blocks()
    _, url, _ = launch(demo, server_name="127.0.0.1", server_port=None, prevent_thread_lock=True, quiet=True)
    try:
        tokens = [store.invite(name, "crowd", lang, 0.0) for name, lang in (("ann", "en"), ("bei", "zh"))]
        with playwright.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=shutil.which("chromium"), headless=True, args=CHROMIUM_ARGS)
            try:
                page = browser.new_page()
                page.set_default_timeout(0)
                received = Received(page)
                page.goto(f"{url}?token={tokens[0]}")
                page.locator("#candidates label").first.wait_for(state="visible")
                page.locator("#picture img").wait_for(state="visible")
                page.wait_for_function("window.__received.some(e => e.text.includes('process_completed'))")
                text, images = received.collect()
            finally:
                browser.close()
        held = store.open_assignment("ann")
        assert held.image_id == first and held.phase == "phase1"
        distractors = [asdict(campaign.poem(c)) for c in held.candidates if c != answer["poem_id"]]
        assert_nothing_names_the_answer(text, images, answer, distractors)
        client = Client(url, verbose=False)
        outputs = client.predict(tokens[1], api_name="/open")
        [picture] = [o for o in outputs if isinstance(o, str) and o.endswith(".png")]
        api_text = json.dumps([o for o in outputs if o is not picture], ensure_ascii=False)
        assert_nothing_names_the_answer(api_text, [Path(picture).read_bytes()], answer, distractors)
    finally:
        demo.close()


@contextmanager
def tracker():
    """A loopback server standing for an outside one: (its URL, the paths it was asked for)."""
    asked: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            asked.append(self.path)
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", asked
    finally:
        server.shutdown()
        server.server_close()


def markup_release(root: Path, outside: str) -> Path:
    """A release of haiku whose titles, authors, texts and paraphrases, and whose own rubric's words, hold HTML and
    Markdown that would load `outside`'s resources (an image, a frame, a stylesheet) or change the page, were they
    read as markup."""
    from conftest import POEMS, write_release
    from tangpoetrybench.dataset.distractors import CandidateSet, write_candidates
    from tangpoetrybench.poems import read_poems

    poems = [{**p, "tradition": "haiku", "title": f'{p["title"]}<img src="{outside}/title-{k}.png" id="injected">',
              "author": f"**{p['author']}**<b>!</b>",
              "text": p["text"] + f'\n<iframe src="{outside}/frame-{k}"></iframe><link rel="stylesheet" '
                                  f'href="{outside}/style-{k}.css">',
              "paraphrase": f"![x]({outside}/paraphrase-{k}.png) [a link]({outside}/link-{k}) "
                            "<script>alert(1)</script>"}
             for k, p in enumerate(POEMS[:4])]
    raw = write_release(root, [], poems=poems, images=[f"g1/{p['poem_id']}" for p in poems])
    (raw / "ratings.csv").unlink()
    (raw / "rubrics").mkdir()
    (raw / "rubrics" / "haiku.yaml").write_text(HAIKU.read_text(encoding="utf-8").replace(
        "label: {en: the haiku has no season word,",
        f"label: {{en: \"the haiku has no season word <img src='{outside}/rubric.png' id='injected'> **!**\","),
        encoding="utf-8")
    ids = [p["poem_id"] for p in poems]
    write_candidates([CandidateSet(pid, (pid, *(o for o in ids if o != pid)), (), "test") for pid in ids],
                     read_poems(raw / "poems.jsonl", traditions=("haiku",)), raw / "candidates.jsonl",
                     {"similarity": "test"})
    return raw


@pytest.mark.skipif(not shutil.which("chromium"), reason="Debian's chromium is not installed")
def test_the_poems_markup_is_shown_as_its_literal_characters(tmp_path):
    """Titles, authors, texts and paraphrases holding HTML and Markdown, and a rubric whose words do, in Chromium:
    Phase 1's candidates, Phase 2's poem and its instructions show them character for character, no element of the
    page points at the outside server, and it is never asked for anything. Before the fix Phase 2 rendered the poem
    and the instructions as Markdown: the title's <img> was an (empty) image loaded from outside."""
    playwright = pytest.importorskip("playwright.sync_api")
    from tangpoetrybench.annotation.app import poem_text

    with tracker() as (outside, asked):
        raw = markup_release(tmp_path / "raw", outside)
        campaign = load_campaign(raw)
        store = Store(tmp_path / "c.sqlite")
        demo = annotation_app(campaign, store, Plan()).blocks()
        _, url, _ = launch(demo, server_name="127.0.0.1", server_port=None, prevent_thread_lock=True, quiet=True)
        try:
            token = store.invite("ann", "crowd", "en", 0.0)
            with playwright.sync_playwright() as p:
                browser = p.chromium.launch(executable_path=shutil.which("chromium"), headless=True,
                                            args=CHROMIUM_ARGS)
                try:
                    page = browser.new_page()
                    page.set_default_timeout(0)
                    page.goto(f"{url}?token={token}")
                    labels = page.locator("#candidates label")
                    labels.first.wait_for(state="visible")
                    held = store.open_assignment("ann")
                    shown = [labels.nth(i).inner_text() for i in range(4)]
                    for text, pid in zip(shown, held.candidates):
                        poem = campaign.poem(pid)
                        assert f"《{poem.title}》 {poem.author} — {poem.text.split(chr(10))[0]}" in text, text
                    labels.nth(held.candidates.index(held.poem_id)).click()
                    page.locator("#choose").click()
                    box = page.locator("#poem textarea")
                    box.wait_for(state="visible")
                    revealed = campaign.poem(held.poem_id)
                    assert box.input_value() == poem_text(protocol_view(campaign, held.poem_id), "en")
                    assert '<img src="' in box.input_value() and "<script>" in box.input_value()
                    assert page.locator(f"[src^='{outside}'], [href^='{outside}']").count() == 0
                    assert page.locator("#injected, iframe, script:text('alert')").count() == 0
                    assert revealed.paraphrase in box.input_value()
                    page.get_by_text("Instructions").click()  # the rubric's words, quoted in Phase 2's instructions
                    label = f"the haiku has no season word <img src='{outside}/rubric.png' id='injected'> **!**"
                    said = page.locator("li").filter(has_text="the haiku has no season word")
                    said.wait_for(state="visible")
                    assert label in said.inner_text()
                    assert page.locator("#q-seasonal_word label").filter(has_text=label).count() == 1
                    assert page.locator(f"[src^='{outside}'], [href^='{outside}']").count() == 0
                finally:
                    browser.close()
        finally:
            demo.close()
    assert asked == []


def protocol_view(campaign, poem_id: str):
    from tangpoetrybench.annotation.protocol import poem_view

    return poem_view(campaign.poem(poem_id), campaign.rubric(poem_id))


class Ticks:
    """The protocol's clock for a test of event order: each reading is the next whole second, whichever thread reads
    it (the test reads it too, before sending an event and when its answer arrives: the server's reading for that
    event lies strictly between)."""

    def __init__(self, start: int = 1_000_000):
        self.now, self.lock = start, threading.Lock()

    def __call__(self) -> float:
        with self.lock:
            self.now += 1
            return float(self.now)


class PageEvents:
    """The page's own events sent the way its browser sends them, through gradio's queue: `send` posts one (its
    dependency found by the element that triggers it, its inputs the page's values: elements by elem_id or label,
    gradio's State filled in by the server from the session) to `queue/join`; `completed` reads the session's event
    stream until each event sent is completed, noting `clock()` as each completion arrives."""

    def __init__(self, url: str, clock):
        import httpx

        self.url, self.clock, self.http = url.rstrip("/") + "/gradio_api/", clock, httpx.Client(timeout=None)
        config = self.http.get(url.rstrip("/") + "/config").json()
        self.names = {c["id"]: c.get("props", {}).get("elem_id") or c.get("props", {}).get("label")
                      for c in config["components"]}
        self.dependencies = config["dependencies"]

    def dependency(self, name: str, trigger: str) -> dict:
        return next(d for d in self.dependencies if any(self.names.get(t) == name and kind == trigger
                                                        for t, kind in d["targets"]))

    def send(self, session: str, name: str, trigger: str, values: dict) -> tuple[str, float]:
        """(the event's id, the clock just before it was sent)."""
        d = self.dependency(name, trigger)
        sent = self.clock()
        answer = self.http.post(self.url + "queue/join", json={
            "data": [values.get(self.names.get(i)) for i in d["inputs"]], "fn_index": d["id"], "session_hash": session,
            "event_data": None, "trigger_id": next(t for t, _ in d["targets"])})
        answer.raise_for_status()
        return answer.json()["event_id"], sent

    def completed(self, session: str, events: set[str]) -> dict[str, tuple[dict, float]]:
        """event id → (its completion message, the clock when it arrived), for each of `events`."""
        done = {}
        with self.http.stream("GET", self.url + "queue/data", params={"session_hash": session}) as stream:
            for line in stream.iter_lines():
                message = json.loads(line[5:]) if line.startswith("data:") else {}
                if message.get("msg") == "process_completed" and message.get("event_id") in events:
                    done[message["event_id"]] = (message, self.clock())
                if set(done) == events:
                    return done
        raise AssertionError(f"the event stream ended with {len(events) - len(done)} events not completed")


def test_each_answers_time_is_its_own_while_raters_answer_at_once(tmp_path):
    """Three raters, each in a session of their own, choose all ten answers at once (each question's radio event sent
    as the page sends it, together), then submit. Each answer's time must be that of its own event: after the test
    sent it and before its completion came back, on a clock every reading of which moves on. Before the fix the
    page kept the times in one session State that events running at once overwrote: answers lost their mark and
    took the submission's time. An API client marks through `/mark`."""
    from gradio_client import Client

    raw = unrated_release(tmp_path / "raw")
    store = Store(tmp_path / "c.sqlite")
    app = annotation_app(load_campaign(raw), store, Plan(overlap=3))
    app.protocol.clock = clock = Ticks()
    demo = app.blocks()
    _, url, _ = launch(demo, server_name="127.0.0.1", server_port=None, prevent_thread_lock=True, quiet=True)
    try:
        events, client = PageEvents(url, clock), Client(url, verbose=False)
        raters = {name: store.invite(name, "crowd", "en", 0.0) for name in ("ann", "ben", "cai")}
        tickets = {}
        for name, token in raters.items():
            task = task_of(client.predict(token, api_name="/open"))
            tickets[name] = task_of(client.predict(token, str(task["ticket"]), str(right_position(store, name)),
                                                   api_name="/choose"))["ticket"]
        sent: dict[tuple[str, str], tuple[str, float]] = {}
        lock = threading.Lock()

        def choose(name: str, key: str) -> None:
            got = events.send(f"session-{name}", f"q-{key}", "input",
                              {"token": raters[name], "ticket": str(tickets[name])})
            with lock:
                sent[(name, key)] = got

        threads = [threading.Thread(target=choose, args=(n, k)) for k in TANG_KEYS for n in raters]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        arrived = {}
        for name in raters:
            mine = {sent[(name, k)][0] for k in TANG_KEYS}
            arrived.update(events.completed(f"session-{name}", mine))
        for name, token in raters.items():  # each submits from the session that chose
            values = {"token": token, "ticket": str(tickets[name]), **{f"q-{k}": "a" for k in TANG_KEYS}}
            event, _ = events.send(f"session-{name}", "submit", "click", values)
            [(message, _)] = events.completed(f"session-{name}", {event}).values()
            assert message["success"], message
        rated = {a.rater: a for a in store.assignments() if a.done}
        assert set(rated) == set(raters)
        for (name, key), (event, before_sent) in sent.items():
            at = rated[name].revealed_at + rated[name].answer_seconds[key]
            assert before_sent < at < arrived[event][1], (name, key, before_sent, at, arrived[event][1])
        api = store.invite("dee", "crowd", "en", 0.0)  # an API client's mark
        task = task_of(client.predict(api, api_name="/open"))
        task = task_of(client.predict(api, str(task["ticket"]), str(right_position(store, "dee")), api_name="/choose"))
        before = clock()
        assert client.predict(api, str(task["ticket"]), "safety", api_name="/mark") is True
        after = clock()
    finally:
        demo.close()
    marked = store.open_assignment("dee").answer_marks["safety"]
    assert before < marked < after


def test_the_rating_app_takes_no_files_and_leaves_none_behind(tmp_path):
    """`tpb annotate serve` refuses every upload from anyone, token or not (it has no file inputs): gradio's upload
    route and a multipart body sent elsewhere are answered 403 and nothing is stored; its config says 0 bytes; the
    images it wrote for raters are gone once it is stopped (SIGTERM). Before the fix the upload was stored, with no
    limit, and stayed."""
    import httpx
    from gradio_client import Client

    raw = unrated_release(tmp_path / "raw")
    db, cache = tmp_path / "c.sqlite", tmp_path / "gradio"
    token = Store(db).invite("ann", "crowd", "en", 0.0)
    big = b"\x89PNG not really " * 50_000
    proc, url = serve(raw, db, tmp_path / "serve.log", env={"GRADIO_TEMP_DIR": str(cache)})
    try:
        for route in ("gradio_api/upload", "gradio_api/component_server", "gradio_api/process_recording"):
            answer = httpx.post(url + route, files={"files": ("x.png", big, "image/png")}, timeout=None)
            assert answer.status_code == 403, (route, answer.status_code, answer.text[:200])
        assert httpx.get(url + "config", timeout=None).json()["max_file_size"] == 0
        stored = [p for p in cache.rglob("*") if p.is_file()]
        assert not any(p.stat().st_size >= len(big) for p in stored), stored
        task_of(Client(url, verbose=False).predict(token, api_name="/open"))
        assert [p.name for p in cache.rglob("*.png")] == ["image.png"]  # the rater's image, as gradio wrote it
    finally:
        proc.terminate()
        assert proc.wait() == 0
    assert [p for p in cache.rglob("*") if p.is_file()] == []
