"""Tiny random-weight models, built offline from configs, for tests and smoke runs (`tpb tiny-models OUT`).

What is built is read from the registry (each evaluator's `tiny_models`), then the models of the pipeline's other
parts (`PIPELINE`); each name has its builder in `BUILDERS`:

    OUT/qwen3-vl       Qwen3-VL (PAE, recognize, SemJudge, VQAScore): 2 text layers of width 64, a 2-block vision
                       tower
    OUT/clip           CLIP (CLIPScore)
    OUT/chinese-clip   Chinese-CLIP (CLIPScore)
    OUT/blip           BLIP image-text matching (BLIPScore)
    OUT/internvl       InternVL3.5 as transformers holds it ("-HF" checkpoints; the Table 6 backbone ablation):
                       2 Qwen3 text layers of width 64, a 2-layer vision tower on 32×32 tiles
    OUT/text-to-image  a diffusers StableDiffusionPipeline (`tpb generate`): a 2-block UNet of width 8, a 2-block VAE,
                       the tiny CLIP text tower; 64×64 images in a second or less on the CPU

Each is a `save_pretrained` folder (safetensors) with its processor, loadable by path with the same code
as the real checkpoints. Tokenizers are trained here on the bundled poems and the rubric prompt. The
configs carry `tpb_random_weights: true` (the pipeline's model_index.json `_tpb_random_weights`), so every
result made with them is marked as a plumbing check: their scores and images mean nothing.
"""

from __future__ import annotations

import importlib.util
import json
from importlib import resources
from pathlib import Path

import torch

from ..models import RANDOM_WEIGHTS_FLAG
from .evaluators.vqascore import QUESTIONS, question
from ..files import atomic_folder
from ..poems import sample_poems
from .prompt import system_prompt, user_prompt
from ..rubric import BUILTIN, DEFAULT_TRADITION, load_rubric

PIPELINE = ("internvl", "text-to-image")  # the training's backbone ablation (Table 6) and `tpb generate`'s pipeline
QWEN_SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>",
                "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>"]
SEED = 0
REVISION = 5  # raise when a model or processor here changes, so that older folders are rebuilt
# Qwen3-VL-8B-Instruct's published preprocessor_config.json and video_preprocessor_config.json: the tiny model
# sees exactly the image tokens the real one does (a 1024×1024 image is 1,024 tokens).
QWEN3_VL_IMAGE_PROCESSOR = dict(size={"longest_edge": 16777216, "shortest_edge": 65536}, patch_size=16,
                                temporal_patch_size=2, merge_size=2, image_mean=[0.5, 0.5, 0.5], image_std=[0.5, 0.5, 0.5])
QWEN3_VL_VIDEO_PROCESSOR = dict(QWEN3_VL_IMAGE_PROCESSOR, size={"longest_edge": 25165824, "shortest_edge": 4096})
# Two-layer towers of width 32 on 32×32 images, shared by the tiny CLIP, Chinese-CLIP and BLIP.
TEXT_TOWER = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2)
VISION_TOWER = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                    image_size=32, patch_size=8)


def _corpus() -> list[str]:
    poems = sample_poems()
    texts = [system_prompt(load_rubric(t)) for t in BUILTIN]
    texts += [user_prompt(p) + "".join(question(p, kind) for kind in QUESTIONS) for p in poems]
    texts += [_answer_shapes(load_rubric(DEFAULT_TRADITION)) + " Yes No"]
    return texts * 2


def _answer_shapes(rubric) -> str:
    """An answer with the value shapes a judge writes: a whole number, a fraction, a null and a quarter, on the
    rubric's first two dimensions, its first that can be excluded and its overall one."""
    nullable = next(d.key for d in rubric.dimensions if any(o.excluded for o in d.options))
    return json.dumps(dict(zip([*rubric.keys[:2], nullable, rubric.overall], [1, 0.5, None, 0.75])))


def _bpe(vocab_size: int, special: list[str]):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=special, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(_corpus(), trainer)
    return tok


def _save(model_class, config, processor, out: Path) -> None:
    """Seeded random weights, marked as such in the config, saved with the processor. A generating model's output
    head is drawn at std 1/√hidden, not transformers' 0.02: with width 64 that would cap every logit near ±1.3, and
    the tiny model could never learn to answer in a format (the README's main job trains it to)."""
    setattr(config, RANDOM_WEIGHTS_FLAG, True)
    torch.manual_seed(SEED)
    model = model_class(config).eval()
    head = getattr(model, "lm_head", None)
    if head is not None:
        torch.nn.init.normal_(head.weight, std=head.weight.shape[1] ** -0.5)
    model.save_pretrained(out)
    processor.save_pretrained(out)


def build_qwen3_vl(out: Path) -> None:
    from transformers import (PreTrainedTokenizerFast, Qwen2VLImageProcessor, Qwen3VLConfig,
                              Qwen3VLForConditionalGeneration, Qwen3VLProcessor, Qwen3VLVideoProcessor)

    tokenizer = PreTrainedTokenizerFast(tokenizer_object=_bpe(2048, QWEN_SPECIAL), eos_token="<|im_end|>",
                                        pad_token="<|endoftext|>")
    ids = dict(zip(QWEN_SPECIAL, tokenizer.convert_tokens_to_ids(QWEN_SPECIAL)))
    template = (resources.files("tangpoetrybench") / "templates" / "qwen3_vl_chat_template.jinja").read_text(encoding="utf-8")
    processor = Qwen3VLProcessor(
        image_processor=Qwen2VLImageProcessor(**QWEN3_VL_IMAGE_PROCESSOR), tokenizer=tokenizer,
        video_processor=Qwen3VLVideoProcessor(**QWEN3_VL_VIDEO_PROCESSOR), chat_template=template,
    )
    config = Qwen3VLConfig(
        text_config=dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                         num_key_value_heads=2, head_dim=16, vocab_size=len(tokenizer), max_position_embeddings=16384,
                         rope_scaling={"rope_type": "default", "mrope_section": [2, 3, 3], "mrope_interleaved": True},
                         eos_token_id=ids["<|im_end|>"], pad_token_id=ids["<|endoftext|>"]),
        vision_config=dict(depth=2, hidden_size=32, intermediate_size=64, num_heads=2, patch_size=16,
                           spatial_merge_size=2, temporal_patch_size=2, out_hidden_size=64,
                           num_position_embeddings=64, deepstack_visual_indexes=[0, 1]),
        image_token_id=ids["<|image_pad|>"], video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"], vision_end_token_id=ids["<|vision_end|>"],
        eos_token_id=ids["<|im_end|>"], pad_token_id=ids["<|endoftext|>"],
    )
    _save(Qwen3VLForConditionalGeneration, config, processor, out)


def _clip_tokenizer():
    """CLIP's special tokens and 77-token limit on a byte-level BPE trained here."""
    from tokenizers import processors
    from transformers import PreTrainedTokenizerFast

    special = ["<|startoftext|>", "<|endoftext|>"]
    tok = _bpe(512, special)
    tok.post_processor = processors.TemplateProcessing(single=f"{special[0]} $A {special[1]}",
                                                       special_tokens=[(special[0], 0), (special[1], 1)])
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=special[0], eos_token=special[1],
                                   pad_token=special[1], model_max_length=77)


def _clip_text_config(tokenizer) -> dict:
    return dict(TEXT_TOWER, vocab_size=len(tokenizer), max_position_embeddings=77, bos_token_id=0, eos_token_id=1,
                pad_token_id=1)


def build_clip(out: Path) -> None:
    from transformers import CLIPConfig, CLIPImageProcessor, CLIPModel, CLIPProcessor

    tokenizer = _clip_tokenizer()
    processor = CLIPProcessor(image_processor=CLIPImageProcessor(size={"shortest_edge": 32},
                                                                 crop_size={"height": 32, "width": 32}), tokenizer=tokenizer)
    config = CLIPConfig(text_config=_clip_text_config(tokenizer), vision_config=VISION_TOWER, projection_dim=16)
    _save(CLIPModel, config, processor, out)


def _bert_tokenizer(folder: Path):
    from transformers import BertTokenizer

    chars = sorted({c for text in _corpus() for c in text if "\u4e00" <= c <= "\u9fff"})
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + chars + list("abcdefghijklmnopqrstuvwxyz0123456789，。")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    return BertTokenizer(vocab=str(folder / "vocab.txt"))


def build_chinese_clip(out: Path) -> None:
    from transformers import ChineseCLIPConfig, ChineseCLIPImageProcessor, ChineseCLIPModel, ChineseCLIPProcessor

    tokenizer = _bert_tokenizer(out)
    processor = ChineseCLIPProcessor(image_processor=ChineseCLIPImageProcessor(
        size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32}), tokenizer=tokenizer)
    config = ChineseCLIPConfig(
        text_config=dict(TEXT_TOWER, vocab_size=len(tokenizer), max_position_embeddings=128),
        vision_config=VISION_TOWER, projection_dim=16,
    )
    _save(ChineseCLIPModel, config, processor, out)


def build_blip(out: Path) -> None:
    from transformers import BlipConfig, BlipForImageTextRetrieval, BlipImageProcessor, BlipProcessor

    tokenizer = _bert_tokenizer(out)
    processor = BlipProcessor(image_processor=BlipImageProcessor(size={"height": 32, "width": 32}), tokenizer=tokenizer)
    ids = tokenizer.convert_tokens_to_ids(["[PAD]", "[CLS]", "[SEP]"])
    config = BlipConfig(
        text_config=dict(TEXT_TOWER, vocab_size=len(tokenizer), encoder_hidden_size=32, max_position_embeddings=128,
                         pad_token_id=ids[0], bos_token_id=ids[1], sep_token_id=ids[2], eos_token_id=ids[2]),
        vision_config=VISION_TOWER, projection_dim=16,
    )
    _save(BlipForImageTextRetrieval, config, processor, out)


# InternVL's image tokens, as the tokenizer of an "-HF" checkpoint names them.
INTERNVL_SPECIAL = {"start_image_token": "<img>", "end_image_token": "</img>", "context_image_token": "<IMG_CONTEXT>",
                    "video_token": "<video>"}


def build_internvl(out: Path) -> None:
    """The chat template is the one transformers' InternVL conversion gives the "-HF" checkpoints."""
    from transformers import (GotOcr2ImageProcessor, InternVLConfig, InternVLForConditionalGeneration,
                              InternVLProcessor, InternVLVideoProcessor, PreTrainedTokenizerFast)

    chat = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=_bpe(2048, chat + list(INTERNVL_SPECIAL.values())),
                                        eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                        extra_special_tokens=INTERNVL_SPECIAL)
    template = (resources.files("tangpoetrybench") / "templates" / "internvl_chat_template.jinja").read_text(encoding="utf-8")
    tile = {"height": 32, "width": 32}
    image_seq_length = 4  # (32 / 8)² patches, pixel-shuffled by the 0.5 downsample ratio
    processor = InternVLProcessor(
        image_processor=GotOcr2ImageProcessor(size=tile, crop_to_patches=True, max_patches=2),
        tokenizer=tokenizer, video_processor=InternVLVideoProcessor(size=tile), image_seq_length=image_seq_length,
        chat_template=template,
    )
    eos, pad = tokenizer.convert_tokens_to_ids(["<|im_end|>", "<|endoftext|>"])
    config = InternVLConfig(
        vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                           image_size=[32, 32], patch_size=[8, 8]),
        text_config=dict(model_type="qwen3", hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, head_dim=16, vocab_size=len(tokenizer),
                         max_position_embeddings=16384, eos_token_id=eos, pad_token_id=pad),
        image_token_id=tokenizer.context_image_token_id, image_seq_length=image_seq_length, downsample_ratio=0.5,
        eos_token_id=eos, pad_token_id=pad,
    )
    _save(InternVLForConditionalGeneration, config, processor, out)


def build_text_to_image(out: Path) -> None:
    """A Stable Diffusion pipeline of random weights (the layout diffusers' own tests use, at width 8): the UNet
    denoises 32×32 latents that the VAE decodes to 64×64 images. Its model_index.json is marked as random weights."""
    from diffusers import AutoencoderKL, EulerDiscreteScheduler, StableDiffusionPipeline, UNet2DConditionModel
    from transformers import CLIPTextConfig, CLIPTextModel

    from ..generation.diffusers_generate import RANDOM_WEIGHTS_INDEX_KEY

    tokenizer = _clip_tokenizer()
    torch.manual_seed(SEED)
    unet = UNet2DConditionModel(block_out_channels=(8, 16), layers_per_block=1, sample_size=32, in_channels=4,
                                out_channels=4, down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"),
                                up_block_types=("CrossAttnUpBlock2D", "UpBlock2D"), cross_attention_dim=32,
                                attention_head_dim=4, norm_num_groups=4)
    vae = AutoencoderKL(block_out_channels=(8, 16), in_channels=3, out_channels=3, latent_channels=4, sample_size=64,
                        down_block_types=("DownEncoderBlock2D",) * 2, up_block_types=("UpDecoderBlock2D",) * 2,
                        norm_num_groups=4)
    text_encoder = CLIPTextModel(CLIPTextConfig(**_clip_text_config(tokenizer))).eval()
    pipe = StableDiffusionPipeline(vae=vae, text_encoder=text_encoder, tokenizer=tokenizer, unet=unet,
                                   scheduler=EulerDiscreteScheduler(steps_offset=1), safety_checker=None, feature_extractor=None,
                                   requires_safety_checker=False)
    pipe.save_pretrained(out, safe_serialization=True)
    index_path = out / "model_index.json"
    index = json.loads(index_path.read_text(encoding="utf-8"))
    index_path.write_text(json.dumps({**index, RANDOM_WEIGHTS_INDEX_KEY: True}, indent=2) + "\n", encoding="utf-8")


BUILDERS = {"qwen3-vl": build_qwen3_vl, "clip": build_clip, "chinese-clip": build_chinese_clip, "blip": build_blip,
            "internvl": build_internvl, "text-to-image": build_text_to_image}


def models() -> tuple[str, ...]:
    """The tiny models `tpb tiny-models` builds: those the registry's evaluators name, in its order, then
    `PIPELINE`'s. A name without a builder is refused here, before anything is built."""
    from .registry import BUILTIN

    names = tuple(dict.fromkeys([m for spec in BUILTIN for m in spec.tiny_models] + list(PIPELINE)))
    unknown = [n for n in names if n not in BUILDERS]
    if unknown:
        raise ValueError(f"no builder for the tiny model {unknown[0]!r} (known: {', '.join(BUILDERS)})")
    return names


def buildable() -> tuple[str, ...]:
    """Every model, but the diffusers pipeline where diffusers is not installed (the vLLM environment, a bare GPU
    benchmark machine): those need only the transformers models."""
    has_diffusers = importlib.util.find_spec("diffusers") is not None
    return tuple(name for name in models() if name != "text-to-image" or has_diffusers)


def build_tiny_models(out: Path | str, overwrite: bool = False) -> dict[str, Path]:
    """Build the tiny models under `out` (atomically); returns name → folder. An existing complete set of this
    revision is reused; one an older tpb built, or one that lacks a model this environment can build, is rebuilt."""
    out = Path(out)
    marker = out / "tiny_revision.txt"
    names = buildable()
    if (not overwrite and marker.is_file() and marker.read_text().strip() == str(REVISION)
            and all((out / name).is_dir() for name in names)):
        return {name: out / name for name in names}
    with atomic_folder(out) as tmp:
        for name in names:
            BUILDERS[name](tmp / name)
        (tmp / marker.name).write_text(f"{REVISION}\n")
    return {name: out / name for name in names}
