"""The model card of a trained PAE adapter, from `tpb agree` results, filled into `templates/model_card.md`
(huggingface_hub `ModelCard`, with a model-index of the measured results)."""

from __future__ import annotations

from importlib import resources

from huggingface_hub import EvalResult, ModelCard, ModelCardData

from ..models import card_section
from ..dataset.dataset_card import ARXIV, CITATION
from ..stats.noise_floor import floor_summary
from ..numeric import fmt, fmt_ci

INDEXED = (("mae", "MAE"), ("within_0.05", "Within 0.05"), ("within_one_anchor", "Within one anchor"),
           ("kendall_tau", "Per-poem Kendall tau-b"), ("spearman", "Spearman rho"))


def indexed_results(agree: dict) -> list[tuple[str, str, float]]:
    """(key, name, value) of each measured agreement the card indexes, rounded to four places: the one source of
    the model-index and of the model repo's `.eval_results` (`eval_results.judge_results`). None for results of
    random weights, which measure nothing."""
    if agree.get("random_weights"):
        return []
    a = agree["agreement"]
    return [(key, name, round(a[key], 4)) for key, name in INDEXED if a.get(key) is not None]


def render_model_card(agree: dict, base_model: str, adapter_ref: str, model_name: str = "PAE",
                      dataset: str | None = None, license: str = "apache-2.0", recipe: str | None = None,
                      trained: dict | None = None) -> str:
    """`agree` is the JSON of `tpb agree --out`. Results of random weights are shown with a warning and kept out
    of the model index. `trained`: the adapter's record of the rubric it was trained on (`adapters.trained_on`),
    which the card names and describes the adapter by."""
    a, nf = agree["agreement"], agree["noise_floor"]
    dataset = dataset or agree["dataset"]
    random_weights = bool(agree.get("random_weights"))
    eval_results = [
        EvalResult(task_type="image-text-to-text", task_name="Poem illustration scoring", dataset_type=dataset,
                   dataset_name="TangPoetryBench", dataset_config=agree.get("config", "images"),
                   dataset_split=agree["split"], metric_type=key, metric_name=name, metric_value=value)
        for key, name, value in indexed_results(agree)
    ]
    card_data = ModelCardData(
        base_model=base_model, library_name="peft", license=license, language=["zh", "en"],
        pipeline_tag="image-text-to-text", datasets=[dataset],
        tags=["tangpoetrybench", "pae", "lora", "evaluation", "chinese-poetry"] + (["random-weights"] if random_weights else []),
        model_name=model_name, eval_results=eval_results or None,
    )
    floors = floor_summary(nf)
    rows = [{"name": key, "value": fmt(a.get(key)), "ci": fmt_ci(a.get(f"{key}_ci")), "floor": fmt(floors.get(key))}
            for key in ("coverage", "mae", "within_0.05", "within_one_anchor", "kendall_tau", "spearman") if key in a]
    dim_rows = [{"key": k, "mae": fmt(d["mae"]), "ci": fmt_ci(d.get("mae_ci")), "close": fmt(d["within_0.05"]),
                 "anchor": fmt(d["within_one_anchor"])} for k, d in a.get("per_dimension", {}).items()]
    template = resources.files("tangpoetrybench") / "templates" / "model_card.md"
    card = ModelCard.from_template(
        card_data, template_str=template.read_text(encoding="utf-8"), model_name=model_name,
        random_weights=random_weights, base_model=base_model, adapter_ref=adapter_ref, dataset=dataset,
        recipe=recipe, split=agree["split"], n_images=a["n_images"], n_poems=a["n_poems"],
        resamples=a["bootstrap"]["resamples"],
        parse_status=", ".join(f"{n} {s}" for s, n in agree["parse_status"].items()),
        rows=rows, dims=dim_rows, citation=CITATION, arxiv=ARXIV, trained=trained,
        trained_section=card_section(trained) if trained else "",
    )
    if trained:
        card.data.tpb_rubric = trained["rubric"]
    return str(card)
