"""What `--concurrency` buys the api evaluator: wall time of one batch of images judged serially and with N requests
in flight, against a loopback server that takes a fixed time per answer.

    python benchmarks/api_concurrency.py [--images 32] [--delay 1.0] [--concurrency 1,8]

The server is the real `transformers serve` with the tiny random-weight Qwen3-VL on the CPU, behind the tests'
loopback proxy (tests/fault_proxy.py), which holds every answer back for `--delay` seconds, as a remote model's
latency would. This times the client's plumbing; the tiny model's answers mean nothing. `--base-url URL --model NAME`
times any other server instead (no proxy, no delay added).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from contextlib import ExitStack
from pathlib import Path

from PIL import Image

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from fault_proxy import FaultProxy  # noqa: E402
from tangpoetrybench import __version__  # noqa: E402
from tangpoetrybench.judging.evaluators import load_evaluator  # noqa: E402
from tangpoetrybench.poems import sample_poems  # noqa: E402
from tangpoetrybench.judging.tiny_models import build_tiny_models  # noqa: E402


def serve_tiny(stack: ExitStack) -> tuple[str, str]:
    """(base URL, model name) of `transformers serve` with the tiny Qwen3-VL on a free loopback port."""
    model = str(build_tiny_models(Path(tempfile.gettempdir()) / f"tpb-tiny-models-{__version__}")["qwen3-vl"])
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "transformers.cli.transformers", "serve", model, "--host",
                             "127.0.0.1", "--port", str(port), "--device", "cpu"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    stack.callback(proc.wait, 30)
    stack.callback(proc.terminate)
    url = f"http://127.0.0.1:{port}"
    for _ in range(240):
        try:
            urllib.request.urlopen(url + "/health", timeout=2)
            return url, model
        except OSError:
            if proc.poll() is not None:
                raise RuntimeError("transformers serve did not start (pip install 'tangpoetrybench[serve]')") from None
            time.sleep(0.5)
    raise RuntimeError("transformers serve did not answer /health within 2 minutes")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--images", type=int, default=32, help="images in the batch")
    p.add_argument("--delay", type=float, default=1.0, help="seconds the proxy holds each answer")
    p.add_argument("--concurrency", default="1,8", help="comma-separated levels to time")
    p.add_argument("--max-new-tokens", type=int, default=8, help="answer length (short: the delay dominates)")
    p.add_argument("--base-url", help="time this server instead of the local tiny one")
    p.add_argument("--model", help="with --base-url: the model name the server knows")
    p.add_argument("--out", type=Path, help="also write the figures here as JSON")
    args = p.parse_args()
    poems = [sample_poems()[i % 16] for i in range(args.images)]
    images = [Image.effect_noise((512, 512), 40 + i).convert("RGB") for i in range(args.images)]
    rows = []
    with ExitStack() as stack:
        if args.base_url:
            url, model, delay = args.base_url, args.model, 0.0
        else:
            upstream, model = serve_tiny(stack)
            url, delay = stack.enter_context(FaultProxy(upstream, delay=args.delay)).url, args.delay
        for level in [int(c) for c in args.concurrency.split(",")]:
            judge = load_evaluator("api", model=model, base_url=url, concurrency=level,
                                   max_new_tokens=args.max_new_tokens)
            start = time.perf_counter()
            results = judge(images, poems, batch_size=len(images))
            seconds = time.perf_counter() - start
            answered = sum(r.error_kind in (None, "parse") for r in results)
            rows.append({"concurrency": level, "seconds": round(seconds, 2),
                         "images_per_s": round(len(images) / seconds, 2), "answered": answered})
    for row in rows:
        row["speedup"] = round(rows[0]["seconds"] / row["seconds"], 1)
    columns = {"concurrency": "concurrency", "seconds": "wall s", "images_per_s": "images/s",
               "speedup": "× first row", "answered": "answered"}
    table = ["| " + " | ".join(columns.values()) + " |", "|---" * len(columns) + "|"]
    table += ["| " + " | ".join(str(row[key]) for key in columns) + " |" for row in rows]
    print(f"{args.images} images, {delay:g} s added per answer, {args.max_new_tokens}-token answers, server {url}",
          *table, sep="\n")
    if args.out:
        args.out.write_text(json.dumps({"images": args.images, "delay": delay, "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
