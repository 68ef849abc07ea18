"""TangPoetryBench Space: score an illustration of a poem with PAE, beside the literal metrics; its rubric, poems,
examples and words are those of PAE_DATASET where set (else classical Chinese poetry's). The logic lives in
`tangpoetrybench.hub.space`; this file wires it to gradio components."""

import os

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")  # before gradio is imported: it reads it then

import gradio as gr  # noqa: E402

from tangpoetrybench.models import quiet_expected_noise  # noqa: E402

quiet_expected_noise()  # what the libraries say on every run about their own code, silenced as the command line does

from tangpoetrybench.hub.space import (JUDGES, LEADERBOARD_HEADERS, UPLOADED, Scorer, SpaceConfig, UserError, examples,
                                   launch_options, leaderboard_view, ocr_available, poem_catalogue, read_image,
                                   space_words, summary_line)

try:  # ZeroGPU Spaces: run scoring on a GPU slice; elsewhere the decorator is absent or a no-op
    import spaces
except ImportError:
    spaces = None

CONFIG = SpaceConfig.from_env()
SCORER = Scorer(CONFIG)
SCORER.preload()  # at start-up, not per request (on ZeroGPU, a GPU call would load them again each time)
RUBRICS = list(SCORER.rubrics)  # PAE_DATASET's rubrics first, then the bundled ones
POEMS = poem_catalogue(CONFIG, SCORER.rubric)  # PAE_POEMS's, else PAE_DATASET's, else the bundled ones
SHOWN = examples(CONFIG, POEMS, SCORER.rubric)
EXAMPLES = [[str(e.path), e.poem.text, e.poem.title, e.poem.author] for e in SHOWN]
WORDS = space_words(SCORER.rubric, POEMS, from_dataset=bool(CONFIG.dataset))
TABLE_HEADERS = ["dimension", "score", "nearest anchor", "what it judges"]
BASELINE_HEADERS = ["metric", "score", "scale", "note"]


def score(image, poem_text, title="", author="", rubric=RUBRICS[0], rubric_file=None, baselines=True):
    """Score one image against one poem: the per-dimension table, quality, radar chart, raw answer, baselines."""
    try:
        result = SCORER.score(image, poem_text, title, author, rubric, rubric_file, baselines)
    except UserError as exc:
        raise gr.Error(str(exc)) from None
    except Exception as exc:  # no stack trace for visitors
        raise gr.Error(f"Scoring failed: {type(exc).__name__}: {str(exc)[:300]}") from None
    summary = summary_line(result, SCORER.pae_label, SCORER.random_weights)
    return result.table, summary, result.figure, result.reasons, result.raw_output, result.baselines


if spaces is not None:
    score = spaces.GPU(score)


def pick_example(event: gr.SelectData) -> list[str]:
    """The clicked example's image, poem text, title and author."""
    return EXAMPLES[event.index]


def leaderboard():
    """The Leaderboard tab, read from PAE_LEADERBOARD (a leaderboard.json made by `tpb leaderboard`)."""
    try:
        view = leaderboard_view(CONFIG.leaderboard, SCORER.rubrics)
    except UserError as exc:
        raise gr.Error(str(exc)) from None
    return view.summary, view.rows, view.figure


def find_text(image, poem_text, title="", author=""):
    """The text regions the OCR finds in the image, drawn on it, and the verdict (runs on the CPU)."""
    try:
        return SCORER.text_regions(image, poem_text, title, author)
    except UserError as exc:
        raise gr.Error(str(exc)) from None


def compare(image_a, image_b, poem_text, title="", author="", judge=JUDGES[0]):
    """Which of two illustrations of one poem is better: PAE or SemJudge asked in both orders; with SemJudge, each
    image's sub-signs drawn on it and the poem's graph."""
    try:
        found = SCORER.compare(image_a, image_b, poem_text, title, author, judge)
    except UserError as exc:
        raise gr.Error(str(exc)) from None
    except Exception as exc:  # no stack trace for visitors
        raise gr.Error(f"Comparing failed: {type(exc).__name__}: {str(exc)[:300]}") from None
    note = " — random-weight test model: this choice means nothing" if found.random_weights else ""
    return found.sentence + note, found.rows, *found.drawn, found.poem_graph


if spaces is not None:
    compare = spaces.GPU(compare)


def show(path):
    try:
        return read_image(path, CONFIG.max_image_bytes, CONFIG.max_image_pixels) if path else None
    except UserError as exc:
        gr.Warning(str(exc))
        return None


def pick_poem(label):
    poem = POEMS.get(label)
    return (poem.text, poem.title, poem.author) if poem else (gr.update(), gr.update(), gr.update())


with gr.Blocks(title="TangPoetryBench · PAE") as demo:
    gr.Markdown(WORDS["header"])
    with gr.Tab("Score an illustration"):
        with gr.Row():
            with gr.Column():
                # A File input (not gr.Image) so that any upload reaches `score`, which explains what is wrong with it.
                image = gr.File(label="Illustration (PNG, JPEG or WebP)", file_types=["image"], type="filepath")
                preview = gr.Image(label="Preview", interactive=False, height=260)
                choice = gr.Dropdown(label="Poem from the benchmark (type to search by title or author)",
                                     choices=list(POEMS), value=None, filterable=True)
                text = gr.Textbox(label="Poem text", lines=6, placeholder=WORDS["placeholder"])
                with gr.Row():
                    title = gr.Textbox(label="Title", value="")
                    author = gr.Textbox(label="Author", value="")
                rubric = gr.Radio(label="Rubric", choices=[*RUBRICS, UPLOADED], value=RUBRICS[0])
                rubric_file = gr.File(label="Rubric YAML (for an uploaded rubric)", file_types=[".yaml", ".yml"],
                                      visible=False, type="filepath")
                baselines = gr.Checkbox(label="Also compute CLIPScore, BLIPScore, VQAScore", value=True)
                button = gr.Button("Score", variant="primary")
                # a gallery, not gr.Examples: the upload is a File (checked before decoding), which Examples would
                # list by file name
                gallery = gr.Gallery([(str(e.path), e.caption) for e in SHOWN], columns=max(len(SHOWN), 1),
                                     label=WORDS["examples"], allow_preview=False, height=230)
            with gr.Column():
                summary = gr.Markdown(label="Summary")
                table = gr.Dataframe(headers=TABLE_HEADERS, label="Per dimension", wrap=True, max_height=900,
                                     column_widths=["26%", "10%", "28%", "36%"])
                plot = gr.Plot(label="Profile")
                reasons = gr.Markdown(label="Why each score (PAE_EXPLAIN)")
                baseline_table = gr.Dataframe(headers=BASELINE_HEADERS, label="Literal metrics")
                with gr.Accordion("Raw model answer", open=False):
                    raw = gr.Code(language="json", label="answer")
                with gr.Group(visible=ocr_available() and SCORER.rubric.adjudicated_dimension is not None):
                    text_button = gr.Button("Find text in the picture (OCR)")
                    text_summary = gr.Markdown()
                    text_image = gr.Image(label="Text regions: red poem, orange garbled, blue other, purple seal",
                                          interactive=False)
    with gr.Tab("Compare two illustrations"):
        gr.Markdown("Which of two illustrations of one poem is better? PAE is asked in both orders (A first, then B "
                    "first): the same illustration chosen both times is the verdict; a choice that follows the "
                    "position is a tie.")
        with gr.Row():
            pair_a = gr.File(label="Illustration A", file_types=["image"], type="filepath")
            pair_b = gr.File(label="Illustration B", file_types=["image"], type="filepath")
        pair_text = gr.Textbox(label="Poem text", lines=4, placeholder=WORDS["placeholder"])
        with gr.Row():
            pair_title = gr.Textbox(label="Title", value="")
            pair_author = gr.Textbox(label="Author", value="")
        pair_judge = gr.Radio(label="Judge", choices=list(JUDGES), value=JUDGES[0],
                              info="SemJudge builds a semiosis graph of the poem and of each image, then chooses")
        pair_button = gr.Button("Compare", variant="primary")
        pair_summary = gr.Markdown()
        pair_table = gr.Dataframe(headers=["order", "chose", "reason", "parse"], label="Both orders", wrap=True)
        with gr.Row():
            signs_a = gr.Image(label="A: SemJudge's sub-signs", interactive=False)
            signs_b = gr.Image(label="B: SemJudge's sub-signs", interactive=False)
            poem_graph = gr.Code(label="The poem's graph (SemJudge)", language=None)
    with gr.Tab("Leaderboard"):
        board_summary = gr.Markdown()
        board_table = gr.Dataframe(headers=LEADERBOARD_HEADERS, label="Generators, by PAE-estimated quality", wrap=True)
        board_plot = gr.Plot(label="Profiles (PAE estimates)")
    image.change(show, image, preview, api_name=False)
    gallery.select(pick_example, None, [image, text, title, author], api_name=False)
    choice.change(pick_poem, choice, [text, title, author], api_name=False)
    rubric.change(lambda c: gr.update(visible=c == UPLOADED), rubric, rubric_file, api_name=False)
    button.click(score, [image, text, title, author, rubric, rubric_file, baselines],
                 [table, summary, plot, reasons, raw, baseline_table], api_name="score")
    demo.load(leaderboard, None, [board_summary, board_table, board_plot], api_name="leaderboard")
    pair_button.click(compare, [pair_a, pair_b, pair_text, pair_title, pair_author, pair_judge],
                      [pair_summary, pair_table, signs_a, signs_b, poem_graph], api_name="compare")
    text_button.click(find_text, [image, text, title, author], [text_image, text_summary], api_name="text")

demo.queue(default_concurrency_limit=CONFIG.concurrency)


def main(**kwargs):
    """Launch the Space with its options (`launch_options`: an upload over PAE_MAX_IMAGE_BYTES refused as it arrives);
    gradio's `launch` keywords pass through."""
    return demo.launch(**{**launch_options(CONFIG), **kwargs})


if __name__ == "__main__":
    main()
