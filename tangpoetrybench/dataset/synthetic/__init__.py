"""A synthetic raw release for trying the tools offline (`tpb demo-release`), and simulated evaluators with a
known bias for a built one."""

from .demo_release import PAINTERS, write_demo_release
from .evaluators import (simulated_readout, simulated_readout_scores, simulated_scores, write_records,
                         write_simulated_scores)

__all__ = ["PAINTERS", "simulated_readout", "simulated_readout_scores", "simulated_scores", "write_demo_release",
           "write_records", "write_simulated_scores"]
