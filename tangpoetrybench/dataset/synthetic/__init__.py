"""A synthetic raw release for trying the tools offline (`tpb demo-release`)."""

from .demo_release import PAINTERS, write_demo_release

__all__ = ["PAINTERS", "write_demo_release"]
