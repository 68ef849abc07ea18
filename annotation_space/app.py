"""TangPoetryBench rating Space: the paper's two-phase protocol (`tpb annotate serve`) as a Space, its answers
committed to a dataset repo by huggingface_hub's CommitScheduler. The logic lives in
`tangpoetrybench.hub.annotation_space`; its configuration is in this folder's README.md."""

from pathlib import Path

from tangpoetrybench.annotation.app import launch
from tangpoetrybench.hub.annotation_space import space_app

demo, scheduler = space_app(here=Path(__file__).resolve().parent)  # kept: the scheduler commits while the app runs


def main(**kwargs):
    """Launch the Space with the rating app's options (`launch`: no files taken); gradio's keywords pass through."""
    return launch(demo, **kwargs)


if __name__ == "__main__":
    main()
