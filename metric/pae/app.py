"""A Blocks app for the `pae` metric (evaluate's own widget does not run on current gradio).

Paste per-image predictions, human references and poem ids as JSON lists; get the agreement statistics
with their bootstrap intervals. Scoring images belongs to the TangPoetryBench Space (`space/`)."""

import json
from pathlib import Path

import evaluate
import gradio as gr

METRIC = evaluate.load(str(Path(__file__).parent / "pae.py"))
EXAMPLE = (
    "[[1, 0.5, 0.67, 1, null, 1, 0.5, 0.67, 0.67, 0.75], [1, 1, 0.67, 0, 0.67, 1, 1, 0.33, 0.33, 0.5]]",
    "[[1, 0.5, 0.67, 1, null, 1, 1, 0.67, 0.33, 0.75], [1, 0.5, 0.33, 0, 0.67, 1, 0.5, 0.33, null, 0.25]]",
    '["tang300-068", "tang300-068"]',
)
STATS = ("coverage", "mae", "within_0.05", "within_one_anchor", "kendall_tau", "spearman")


def compute(predictions: str, references: str, poem_ids: str, resamples: float) -> tuple[str, dict]:
    try:
        result = METRIC.compute(predictions=json.loads(predictions), references=json.loads(references),
                                poem_ids=json.loads(poem_ids) if poem_ids.strip() else None,
                                n_bootstrap=int(resamples))
    except (ValueError, TypeError, KeyError) as exc:
        raise gr.Error(f"Could not compute: {exc}") from None
    rows = ["| statistic | value | 95% CI |", "|---|---|---|"]
    for stat in STATS:
        if stat in result:
            value, ci = result[stat], result.get(f"{stat}_ci")
            rows.append(f"| {stat} | {'—' if value is None else f'{value:.3f}'} | "
                        f"{'—' if not ci else f'[{ci[0]:.3f}, {ci[1]:.3f}]'} |")
    return "\n".join(rows), result


with gr.Blocks(title="PAE metric") as demo:
    gr.Markdown("# PAE: agreement with human ratings\n" + METRIC.info.description)
    predictions = gr.Textbox(label="predictions (JSON: one list of ten scores per image, null = not applicable)",
                             value=EXAMPLE[0], lines=3)
    references = gr.Textbox(label="references (JSON: the human scores, same shape)", value=EXAMPLE[1], lines=3)
    poem_ids = gr.Textbox(label="poem_ids (JSON: the poem of each image; empty: each image its own unit, no τ)",
                          value=EXAMPLE[2])
    resamples = gr.Number(label="bootstrap resamples over poems", value=10_000, precision=0)
    button = gr.Button("Compute", variant="primary")
    table = gr.Markdown()
    details = gr.JSON(label="all statistics")
    button.click(compute, [predictions, references, poem_ids, resamples], [table, details], api_name="compute")

if __name__ == "__main__":
    demo.launch()
