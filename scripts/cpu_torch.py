"""Which PyTorch build `scripts/quickstart.sh` installs: on Linux without an NVIDIA GPU and without torch, the CPU
build from PyTorch's CPU index (about 1.7 GB of environment against 6.2 GB with the CUDA build pip takes from PyPI by
default: docs/performance.md), when that index answers; otherwise nothing here, and pip's default.

Prints the `pip install` arguments for the CPU build on stdout, or nothing; says why it falls back in one line on
stderr. Standard library only: it runs before anything is installed.
"""

from __future__ import annotations

import importlib.util
import platform
import shutil
import sys
import urllib.request

CPU_INDEX = "https://download.pytorch.org/whl/cpu"
TIMEOUT = 10.0  # seconds the index has to answer


def index_answers(url: str, timeout: float = TIMEOUT) -> bool:
    """Whether the package index at `url` answers (its `torch/` page), within `timeout`."""
    try:
        with urllib.request.urlopen(f"{url}/torch/", timeout=timeout) as response:
            return response.status == 200
    except (OSError, ValueError):
        return False


def cpu_torch_args(system: str, has_gpu: bool, has_torch: bool, index: str = CPU_INDEX,
                   answers=index_answers) -> tuple[list[str], str | None]:
    """(pip arguments, None) for the CPU build; ([], why) where pip's default is right or the index is silent."""
    if system != "Linux" or has_gpu or has_torch:
        return [], None  # macOS and Windows get CPU wheels from PyPI; a GPU wants CUDA; torch is there already
    if not answers(index):
        return [], (f"quickstart: PyTorch's CPU index ({index}) did not answer: installing pip's default PyTorch, "
                    "the CUDA build (about 6 GB)")
    return ["torch", "torchvision", "--index-url", index], None


def main() -> None:
    args, why = cpu_torch_args(platform.system(), shutil.which("nvidia-smi") is not None,
                               importlib.util.find_spec("torch") is not None)
    if why:
        print(why, file=sys.stderr)
    print(" ".join(args))


if __name__ == "__main__":
    main()
