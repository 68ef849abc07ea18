"""Loading models once: device and dtype, the pixel budget, the Qwen3-VL backend shared by PAE and VQAScore.

Every `model` argument is a Hub id or a local folder (`save_pretrained` layout, safetensors); nothing
runs remote code. Tiny test models carry `tpb_random_weights: true` in their config, and every result
made with them says so. A trained adapter records the rubric it was trained on (`write_trained_on`, read by
`trained_on`), beside its weights.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import math
import re
import warnings
from pathlib import Path
from typing import Any

import torch
from packaging.version import Version
from PIL import Image

from .files import local_or_hub, write_file
from .rubric import Rubric

DEFAULT_MAX_PIXELS = 1024 * 1024
RANDOM_WEIGHTS_FLAG = "tpb_random_weights"
MAX_ASPECT_RATIO = 200  # the Qwen-VL image processors refuse a longer side over 200 times the shorter one

# What libraries say on every run that is no trouble of the user's, each matched by its exact words: said by a
# library's import or call about that library's own code. Everything else is shown.
EXPECTED_WARNINGS = (
    (r"`torch\.jit\.script` is deprecated", FutureWarning),  # a library's import, about its own code
    (r"`is_gradient_checkpointing` is deprecated", FutureWarning),  # peft asks transformers for the old name
)
BNB_CPU_KERNEL = "gemm_4bit_forward"  # bitsandbytes' import asks for a CPU kernel only --quantize 4bit would use
logger = logging.getLogger(__name__)


def process_state():
    """accelerate's `PartialState`: under `accelerate launch` or `torchrun` it sets up the process group (gloo on a
    machine without CUDA) and knows this process's rank and device. None in an environment without accelerate."""
    try:
        from accelerate import PartialState
        from accelerate.utils import parse_flag_from_env
    except ImportError:
        return None
    return PartialState(cpu=parse_flag_from_env("ACCELERATE_USE_CPU") or not torch.cuda.is_available())


def _not_bnb_kernel(record: logging.LogRecord) -> bool:
    return BNB_CPU_KERNEL not in record.getMessage()


def quiet_expected_noise() -> None:
    """Silence `EXPECTED_WARNINGS` and bitsandbytes' word on its CPU 4-bit kernel, which its import says to every
    command (`--quantize 4bit` on the CPU says it again, in `quantization_config`, where it matters). Call it before
    those libraries are imported: the command line does, and so do the training scripts."""
    for message, category in EXPECTED_WARNINGS:
        warnings.filterwarnings("ignore", message=message, category=category)
    bnb = logging.getLogger("bitsandbytes.backends.cpu.ops")
    if _not_bnb_kernel not in bnb.filters:
        bnb.addFilter(_not_bnb_kernel)


def quiet_progress() -> None:
    """No progress bars from the libraries (`--quiet`): transformers' "Loading weights", diffusers', datasets' and
    huggingface_hub's. A library imported later reads huggingface_hub's setting when it is imported."""
    import sys

    from huggingface_hub.utils import disable_progress_bars

    disable_progress_bars()
    for module in ("transformers.utils.logging", "diffusers.utils.logging", "datasets.utils.logging"):
        if module in sys.modules:
            sys.modules[module].disable_progress_bar()


def pick_device(device: str | None = None) -> torch.device:
    """The device to load a model on. Under a launcher each process takes its own (cuda:LOCAL_RANK), and asking for
    it sets up the process group before any model loads."""
    state = process_state()
    if state is None:  # a bare benchmark environment: one process
        return torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    if device is None:
        return state.device
    chosen = torch.device(device)
    if state.num_processes > 1 and chosen.index is None and chosen.type == state.device.type:
        return state.device  # "cuda" under a launcher means this process's GPU, not cuda:0 for all
    return chosen


def pick_dtype(device: torch.device) -> torch.dtype:
    """bf16 on a GPU, fp32 on the CPU (bf16 matmuls on CPU are slow and less exact)."""
    return torch.bfloat16 if device.type == "cuda" else torch.float32


def has_random_weights(model: Any) -> bool:
    config = getattr(model, "config", None)
    return bool(getattr(config, RANDOM_WEIGHTS_FLAG, False))


def fitted_size(size: tuple[int, int], max_pixels: int) -> tuple[int, int]:
    """The size `fit_pixels` gives an image of `size`."""
    w, h = size
    if w * h <= max_pixels:
        return w, h
    scale = math.sqrt(max_pixels / (w * h))
    return max(1, int(w * scale)), max(1, int(h * scale))


def image_refusal(size: tuple[int, int]) -> str | None:
    """Why the Qwen-VL image processors would refuse an image of this size (as sent, after `fit_pixels`), or None:
    a served judge is not asked what its processor cannot take (it would answer HTTP 500, retried in vain)."""
    w, h = size
    if max(w, h) > MAX_ASPECT_RATIO * min(w, h):
        return (f"the image is {w}×{h}: its longer side is over {MAX_ASPECT_RATIO} times the shorter one, which the "
                "Qwen-VL image processors refuse")
    return None


def fit_pixels(image: Image.Image, max_pixels: int) -> Image.Image:
    """Shrink (never enlarge) an image so that width × height ≤ max_pixels, keeping its aspect ratio."""
    image = image.convert("RGB")
    size = fitted_size(image.size, max_pixels)
    return image if size == image.size else image.resize(size, Image.Resampling.BICUBIC)


def from_pretrained(model_class, model: str, **kwargs):
    """`model_class.from_pretrained`, where a checkpoint of the wrong kind is one plain sentence, not transformers'
    list of every configuration class."""
    try:
        return model_class.from_pretrained(model, **kwargs)
    except ValueError as exc:
        found = re.search(r"configuration class <class '[\w.]*?(\w+)Config'>", str(exc))
        if found is None:
            raise
        raise ValueError(f"{model} is a {found.group(1)} checkpoint, which this evaluator cannot use: PAE and "
                         "VQAScore need a Qwen3-VL checkpoint (e.g. Qwen/Qwen3-VL-8B-Instruct), CLIPScore a CLIP or "
                         "Chinese-CLIP one, BLIPScore a BLIP image-text-matching one") from None


def load_with_processor(model_class, model: str, device: str | None = None):
    """(processor, model, device) for a Hub id or folder, the model in eval mode on the device."""
    from transformers import AutoProcessor

    model = local_or_hub(model, "model")
    dev = pick_device(device)
    return AutoProcessor.from_pretrained(model), from_pretrained(model_class, model).to(dev).eval(), dev


QUANTIZE = ("8bit", "4bit")


# Left in the compute dtype: the vision tower (0.6 B of Qwen3-VL-8B's 8.8 B parameters, so quantising it would save
# little; a small model's vision layers are also narrower than 4-bit's block of 64) and the output head.
KEEP_UNQUANTISED = ["model.visual", "lm_head"]


def quantization_config(quantize: str, device: torch.device):
    """transformers' `BitsAndBytesConfig` for `--quantize 8bit|4bit` (4-bit: NF4, computing in the device's dtype,
    as QLoRA; the language model's linear layers only, see KEEP_UNQUANTISED), or a plain sentence saying why it
    cannot work here. bitsandbytes quantises on a CUDA GPU and, from its 0.48, on the CPU."""
    if quantize not in QUANTIZE:
        raise ValueError(f"unknown --quantize {quantize!r} (known: {', '.join(QUANTIZE)})")
    if device.type not in ("cuda", "cpu"):
        raise ValueError(f"--quantize {quantize} needs a CUDA GPU or the CPU (where bitsandbytes quantises), and "
                         f"this model would run on {device.type}: leave --quantize out to run it unquantised")
    try:
        import bitsandbytes
    except ImportError:
        raise ImportError(f"--quantize {quantize} needs bitsandbytes: pip install 'tangpoetrybench[quantize]'") from None
    if device.type == "cpu" and Version(bitsandbytes.__version__) < Version("0.48"):
        raise ValueError(f"--quantize {quantize} on the CPU needs bitsandbytes 0.48 or later (this is "
                         f"{bitsandbytes.__version__}): pip install -U bitsandbytes")
    if device.type == "cpu" and quantize == "4bit" and importlib.util.find_spec("kernels") is None:
        logger.warning("--quantize 4bit on the CPU: bitsandbytes' fast 4-bit kernel needs `pip install kernels` "
                       "(0.11.1 or later); without it, 4-bit runs on its slower path")
    from transformers import BitsAndBytesConfig

    if quantize == "8bit":
        return BitsAndBytesConfig(load_in_8bit=True, llm_int8_skip_modules=KEEP_UNQUANTISED)
    return BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_compute_dtype=pick_dtype(device),
                              llm_int8_skip_modules=KEEP_UNQUANTISED)


def load_qwen_vl(model: str, adapter: str | None = None, device: str | None = None, merge: bool = True,
                 quantize: str | None = None):
    """(processor, model, device) for a Qwen3-VL checkpoint, with an optional LoRA adapter merged in (or kept apart,
    `merge=False`, so that the base model can also be run with the adapter disabled). With `quantize` ("8bit",
    "4bit") the language model's weights load quantised by bitsandbytes, and the adapter stays apart (it runs in
    the compute dtype beside the quantised layers; merging would round it into them).

    The processor pads on the left so that a batch can be generated together."""
    from transformers import AutoModelForImageTextToText, AutoProcessor

    model = local_or_hub(model, "model")
    adapter = safetensors_adapter(local_or_hub(adapter, "adapter")) if adapter else None
    dev = pick_device(device)
    extra = {}
    if quantize:
        extra = {"quantization_config": quantization_config(quantize, dev), "device_map": {"": dev}}
    processor = AutoProcessor.from_pretrained(model)
    processor.tokenizer.padding_side = "left"
    net = from_pretrained(AutoModelForImageTextToText, model, dtype=pick_dtype(dev), **extra)
    if adapter:
        from peft import PeftModel

        net = PeftModel.from_pretrained(net, adapter)
        net = net.merge_and_unload() if merge and not quantize else net
    return processor, (net if quantize else net.to(dev)).eval(), dev


def safetensors_adapter(adapter: str) -> str:
    """An adapter folder whose weights are safetensors: one with pickled weights only (`adapter_model.bin`) is
    refused, since unpickling runs whatever the file says (a Hub id is left to peft, which prefers safetensors)."""
    folder = Path(adapter)
    if folder.is_dir() and not (folder / "adapter_model.safetensors").is_file() and any(folder.glob("*.bin")):
        raise ValueError(f"{adapter} holds pickled weights only (adapter_model.bin), which are never loaded: save the "
                         "adapter with safetensors (peft's save_pretrained does by default)")
    return adapter


def chat_inputs(processor, conversations: list[list[dict]]) -> dict:
    """Tokenised, left-padded model inputs (on the CPU) for a batch of chat conversations with their images."""
    return processor.apply_chat_template(
        conversations, tokenize=True, add_generation_prompt=True, return_dict=True, return_tensors="pt",
        processor_kwargs={"padding": True},
    )


def model_label(model: str, adapter: str | None = None) -> str:
    return f"{model}+{adapter}" if adapter else model


# --- what a trained adapter records: the rubric it was trained on ----------------------------------------------
# An adapter learns one rubric's questions and answers. `trained_on.json` (its config, which the judge reads) and a
# section of its model card (README.md, which people read) say which; a judge that loads it and scores under another
# rubric says so once (`judging.judge.Judge`), and every record keeps the adapter's rubric in its settings
# (`adapter_rubric`) beside the one scored (`rubric`).

TRAINED_ON = "trained_on.json"
MAX_RECORD_BYTES = 64 * 1024  # a record is a few hundred bytes: a larger file is not one
CARD_HEADING = "## The rubric it was trained on"
FIELDS = {"rubric": str, "tradition": str, "display": str, "dimensions": list, "dataset": str, "config": str,
          "task": str}


def write_trained_on(folder: Path | str, rubric: Rubric, dataset: str, config: str = "images",
                     task: str = "pointwise") -> Path:
    """Record in the adapter `folder` the `rubric` it was trained on, from `dataset`'s `config`: `trained_on.json`
    and a section of its model card (added to the card the trainer wrote, or replacing an earlier one)."""
    from huggingface_hub import ModelCard

    folder = Path(folder)
    record = {"rubric": rubric.fingerprint, "tradition": rubric.tradition, "display": rubric.display["en"],
              "dimensions": [d.name["en"] for d in rubric.dimensions], "dataset": str(dataset), "config": config,
              "task": task}
    path = write_file(folder / TRAINED_ON, json.dumps(record, ensure_ascii=False, indent=1) + "\n")
    card_path = folder / "README.md"
    card = ModelCard.load(card_path) if card_path.is_file() else ModelCard("---\n---\n")
    card.data.tpb_rubric = rubric.fingerprint
    section = card_section(record)
    if CARD_HEADING in card.text:  # an earlier record's section, up to the next heading, gives way to this one
        card.text = re.sub(rf"{re.escape(CARD_HEADING)}\n.*?(?=\n## |\Z)", lambda _: section.rstrip("\n") + "\n",
                           card.text, flags=re.S)
    else:
        card.text = card.text.rstrip() + "\n\n" + section
    write_file(card_path, str(card))
    return path


def card_section(record: dict) -> str:
    """The model card's words on the rubric an adapter was trained on (a section of its own)."""
    return (f"{CARD_HEADING}\n\nTrained ({record['task']}) on the rubric `{record['rubric']}` ({record['display']}: "
            f"{', '.join(record['dimensions'])}) of the dataset `{record['dataset']}`, config `{record['config']}`; "
            f"`{TRAINED_ON}` records it. A judge that loads this adapter and scores under another rubric says so "
            "once, and keeps this one in every result's settings (`adapter_rubric`).\n")


def trained_on(adapter: str | Path) -> dict | None:
    """The record of the rubric `adapter` (a folder, or a Hub id) was trained on; None where it has none (an adapter
    trained before adapters recorded it, or elsewhere)."""
    folder = Path(adapter)
    if folder.is_dir():
        path = folder / TRAINED_ON
    else:
        from huggingface_hub import hf_hub_download
        from huggingface_hub.errors import EntryNotFoundError, LocalEntryNotFoundError

        try:
            path = Path(hf_hub_download(str(adapter), TRAINED_ON))
        except (EntryNotFoundError, LocalEntryNotFoundError, OSError, ValueError):
            return None
    if not path.is_file() or path.stat().st_size > MAX_RECORD_BYTES:
        return None
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None
    well_formed = isinstance(record, dict) and all(isinstance(record.get(k), kind) for k, kind in FIELDS.items())
    return record if well_formed else None


def trained_rubric(adapter: str | Path | None) -> str | None:
    """The fingerprint of the rubric `adapter` was trained on (`tang@3cff45f4149a`), where it records one."""
    record = trained_on(adapter) if adapter else None
    return record["rubric"] if record else None
