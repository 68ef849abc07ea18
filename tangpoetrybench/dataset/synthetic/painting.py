"""Procedural ink-wash landscapes for the synthetic demo release.

A picture is layered from what the poem names (moon, setting sun, river, boat, snow, trees, birds, a
pass or a tower, a lone figure), in a style that differs by painter: ink or colour wash, softness,
contrast, noise. Optional text is planted so that text labels (and the OCR) have something to find: two
columns "leaking" the poem's characters, or a row of fake characters, each made of the left half of one
character and the right half of another (or of one character's top and another's bottom) — shapes that
look like writing but are no character. Both are drawn with an installed Chinese font
(`tangpoetrybench.fonts`); without one, every character is a stroke pattern chosen by its code point.
All randomness comes from the generator passed in: the same seed and font paint the same pixels.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from PIL import Image, ImageDraw, ImageFilter

from ...fonts import CJKFont, cjk_font

PAPER = np.array([238, 230, 212], dtype=np.float32)
INK = np.array([28, 28, 34], dtype=np.float32)


@dataclass(frozen=True)
class Style:
    """How one synthetic painter paints."""

    tint: tuple[int, int, int]  # colour of the far mountains (ink-grey for monochrome painters)
    contrast: float  # 0..1, how dark the nearest ridge gets
    softness: float  # edge blur of ridges, in pixels
    noise: float  # grain amplitude (a weak painter is noisy)
    saturation: float  # 1 = as is; >1 garish
    detail: float  # 0..1, how many of the poem's elements get painted (a literal painter paints them all)


MOTIFS = {
    "moon": "月",
    "sun": "日阳晚昏暮夕",
    "water": "江河水湖海渚舟船钓波流",
    "boat": "舟船钓",
    "snow": "雪霜寒",
    "tree": "树枫林桐梅柳花枝",
    "red": "枫花梅红豆",
    "birds": "鸟雁鸿乌啼",
    "building": "关城楼台寺宫门",
    "figure": "人客翁将夫妾君弟",
}


def motifs(text: str) -> list[str]:
    """The motifs a text names, in MOTIFS order: a list, not a set, whose order (and so the random draws made per
    motif) would change with PYTHONHASHSEED from one process to the next."""
    return [name for name, chars in MOTIFS.items() if any(c in text for c in chars)]


def paint(
    text: str,
    style: Style,
    rng: np.random.Generator,
    size: int = 512,
    glyphs: str | None = None,
) -> Image.Image:
    """Paint a landscape for a poem text. `glyphs`: None, "leakage" (poem characters) or "fake_characters"."""
    h = w = size
    y = np.linspace(0.0, 1.0, h, dtype=np.float32)[:, None]
    x = np.linspace(0.0, 1.0, w, dtype=np.float32)[None, :]
    found = {m for m in motifs(text) if rng.random() < 0.35 + 0.65 * style.detail}

    # Paper with a sky wash, darker at the top, and low-frequency fibre texture.
    canvas = np.broadcast_to(PAPER, (h, w, 3)).copy()
    sky = 0.10 * (1.0 - y) if "sun" not in found else 0.12 * (1.0 - y) + 0.08 * np.exp(-((y - 0.55) / 0.2) ** 2)
    canvas *= 1.0 - sky[..., None] * (0.6 if "sun" not in found else 0.3)
    if "sun" in found:
        canvas[..., 0] += 12 * np.exp(-((y - 0.5) / 0.25) ** 2)[:, 0:1]
    canvas += _smooth_noise(rng, h, w, scale=48)[..., None] * 10

    if "moon" in found or "sun" in found:
        cx, cy = rng.uniform(0.6, 0.85), rng.uniform(0.12, 0.25) if "moon" in found else rng.uniform(0.35, 0.45)
        r = rng.uniform(0.04, 0.07)
        disc = np.clip((r - np.sqrt((x - cx) ** 2 + (y - cy) ** 2)) / 0.006 + 0.5, 0, 1)
        colour = np.array([250, 248, 236] if "moon" in found else [214, 86, 52], dtype=np.float32)
        canvas = canvas * (1 - disc[..., None]) + colour * disc[..., None]

    horizon = rng.uniform(0.55, 0.7) if "water" in found else rng.uniform(0.75, 0.9)
    n_layers = int(rng.integers(3, 6))
    tint = np.array(style.tint, dtype=np.float32)
    for i in range(n_layers):
        depth = (i + 1) / n_layers  # 0 far .. 1 near
        base = horizon - (1 - depth) * rng.uniform(0.25, 0.4) + rng.uniform(-0.03, 0.03)
        height = rng.uniform(0.08, 0.25) * (1.2 - 0.4 * depth)
        ridge = base - height * _ridge(rng, w)
        softness = style.softness / size * (1.5 - depth)
        mask = np.clip((y - ridge[None, :]) / max(softness, 1e-3), 0, 1)
        mask *= np.clip(1 - (y - ridge[None, :]) / (0.35 + 0.3 * depth), 0.35, 1)  # wash fades downward
        if "snow" in found:
            mask *= 0.75
        colour = tint * (1 - depth) + INK * depth
        strength = (0.25 + 0.7 * depth) * style.contrast
        canvas = canvas * (1 - strength * mask[..., None]) + colour * (strength * mask[..., None])

    if "water" in found:
        water = np.clip((y - horizon) / 0.01, 0, 1)
        ripples = 0.5 + 0.5 * np.sin(y * size * rng.uniform(0.8, 1.2) + _smooth_noise(rng, h, w, 24) * 6)
        canvas = canvas * (1 - 0.55 * water[..., None]) + PAPER * 0.55 * water[..., None]
        canvas -= (water * ripples * 10)[..., None]

    img = Image.fromarray(np.clip(canvas, 0, 255).astype(np.uint8))
    draw = ImageDraw.Draw(img)
    _objects(draw, found, rng, size, horizon)
    if glyphs is not None:
        _plant_glyphs(img, text, glyphs, rng, size, cjk_font())
    _seal(draw, rng, size)
    if style.softness > 3:
        img = img.filter(ImageFilter.GaussianBlur(radius=style.softness / 6))

    out = np.asarray(img).astype(np.float32)
    if style.saturation != 1.0:
        grey = out.mean(axis=2, keepdims=True)
        out = grey + (out - grey) * style.saturation
    out += rng.normal(0, style.noise, out.shape).astype(np.float32)
    return Image.fromarray(np.clip(out, 0, 255).astype(np.uint8))


def _smooth_noise(rng: np.random.Generator, h: int, w: int, scale: int) -> np.ndarray:
    """Noise in [-1, 1] that varies over about `scale` pixels (bilinear upsampling of a coarse grid)."""
    coarse = rng.uniform(-1, 1, (h // scale + 2, w // scale + 2)).astype(np.float32)
    img = Image.fromarray(coarse, mode="F").resize((w, h), Image.BILINEAR)
    return np.asarray(img)


def _ridge(rng: np.random.Generator, w: int) -> np.ndarray:
    """A mountain ridge profile in [0, 1]: a few sines plus finer detail."""
    t = np.linspace(0, 1, w, dtype=np.float32)
    profile = np.zeros(w, dtype=np.float32)
    for octave in range(5):
        freq = rng.uniform(1.0, 2.5) * 2**octave
        profile += np.sin(2 * np.pi * (freq * t + rng.uniform())) / 2**octave
    profile -= profile.min()
    return profile / max(float(profile.max()), 1e-6)


def _objects(draw: ImageDraw.ImageDraw, found: set[str], rng: np.random.Generator, size: int, horizon: float) -> None:
    s = size
    ink = (34, 32, 36)
    if "boat" in found:
        bx, by = rng.uniform(0.2, 0.7) * s, (horizon + rng.uniform(0.08, 0.2)) * s
        draw.polygon([(bx, by), (bx + 0.1 * s, by), (bx + 0.08 * s, by + 0.02 * s), (bx + 0.02 * s, by + 0.02 * s)], fill=ink)
        if "figure" in found:
            draw.line([(bx + 0.05 * s, by), (bx + 0.05 * s, by - 0.03 * s)], fill=ink, width=max(2, s // 170))
            draw.ellipse([bx + 0.04 * s, by - 0.045 * s, bx + 0.06 * s, by - 0.03 * s], fill=ink)
    if "tree" in found:
        for _ in range(int(rng.integers(2, 5))):
            tx, ty = rng.uniform(0.05, 0.95) * s, rng.uniform(horizon + 0.02, 0.98) * s
            height = rng.uniform(0.08, 0.18) * s
            draw.line([(tx, ty), (tx + rng.uniform(-0.02, 0.02) * s, ty - height)], fill=ink, width=max(2, s // 120))
            for _ in range(5):
                ox, oy, r = rng.uniform(-0.04, 0.04) * s, rng.uniform(-1.1, -0.7) * height, rng.uniform(0.01, 0.025) * s
                colour = (178, 48, 40) if "red" in found and rng.random() < 0.6 else (52, 58, 50)
                draw.ellipse([tx + ox - r, ty + oy - r, tx + ox + r, ty + oy + r], fill=colour)
    if "birds" in found:
        for _ in range(int(rng.integers(2, 7))):
            bx, by, r = rng.uniform(0.1, 0.9) * s, rng.uniform(0.08, 0.35) * s, rng.uniform(0.008, 0.015) * s
            draw.line([(bx - r, by - r / 2), (bx, by), (bx + r, by - r / 2)], fill=ink, width=max(1, s // 256))
    if "building" in found:
        bx, by = rng.uniform(0.1, 0.6) * s, (horizon - rng.uniform(0.0, 0.08)) * s
        bw = rng.uniform(0.08, 0.14) * s
        for level in range(int(rng.integers(2, 5))):
            top = by - (level + 1) * 0.035 * s
            inset = level * bw * 0.12
            draw.rectangle([bx + inset, top, bx + bw - inset, top + 0.03 * s], fill=(70, 56, 50))
            draw.line([(bx + inset - 0.01 * s, top), (bx + bw - inset + 0.01 * s, top)], fill=ink, width=max(2, s // 200))
    if "figure" in found and "boat" not in found:
        fx, fy = rng.uniform(0.2, 0.8) * s, rng.uniform(horizon + 0.05, 0.95) * s
        draw.line([(fx, fy), (fx, fy - 0.04 * s)], fill=ink, width=max(2, s // 150))
        draw.ellipse([fx - 0.01 * s, fy - 0.06 * s, fx + 0.01 * s, fy - 0.04 * s], fill=ink)


def _glyph(draw: ImageDraw.ImageDraw, code: int, x: float, y: float, cell: float, colour) -> None:
    """A pseudo-character: 3–6 strokes chosen by the character's code point, so a character always looks the same."""
    g = np.random.default_rng(code)
    width = max(1, int(cell / 9))
    for _ in range(int(g.integers(3, 7))):
        kind = g.integers(0, 3)
        a, b = g.uniform(0.1, 0.9, 2)
        if kind == 0:
            draw.line([(x + 0.1 * cell, y + a * cell), (x + 0.9 * cell, y + a * cell)], fill=colour, width=width)
        elif kind == 1:
            draw.line([(x + a * cell, y + 0.1 * cell), (x + a * cell, y + 0.9 * cell)], fill=colour, width=width)
        else:
            draw.line([(x + a * cell, y + 0.15 * cell), (x + b * cell, y + 0.85 * cell)], fill=colour, width=width)


def pseudo_character(font: CJKFont, size: int, rng: np.random.Generator) -> Image.Image:
    """A mask (L mode, size × size) of a fake character: halves of two random characters joined side by side or
    one above the other, in the font's own strokes."""
    cells = []
    for _ in range(2):
        cell = Image.new("L", (size, size), 0)
        ImageDraw.Draw(cell).text((size / 2, size / 2), chr(int(rng.integers(0x4E00, 0x9FA5))), font=font.at(size),
                                  fill=255, anchor="mm")
        cells.append(cell)
    half = size // 2
    box = (0, 0, half, size) if rng.random() < 0.5 else (0, 0, size, half)
    joined = cells[1].copy()
    joined.paste(cells[0].crop(box), (0, 0))
    return joined


def _plant_glyphs(img: Image.Image, text: str, kind: str, rng: np.random.Generator, size: int,
                  font: CJKFont | None) -> None:
    draw = ImageDraw.Draw(img)
    cell = size / 22
    if kind == "leakage":  # a calligraphy column of the poem's own characters, top right
        chars = [c for c in text if "\u4e00" <= c <= "\u9fff"][:14]
        x0 = size * 0.9
        for i, c in enumerate(chars):
            col, row = divmod(i, 7)
            x, y = x0 - col * cell * 1.3, size * 0.05 + row * cell * 1.15
            if font is None:
                _glyph(draw, ord(c), x, y, cell, (24, 24, 28))
            else:
                draw.text((x + cell / 2, y + cell / 2), c, font=font.at(round(cell)), fill=(24, 24, 28), anchor="mm")
    else:  # fake characters scattered on a "signboard"
        x0, y0 = rng.uniform(0.1, 0.6) * size, rng.uniform(0.5, 0.8) * size
        for i in range(int(rng.integers(3, 7))):
            x = x0 + i * cell * 1.1
            if font is None:
                _glyph(draw, int(rng.integers(0x4E00, 0x9FFF)), x, y0, cell, (40, 30, 30))
            else:
                img.paste((40, 30, 30), (round(x), round(y0)), pseudo_character(font, round(cell), rng))


def _seal(draw: ImageDraw.ImageDraw, rng: np.random.Generator, size: int) -> None:
    """An artist's red seal in a corner: conventional, never a text issue."""
    if rng.random() < 0.5:
        s = size * 0.04
        x, y = size * 0.05, size * 0.9
        draw.rectangle([x, y, x + s, y + s], fill=(176, 40, 36))
