"""PAE: rubric-conditioned scoring of poem illustrations, and agreement of any evaluator with human ratings.

A thin `evaluate` wrapper: the logic lives in the `tangpoetrybench` package (tangpoetrybench.metric)."""

import evaluate

from tangpoetrybench.metric import (CITATION, DESCRIPTION, KWARGS_DESCRIPTION, build_evaluator,
                                    compute_agreement, compute_scores, features)


@evaluate.utils.file_utils.add_start_docstrings(DESCRIPTION, KWARGS_DESCRIPTION)
class Pae(evaluate.Metric):
    def __init__(self, model=None, adapter=None, backend="transformers", device=None, rubric="tang",
                 batch_size=8, n_bootstrap=10_000, seed=0, **kwargs):
        super().__init__(**kwargs)
        self.model, self.adapter, self.backend, self.device = model, adapter, backend, device
        self.rubric, self.batch_size, self.n_bootstrap, self.bootstrap_seed = rubric, batch_size, n_bootstrap, seed
        self.evaluator = None

    def _info(self):
        return evaluate.MetricInfo(
            description=DESCRIPTION,
            citation=CITATION,
            inputs_description=KWARGS_DESCRIPTION,
            features=features(self.config_name),
            reference_urls=["https://arxiv.org/abs/2608.11452"],
        )

    def _download_and_prepare(self, dl_manager):
        self.evaluator = build_evaluator(self.config_name, self.model, self.adapter, self.backend, self.device,
                                         self.rubric)

    def _compute(self, predictions=None, references=None, poem_ids=None, images=None, poems=None,
                 n_bootstrap=None, seed=None, reference_quality=None):
        if self.evaluator is None:
            return compute_agreement(predictions, references, poem_ids, rubric=self.rubric,
                                     n_bootstrap=self.n_bootstrap if n_bootstrap is None else n_bootstrap,
                                     seed=self.bootstrap_seed if seed is None else seed,
                                     reference_quality=reference_quality)
        return compute_scores(self.evaluator, images, poems, batch_size=self.batch_size)
