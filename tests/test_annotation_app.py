"""tpb annotate's app for real: two raters in a real Chromium, each through Phase 1 then Phase 2 for three images; the
same flows through gradio_client against `tpb annotate serve` killed mid-session and started again; a six-dimension
rubric of another tradition through the API. Every wait is on an event (a page element, a line from the server)."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
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
    page.locator("#poem h3").wait_for(state="visible")
    assert page.locator("#poem h3").inner_text() == f"《{campaign.poem(held.poem_id).title}》"
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


def serve(raw: Path, db: Path, log: Path) -> tuple[subprocess.Popen, str]:
    """`tpb annotate serve` in a process of its own: (the process, its URL) once it says it is serving."""
    port = free_port()
    command = [sys.executable, "-m", "tangpoetrybench.cli", "annotate", "serve", str(raw), "--db", str(db), "--port",
               str(port), "--overlap", "2"]
    with log.open("a") as errors:
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=errors, text=True,
                                env={**os.environ, "HF_HUB_OFFLINE": "1", "GRADIO_ANALYTICS_ENABLED": "False"})
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
    """`tpb publish --annotation RAW` → the folder's own app.py with its Space variables → an admin invites a rater
    on the page, the rater rates, and the files the CommitScheduler would commit are written (the Hub itself is not
    reachable from the tests: the scheduler is not started)."""
    from gradio_client import Client

    from conftest import launched_space
    from tangpoetrybench.annotation.export import write_campaign_files
    from tangpoetrybench.hub.annotation_space import export_folder
    from tangpoetrybench.hub.publish import publish

    raw = unrated_release(tmp_path / "raw")
    folder = publish(tmp_path / "hub", org="acme", annotation=raw)["annotation"]
    assert "datasets:\n- acme/TangPoetryBench" in (folder / "README.md").read_text()
    assert (folder / "release" / "candidates.jsonl").is_file() and not (folder / "release" / "ratings.csv").exists()
    secret = "the-admin-secret-of-this-space"
    db = tmp_path / "data" / "annotations.sqlite"
    env = {"TPB_ANNOTATE_RELEASE": str(folder / "release"), "TPB_ANNOTATE_DB": str(db), "TPB_ADMIN_TOKEN": secret}
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
