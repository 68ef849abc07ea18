"""PAE: agreement of any evaluator with the human ratings of TangPoetryBench, and rubric-conditioned scoring.

In a checkout the statistics come from the installed tangpoetrybench package (`pip install -e .`), their one
source. `tpb publish` writes them beside the published module (`agreement.py`, `numeric.py`, `rubrics.py`) and
turns the three imports below into imports of those files, so the published default configuration needs only
`evaluate`, numpy and scipy. The scoring configurations run models and need the package itself.
"""

import datasets
import evaluate

# evaluate copies only the modules this script imports itself (and reads a comment after an import as a URL):
# agreement.py needs numeric.py, so it is imported here too.
from tangpoetrybench.stats.agreement import DEFAULT_BOOTSTRAP, AgreementData, RubricScale, agreement
from tangpoetrybench.numeric import whole_mean
from tangpoetrybench.stats.scales import SCALES

assert whole_mean  # imported for agreement.py (see above)

_DESCRIPTION = """\
PAE (PoemAutoEvaluator, Hu et al. 2026) scores how well an image illustrates a classical Chinese poem on the ten
dimensions of the TangPoetryBench rubric, or a poem of another tradition on the dimensions of its rubric
(`rubric="path/to/haiku.yaml"`: a rubric file, such as the one a built dataset carries in `rubrics/`). This module
measures how well any evaluator's scores agree with human ratings — coverage, mean absolute error, the share
within 0.05 and within one anchor step, per-poem Kendall τ-b of quality and Spearman ρ over images — each with a
95 % bootstrap interval over poems. That is the default configuration, which loads no model. The configurations
"pae" (Qwen3-VL with the PAE LoRA adapter; without an adapter the zero-shot open baseline), "clipscore",
"blipscore" and "vqascore" score images instead; they need `pip install tangpoetrybench` and, for PAE, a GPU.
"""

_KWARGS_DESCRIPTION = """
Agreement (default configuration):
    predictions: per image, the ten dimension scores in rubric order (None: not applicable or not given), or one
        number for a scalar metric (CLIPScore, say), or None when the evaluator gave nothing.
    references: per image, the ten human scores (None: not applicable).
    poem_ids (optional): the poem of each image. Intervals resample poems and τ is computed within each poem;
        without them each image is its own unit and τ is undefined (None).
    reference_quality (optional): the human quality per image (a built dataset's `quality` column);
        default: the mean of the non-null reference scores.
    n_bootstrap (optional): resamples for the intervals (default 10,000; 0: no intervals); seed (default 0).
Scoring ("pae", "clipscore", "blipscore", "vqascore"):
    images: PIL images; poems: {"title": str, "author": str, "text": str} each (lines joined by "\\n").
Returns:
    agreement: coverage, mae, within_0.05, within_one_anchor, kendall_tau, spearman, ccc (Lin's concordance) and
        pairwise_accuracy (on the human pairs: two images of one poem whose human quality differs by at least 0.05),
        each with `<stat>_ci` ([2.5th, 97.5th] percentiles), per_dimension (with spearman, ccc, pairwise_accuracy),
        and the counts (kendall_tau_poems: poems where τ is defined; n_human_pairs, n_judged_pairs).
    scoring: scores, quality, parse_status, raw_output and error per image.
Examples:
    >>> import evaluate
    >>> pae = evaluate.load("pae.py")  # this folder's module; from the Hub: evaluate.load("ORG/pae")
    >>> result = pae.compute(predictions=[[1, .5, .67, 1, None, 1, .5, .67, .67, .75], [.5, .5, .33, 0, 0, .5, .5, .33, .33, .25]],
    ...                      references=[[1, .5, .67, 1, None, 1, 1, .67, .33, .75], [.5, .5, .33, 0, .33, .5, .5, .33, None, .25]],
    ...                      poem_ids=["tang300-068", "tang300-068"], n_bootstrap=0)
    >>> round(result["mae"], 3), result["coverage"], result["kendall_tau"]
    (0.065, 1.0, 1.0)
    >>> pae.compute(predictions=[0.31, 0.18], references=[[1] * 10, [.5] * 10], n_bootstrap=0)["spearman"]
    1.0
"""

_CITATION = """\
@article{hu2026tangpoetrybench,
  title   = {TangPoetryBench: A Multi-Dimensional Benchmark and Rubric-Conditioned Evaluator
             for Poetry-to-Image Generation},
  author  = {Hu, Haoqi and Luo, Tongji and Zhang, Li and Zhou, Boning},
  journal = {arXiv preprint arXiv:2608.11452},
  year    = {2026}
}
"""

AGREEMENT = ("default", "agreement")  # every other configuration is an evaluator of the package's registry
SCORES = datasets.List(datasets.Value("float64"))


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class Pae(evaluate.Metric):
    def __init__(self, model=None, adapter=None, backend="transformers", device=None, rubric="tang", batch_size=8,
                 n_bootstrap=DEFAULT_BOOTSTRAP, seed=0, **kwargs):
        super().__init__(**kwargs)
        self.model, self.adapter, self.backend, self.device = model, adapter, backend, device
        self.rubric, self.batch_size, self.n_bootstrap, self.bootstrap_seed = rubric, batch_size, n_bootstrap, seed
        self.evaluator = None

    def _info(self):
        if self.config_name not in AGREEMENT:
            features = datasets.Features({"images": datasets.Image(), "poems": {
                "title": datasets.Value("string"), "author": datasets.Value("string"), "text": datasets.Value("string")}})
        else:  # ten scores per image, or one number for a scalar metric
            features = [datasets.Features({"predictions": SCORES, "references": SCORES}),
                        datasets.Features({"predictions": datasets.Value("float64"), "references": SCORES})]
        return evaluate.MetricInfo(description=_DESCRIPTION, citation=_CITATION, inputs_description=_KWARGS_DESCRIPTION,
                                   features=features, reference_urls=["https://arxiv.org/abs/2608.11452"])

    def _scale(self):
        """The agreement's view of the rubric: a bundled one by name, or a rubric file (a dataset's
        rubrics/<tradition>.yaml, say), which needs the package to read."""
        if self.rubric in SCALES:
            return RubricScale(**SCALES[self.rubric])
        try:
            from tangpoetrybench.rubric import load_rubric
        except ImportError:
            raise ImportError(f"rubric={self.rubric!r} is a rubric file, and reading one needs `pip install "
                              f"tangpoetrybench` (bundled here: {', '.join(SCALES)})") from None
        return RubricScale.of(load_rubric(self.rubric))

    def _download_and_prepare(self, dl_manager):
        if self.config_name not in AGREEMENT:
            try:
                from tangpoetrybench.stats.evaluate_metric import build_evaluator
            except ImportError:
                raise ImportError(f"the {self.config_name!r} configuration runs a model: `pip install tangpoetrybench` "
                                  "(the agreement configuration needs only evaluate, numpy and scipy)") from None
            self.evaluator = build_evaluator(self.config_name, self.model, self.adapter, self.backend, self.device,
                                             self.rubric)

    def _compute(self, predictions=None, references=None, images=None, poems=None, poem_ids=None,
                 reference_quality=None, n_bootstrap=None, seed=None):
        if self.evaluator is not None:
            from tangpoetrybench.stats.evaluate_metric import compute_scores

            return compute_scores(self.evaluator, images, poems, batch_size=self.batch_size)
        data = AgreementData.from_lists(predictions, references, poem_ids, self._scale(),
                                        reference_quality=reference_quality)
        return agreement(data, n_bootstrap=self.n_bootstrap if n_bootstrap is None else n_bootstrap,
                         seed=self.bootstrap_seed if seed is None else seed)
