"""The rating app: Gradio components laid out over `protocol` (the rater's steps) and `live_qc` (the admin page).

One page serves everyone; the link's `?token=` says who is looking. A rater sees their current image in Phase 1 or
Phase 2 (every question is built from the rubric: one radio per dimension, its name, description and options in the
rater's language); an admin link opens the QC page instead; no token, or an unknown one, shows nothing but a line
saying to ask for a link. The events that change anything are API endpoints too, the same ones the page calls, each
taking the token: `/open` (token) → the current task; `/choose` (token, ticket, position 1-4); `/mark` (token, ticket,
question key: the rater chose an answer to it now, which times it; the page's radios send it); `/rate` (token, ticket,
one option letter per question in the rubric's order); `/qc` (admin token) and `/invite` (admin token, name, expert,
language). Each returns the page's components; the hidden `task` JSON is the task as data (`Task.to_json`).

Text from the release (titles, authors, poems, paraphrases) is shown as text, never as Markdown or HTML: the poem in a
read-only textbox, the candidates as a radio's labels. The app takes no files: a request carrying any (gradio's upload
routes, a multipart form anywhere) is refused before a byte of it is stored (`RefuseFiles`), gradio's own upload
limit is 0 bytes as well, and the images gradio writes for raters are deleted an hour after they were written and
when the app closes (`DELETE_CACHE`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any

import gradio as gr

from ..dataset.qc import QCConfig
from .campaign import DEFAULT_LANGUAGE, dimension_name
from .live_qc import Agreement, QCView, campaign_qc
from .protocol import PoemView, Protocol, RaterError, Task, ui_text

N_CANDIDATES = 4
IMAGE_HEIGHT = 560
QUEUE_CONCURRENCY = 8  # raters served at once; each step is a few SQLite statements
DELETE_CACHE = (3600, 3600)  # (every, older than) seconds: the images gradio wrote for raters, deleted
MAX_UPLOAD_BYTES = 0  # the app takes no files


class RefuseFiles:
    """ASGI middleware: every request that carries files (multipart form data: gradio's `/upload`, anything else) is
    answered 403 before its body is read, so nothing a visitor sends is ever stored."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and any(name.lower() == b"content-type" and value.lower().lstrip().startswith(
                b"multipart/") for name, value in scope.get("headers", ())):
            await send({"type": "http.response.start", "status": 403,
                        "headers": [(b"content-type", b"text/plain; charset=utf-8")]})
            await send({"type": "http.response.body", "body": b"This app takes no files."})
            return
        await self.app(scope, receive, send)


def launch_options() -> dict:
    """What the rating app is launched with. No run history: gradio would keep each call, the rater's token among its
    inputs, in the browser's storage. No files taken (`RefuseFiles`, and gradio's own limit at 0 bytes)."""
    from starlette.middleware import Middleware

    return {"run_history": False, "footer_links": ["api", "settings"], "max_file_size": MAX_UPLOAD_BYTES,
            "app_kwargs": {"middleware": [Middleware(RefuseFiles)]}}


def launch(demo: gr.Blocks, **kwargs):
    """Queue and launch the app with the options it needs (gradio's `launch` keywords pass through)."""
    demo.queue(default_concurrency_limit=QUEUE_CONCURRENCY)
    return demo.launch(**{**launch_options(), **kwargs})


def poem_text(poem: PoemView, lang: str) -> str:
    """The revealed poem as plain text (shown in a textbox: nothing in it is read as Markdown or HTML)."""
    text = f"{poem.shown_title}\n{poem.author}\n\n{poem.text}"
    if poem.paraphrase:
        text += f"\n\n{ui_text('paraphrase', lang)}: {poem.paraphrase}"
    return text


def candidate_label(n: int, poem: PoemView) -> str:
    return f"{n}. {poem.shown_title} {poem.author} — {' / '.join(poem.text.split(chr(10)))}"


@dataclass
class AnnotationApp:
    """The campaign's app: `blocks()` lays it out; the methods are what its events do."""

    protocol: Protocol
    qc: QCConfig = QCConfig()
    agreement: Agreement | None = None
    title: str = "TangPoetryBench · rating"

    @property
    def campaign(self):
        return self.protocol.campaign

    def qc_view(self, token: str | None) -> QCView:
        admin = self.protocol.person(token, admin=True)
        return campaign_qc(self.campaign, self.protocol.store, self.protocol.plan, self.qc, self.agreement,
                           now=self.protocol.clock(), lang=admin.lang)

    def invite(self, token: str | None, name: str, expert: bool, lang: str) -> str:
        """A rater's personal token (an admin's request)."""
        self.protocol.person(token, admin=True)
        return self.protocol.store.invite(name.strip(), "expert" if expert else "crowd", lang or DEFAULT_LANGUAGE,
                                          self.protocol.clock())

    def blocks(self) -> gr.Blocks:
        protocol, campaign = self.protocol, self.campaign
        keys = campaign.keys
        first = campaign.rubric(next(iter(campaign.release.poems)))
        letters = {k: [] for k in keys}  # every option any image's rubric has, so the API takes each
        for pid in campaign.release.poems:
            for d in campaign.rubric(pid).dimensions:
                letters[d.key] += [o for o in d.letters if o not in letters[d.key]]
        with gr.Blocks(title=self.title, delete_cache=DELETE_CACHE) as demo:
            token = gr.Textbox(visible=False, label="token")
            ticket = gr.Textbox(visible=False, label="ticket")
            task_json = gr.JSON(visible=False, label="task")
            heading = gr.Markdown(f"# {self.title}")
            notice = gr.Markdown(elem_id="notice")
            with gr.Column(visible=False) as rating_view:
                with gr.Accordion("Instructions", open=False) as instructions_box:
                    instructions = gr.Markdown()
                with gr.Row():
                    image = gr.Image(type="pil", format="png", interactive=False, show_label=False,  # lossless
                                     height=IMAGE_HEIGHT, elem_id="picture", buttons=["fullscreen"])
                    with gr.Column():
                        with gr.Column(visible=False) as phase1:
                            phase1_intro = gr.Markdown()
                            candidates = gr.Radio([(str(n), str(n)) for n in range(1, N_CANDIDATES + 1)],
                                                  show_label=False, elem_id="candidates")
                            choose = gr.Button("Confirm", variant="primary", elem_id="choose")
                        with gr.Column(visible=False) as phase2:
                            phase2_intro = gr.Markdown()
                            poem = gr.Textbox(label="Poem", interactive=False, lines=6, max_lines=40,
                                              elem_id="poem")
                            radios = {k: gr.Radio([(x, x) for x in letters[k]], label=dimension_name(
                                first.dimension(k), DEFAULT_LANGUAGE), elem_id=f"q-{k}") for k in keys}
                            submit = gr.Button("Submit", variant="primary", elem_id="submit")
            with gr.Column(visible=False) as admin_view:
                admin_summary = gr.Markdown(elem_id="qc-summary")
                refresh = gr.Button("Refresh")
                frames = {name: gr.Dataframe(label=label, wrap=True, interactive=False, elem_id=f"qc-{name}")
                          for name, label in (("flagged", "Flagged raters"), ("raters", "Per rater"),
                                              ("progress", "Progress"), ("agreement", "Agreement so far (Table 5)"),
                                              ("thresholds", "QC thresholds"))}
                with gr.Accordion("Invite a rater", open=False):
                    with gr.Row():
                        invite_name = gr.Textbox(label="name (letters, digits, . _ -)")
                        invite_expert = gr.Checkbox(label="expert")
                        invite_lang = gr.Dropdown(list(first.languages), value=DEFAULT_LANGUAGE, label="language")
                    invite_button = gr.Button("Make the link")
                    invite_link = gr.Markdown()
                timer = gr.Timer(30, active=False)

            task_outputs = [heading, notice, ticket, task_json, rating_view, instructions_box, instructions, image,
                            phase1, phase1_intro, candidates, choose, phase2, phase2_intro, poem, *radios.values(),
                            submit, admin_view]
            admin_outputs = [admin_summary, *frames.values()]

            def show_task(task: Task) -> dict:
                lang = task.lang
                out: dict[Any, Any] = {
                    heading: f"# {ui_text('title', lang)}\n{ui_text('welcome', lang, name=task.rater, done=task.done)}",
                    notice: task.notice or "", ticket: "" if task.ticket is None else str(task.ticket),
                    task_json: task.to_json(), rating_view: gr.update(visible=task.phase != "done"),
                    instructions_box: gr.update(), instructions: task.instructions,
                    image: task.image, phase1: gr.update(visible=task.phase == "phase1"),
                    phase1_intro: ui_text("phase1", lang), choose: gr.update(value=ui_text("choose", lang)),
                    phase2: gr.update(visible=task.phase == "phase2"), phase2_intro: ui_text("phase2", lang),
                    submit: gr.update(value=ui_text("submit", lang)), admin_view: gr.update(visible=False),
                    # the positions 1-4 stay the choices (a Phase-1 answer sent again stays valid); labels change
                    candidates: gr.update(value=None, choices=[(candidate_label(n, c), str(n)) for n, c in enumerate(
                        task.candidates, start=1)]) if task.candidates else gr.update(value=None),
                    # the poem exists only in Phase 2
                    poem: gr.update(value=poem_text(task.poem, lang) if task.poem else "", label=ui_text("poem", lang)),
                }
                if task.phase == "done":
                    out[heading] += "\n\n" + ui_text("done", lang)
                by_key = {q.key: q for q in task.questions}
                for key, radio in radios.items():
                    q = by_key.get(key)
                    out[radio] = gr.update(value=None) if q is None else gr.update(
                        value=None, choices=q.options, label=q.name, info=q.description)
                return out

            def show_nobody(message: str) -> dict:
                return {heading: f"# {self.title}\n{message}", notice: "", ticket: "", task_json: None,
                        rating_view: gr.update(visible=False), admin_view: gr.update(visible=False)}

            def show_qc(view: QCView) -> dict:
                out = {admin_summary: view.summary}
                for name, frame in frames.items():
                    table = getattr(view, name)
                    out[frame] = gr.update(value=table.rows, headers=table.headers)
                return out

            def refused(exc: RaterError):
                return gr.Error(str(exc), print_exception=False)

            def on_load(request: gr.Request) -> dict:
                value = request.query_params.get("token", "") if request else ""
                person = protocol.store.person(value)
                if person is None:
                    return {token: value, **show_nobody(ui_text("no_token", DEFAULT_LANGUAGE))}
                if person.admin:
                    out = {token: value, heading: f"# {self.title}: quality control", notice: "",
                           rating_view: gr.update(visible=False), admin_view: gr.update(visible=True),
                           timer: gr.Timer(active=True)}
                    return {**out, **show_qc(self.qc_view(value))}
                return {token: value, **show_task(protocol.open(value))}

            def open_task(token_value: str) -> dict:
                try:
                    return show_task(protocol.open(token_value))
                except RaterError as exc:
                    raise refused(exc) from None

            def choose_poem(token_value: str, ticket_value: str, position: str | None) -> dict:
                try:
                    return show_task(protocol.choose(token_value, ticket_value, position))
                except RaterError as exc:
                    raise refused(exc) from None

            def rate(token_value: str, ticket_value: str, *answers) -> dict:
                try:
                    return show_task(protocol.rate(token_value, ticket_value, dict(zip(keys, answers))))
                except RaterError as exc:
                    raise refused(exc) from None

            def mark(token_value: str, ticket_value: str, question: str) -> bool:
                """The rater chose an answer to `question` now: True where it was timed (Phase 2 of their image)."""
                try:
                    return protocol.mark(token_value, ticket_value, question)
                except RaterError as exc:
                    raise refused(exc) from None

            def qc(token_value: str) -> dict:
                try:
                    return show_qc(self.qc_view(token_value))
                except RaterError as exc:
                    raise refused(exc) from None

            def invite(token_value: str, name: str, expert: bool, lang: str) -> str:
                try:
                    new = self.invite(token_value, name, expert, lang)
                except (RaterError, ValueError) as exc:
                    raise gr.Error(str(exc), print_exception=False) from None
                return f"Link for **{name.strip()}**: this page's address followed by `?token={new}`"

            everything = [token, *task_outputs, *admin_outputs, timer]
            demo.load(on_load, None, everything, api_visibility="private")
            # the page's own events, callable from gradio_client with the same inputs
            open_button = gr.Button(visible=False)
            open_button.click(open_task, [token], task_outputs, api_name="open")
            # progress, and a refusal's error state, on the notice line alone: over the questions it would stop the
            # rater from answering the one they missed
            choose.click(choose_poem, [token, ticket, candidates], task_outputs, api_name="choose",
                         show_progress_on=notice)
            submit.click(rate, [token, ticket, *radios.values()], task_outputs, api_name="rate",
                         show_progress_on=notice)
            gr.api(mark, api_name="mark")
            for key, radio in radios.items():  # each choice timed where it is made, in the store (`Protocol.mark`)
                radio.input(partial(mark, question=key), [token, ticket], None, api_visibility="private",
                            show_progress="hidden")
            refresh.click(qc, [token], admin_outputs, api_name="qc")
            timer.tick(qc, [token], admin_outputs, api_visibility="private", show_progress="hidden")
            invite_button.click(invite, [token, invite_name, invite_expert, invite_lang], invite_link,
                                api_name="invite")
        return demo
