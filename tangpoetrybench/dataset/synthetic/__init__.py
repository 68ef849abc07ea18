"""A synthetic raw release for trying the tools offline (`tpb demo-release`), and simulated evaluators with a
known bias for a built one.

    demo_release   `tpb demo-release`: the synthetic raw release (real poems; images, ratings and text labels
                   simulated with planted structure), for any rubric
    painting       procedural ink-wash landscapes from what a poem names, with text planted where the rubric has it
    evaluators     simulated evaluators of a built synthetic release: a known truth for the statistics
"""

from .demo_release import PAINTERS, write_demo_release
from .evaluators import (simulated_readout, simulated_readout_scores, simulated_scores, write_records,
                         write_simulated_scores)

__all__ = ["PAINTERS", "simulated_readout", "simulated_readout_scores", "simulated_scores", "write_demo_release",
           "write_records", "write_simulated_scores"]
