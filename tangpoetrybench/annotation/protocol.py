"""The paper's two-phase protocol, step by step, for one rater at a time (the Gradio app only lays it out).

- **Phase 1:** the image and its four candidate poems, in the rater's fixed order; the poem is not named, not shown,
  and not in anything sent before the choice: the image goes out as its pixels alone (`files.pixels_only`: no file
  name, no metadata), and everything else sent is the same whichever candidate is the answer (the instructions
  without the rubric's wording, which would name the poem's tradition). The choice and the seconds since the image
  was shown are recorded.
- **Phase 2:** the poem revealed (title, author, text, and the paraphrase where the release has one), then every
  question of the image's rubric. A submission with a question unanswered is refused and nothing is recorded; each
  answer's time is the seconds from the reveal to the rater's last choice on it (`mark`, kept by the store per
  assignment and question; to the submission where no choice was marked).

Phase 2's instructions add the rubric's wording (`instructions`). Every step names the rater by their
link's token and the image by its ticket (the assignment's number: it says
nothing of the poem), so a step sent twice is recorded once (see `store`). Texts are in the rater's language
(`ui_text`, the rubric's texts through `campaign.text_in`).
"""

from __future__ import annotations

import re
import time
from dataclasses import asdict, dataclass, field
from typing import Callable, Mapping

from PIL import Image

from ..files import open_image, pixels_only
from ..poems import Poem
from .assignment import Plan, next_image
from ..rubric import Rubric, format_title
from .campaign import Campaign, dimension_description, dimension_name, option_labels, text_in
from .store import Assignment, Person, Refused, Store

UI = {
    "en": {
        "title": "Rate illustrations of poems",
        "welcome": "Hello {name}. You have rated {done} images.",
        "phase1": "**Step 1 of 2.** Which of these four poems does the picture illustrate? Choose one.",
        "choose": "Confirm my choice",
        "phase2": "**Step 2 of 2.** The picture illustrates this poem. Answer every question below.",
        "submit": "Submit my rating",
        "paraphrase": "In modern language",
        "poem": "The poem",
        "done": "Thank you: there is nothing more for you to rate now.",
        "no_token": "This page needs your personal link: ask the person running the study for it.",
        "admin_only": "This is the coordinators' page: open it with an admin link.",
        "unanswered": "Please answer every question before submitting. Unanswered: {names}.",
        "no_choice": "Please choose one of the four poems first.",
        "unknown_task": "This task is no longer yours: the page has been brought up to date.",
        "answered": "This was already answered: your first answer stands.",
        "phase1_first": "Please choose the poem first.",
        "instructions": (
            "You will see pictures made by image generators to illustrate classical poems. For each picture:\n\n"
            "1. **Which poem?** Read the four poems and choose the one the picture illustrates. You are not told the "
            "answer; if you are unsure, choose the one it fits best.\n"
            "2. **Rate it.** The poem is then shown (with a modern paraphrase where there is one). Answer each "
            "question about the picture.{excluded}\n\n"
            "Look at the whole picture before answering; there are no trick questions and no right speed.{seals} "
            "You can stop at any time and come back to your link later."),
        "excluded": (" Some questions have an option saying that the question does not apply ({options}): choose it "
                     "only when that is so."),
        "seals": " Artist seals do not count as text in “{name}”.",
        "separator": ", ",
    },
    "zh": {
        "title": "为诗歌配图评分",
        "welcome": "{name}，您好。您已评了 {done} 张图。",
        "phase1": "**第一步（共两步）**：这幅画描绘的是下面四首诗中的哪一首？请选择一首。",
        "choose": "确认选择",
        "phase2": "**第二步（共两步）**：这幅画描绘的是这首诗。请回答下面每一个问题。",
        "submit": "提交评分",
        "paraphrase": "白话译文",
        "poem": "诗歌",
        "done": "谢谢！目前没有需要您评分的图片了。",
        "no_token": "请使用您的专属链接打开本页；如没有链接，请联系研究负责人。",
        "admin_only": "这是协调者页面，请使用管理员链接打开。",
        "unanswered": "请回答所有问题后再提交。尚未回答：{names}。",
        "no_choice": "请先在四首诗中选择一首。",
        "unknown_task": "此任务已不属于您，页面已更新。",
        "answered": "此题已作答，以您的第一次回答为准。",
        "phase1_first": "请先选择诗歌。",
        "instructions": (
            "您将看到图像生成模型为古典诗词创作的配图。对每一幅画：\n\n"
            "1. **是哪首诗？** 阅读四首诗，选出这幅画所描绘的那一首。我们不会告诉您答案；如不确定，请选最贴合的一首。\n"
            "2. **评分。** 随后会显示这首诗（如有，附白话译文）。请回答关于这幅画的每个问题。{excluded}\n\n"
            "请看完整幅画再作答；没有陷阱题，也不计较快慢。{seals}您可以随时停下，之后用同一链接继续。"),
        "excluded": "有些问题设有“不适用”的选项（{options}），仅在确实如此时选择。",
        "seals": "在“{name}”一题中，画家印章不算文字。",
        "separator": "、",
    },
}


MARKDOWN_PUNCTUATION = re.compile(r"([!-/:-@\[-`{-~])")  # what CommonMark lets a backslash escape


def ui_text(key: str, lang: str, **values) -> str:
    """An interface text in the rater's language (English where there is none in theirs)."""
    return (UI.get(lang) or UI["en"]).get(key, UI["en"][key]).format(**values)


def literal(text: str) -> str:
    """`text` for a Markdown page, shown as its characters: every ASCII punctuation mark backslash-escaped (CommonMark),
    so that nothing in it is read as Markdown or HTML."""
    return MARKDOWN_PUNCTUATION.sub(r"\\\1", text)


def instructions(rubric: Rubric | None, lang: str) -> str:
    """What raters are told (the paper's instructions, Markdown), from the rubric: the options that say a question
    does not apply, quoted from it, where it has any; the note on artist seals only where it has a dimension of text
    in the picture (its adjudicated dimension, named); the rubric's words shown as they are (`literal`). Without a
    rubric (Phase 1, where the image's rubric would name its poem's tradition), the steps alone."""
    if rubric is None:
        return ui_text("instructions", lang, excluded="", seals="")
    labels = [literal(text_in(o.label, lang)) for d in rubric.dimensions for o in d.options if o.excluded]
    excluded = ui_text("excluded", lang, options=ui_text("separator", lang).join(f"“{x}”" for x in labels)) \
        if labels else ""
    text_dimension = rubric.adjudicated_dimension
    seals = ui_text("seals", lang, name=literal(dimension_name(rubric.dimension(text_dimension), lang))) \
        if text_dimension else ""
    return ui_text("instructions", lang, excluded=excluded, seals=seals)


class RaterError(Exception):
    """A step the rater cannot take, with a message in their language (shown as it is)."""


@dataclass(frozen=True)
class Question:
    key: str
    name: str
    description: str
    options: list[tuple[str, str]]  # (label, letter)


@dataclass(frozen=True)
class PoemView:
    title: str
    author: str
    text: str
    paraphrase: str | None = None
    shown_title: str = ""  # the title as its tradition writes it (`rubric.format_title`): 《静夜思》


@dataclass
class Task:
    """What the rater sees now; `to_json` is what the app's API returns (it never names the poem in Phase 1)."""

    rater: str
    lang: str
    done: int  # images this rater has rated
    phase: str  # phase1 | phase2 | done
    ticket: int | None = None
    image: Image.Image | None = field(default=None, repr=False)
    candidates: list[PoemView] = field(default_factory=list)  # Phase 1, in the rater's order
    poem: PoemView | None = None  # Phase 2
    questions: list[Question] = field(default_factory=list)  # Phase 2
    notice: str | None = None  # why the last step was not taken as sent, when it was not
    instructions: str = ""  # what the rater is told, from the rubric of their image (`instructions`)

    def to_json(self) -> dict:
        return {"rater": self.rater, "phase": self.phase, "ticket": self.ticket, "done": self.done,
                "candidates": [asdict(c) for c in self.candidates], "poem": self.poem and asdict(self.poem),
                "questions": [asdict(q) for q in self.questions], "notice": self.notice}


def poem_view(poem: Poem, rubric: Rubric) -> PoemView:
    return PoemView(poem.title, poem.author, poem.text, poem.paraphrase, format_title(poem.title, rubric))


class Protocol:
    """The rater's steps over a campaign and its store. `clock` gives the time in seconds (tests pass their own)."""

    def __init__(self, campaign: Campaign, store: Store, plan: Plan = Plan(),
                 clock: Callable[[], float] = time.time):
        self.campaign, self.store, self.plan, self.clock = campaign, store, plan, clock

    def person(self, token: str | None, admin: bool = False) -> Person:
        """Who the token is; a rater's page refuses an admin link and the admin page a rater's."""
        found = self.store.person(token)
        if found is None or found.admin != admin:
            raise RaterError(ui_text("admin_only" if admin else "no_token", found.lang if found else "en"))
        return found

    def open(self, token: str | None) -> Task:
        """The rater's current task, its phase's clock restarted (they are looking at it now)."""
        rater = self.person(token)
        task = self._current(rater)
        if task.ticket is not None:
            self.store.shown(rater.name, task.ticket, self.clock())
        return task

    def choose(self, token: str | None, ticket: int | str | None, position: int | str | None) -> Task:
        """Phase 1's answer: `position` 1-4 of the candidates as shown."""
        rater = self.person(token)
        held = self._ticket(rater, ticket)
        try:
            index = int(position) - 1
        except (TypeError, ValueError):
            raise RaterError(ui_text("no_choice", rater.lang)) from None
        if not 0 <= index < len(held.candidates):
            raise RaterError(ui_text("no_choice", rater.lang))
        return self._step(rater, lambda: self.store.record_choice(rater.name, held.id, held.candidates[index],
                                                                  self.clock()))

    def mark(self, token: str | None, ticket: int | str | None, key: str) -> bool:
        """The rater chose an answer to question `key` of their image now (Phase 2): the store keeps the time, per
        assignment and question. A key that is not one of the image's questions is refused; a mark outside Phase 2
        changes nothing (False)."""
        rater = self.person(token)
        held = self._ticket(rater, ticket)
        if key not in self.campaign.rubric(held.poem_id).keys:
            raise RaterError(ui_text("unknown_task", rater.lang))
        return self.store.mark(rater.name, held.id, key, self.clock())

    def rate(self, token: str | None, ticket: int | str | None, answers: Mapping[str, str | None]) -> Task:
        """Phase 2's answers, one per question: one unanswered (or not an option of its question) refuses the
        submission and records nothing. Each answer's time runs from the reveal to its last `mark` (to the
        submission for an answer never marked)."""
        rater = self.person(token)
        held = self._ticket(rater, ticket)
        dims = self.campaign.rubric(held.poem_id).dimensions
        missing = [dimension_name(d, rater.lang) for d in dims if answers.get(d.key) not in d.letters]
        if missing:
            raise RaterError(ui_text("unanswered", rater.lang, names=", ".join(missing)))
        now = self.clock()
        start = held.revealed_at if held.revealed_at is not None else now
        marks = held.answer_marks or {}
        seconds = {d.key: round(max(0.0, min(marks.get(d.key, now), now) - start), 3) for d in dims}
        given = {d.key: str(answers[d.key]) for d in dims}
        return self._step(rater, lambda: self.store.record_rating(rater.name, held.id, given, seconds, now))

    def _ticket(self, rater: Person, ticket) -> Assignment:
        """The rater's assignment that `ticket` names: the one they hold, or one already done (a step sent again
        after its answer was lost on the way, which the store then finds recorded)."""
        try:
            number = int(ticket)
        except (TypeError, ValueError):
            number = None
        found = next((a for a in self.store.assignments() if a.id == number and a.rater == rater.name), None)
        if found is None:
            raise RaterError(ui_text("unknown_task", rater.lang))
        return found

    def _step(self, rater: Person, record: Callable[[], Assignment]) -> Task:
        """Record a step, then the rater's next task; a step the store refuses (sent again with another answer,
        out of turn) records nothing and the rater sees where they are, with a notice."""
        notice = None
        try:
            record()
        except Refused as exc:
            notice = ui_text(exc.code, rater.lang)
        task = self._current(rater)
        task.notice = notice
        return task

    def _current(self, rater: Person) -> Task:
        """The image the rater holds, else a new one from the assignment rule, else nothing left."""
        held = self.store.assign(rater.name, lambda rows: next_image(
            rater.name, self.campaign.images, self.campaign.candidates, rows, self.plan, self.clock()), self.clock())
        done = sum(a.done for a in self.store.assignments() if a.rater == rater.name)
        if held is None:
            return Task(rater.name, rater.lang, done, "done",
                        instructions=instructions(self.campaign.release.main_rubric, rater.lang))
        # checked against the pixel limit before it is decoded, as every image is read (the file may have changed
        # since the campaign was loaded); pixels only: neither the file's name (generator/poem_id) nor its metadata
        # (a generator's prompt) reaches the page
        with open_image(self.campaign.images[held.image_id].path, self.campaign.max_image_pixels) as im:
            image = pixels_only(im)
        rubric = self.campaign.rubric(held.poem_id) if held.phase != "phase1" else None
        task = Task(rater.name, rater.lang, done, held.phase, held.id, image,
                    instructions=instructions(rubric, rater.lang))
        if held.phase == "phase1":
            task.candidates = [poem_view(self.campaign.poem(pid), self.campaign.rubric(pid)) for pid in held.candidates]
        else:
            task.poem = poem_view(self.campaign.poem(held.poem_id), self.campaign.rubric(held.poem_id))
            task.questions = [Question(d.key, dimension_name(d, rater.lang), dimension_description(d, rater.lang),
                                       option_labels(d, rater.lang))
                              for d in self.campaign.rubric(held.poem_id).dimensions]
        return task
