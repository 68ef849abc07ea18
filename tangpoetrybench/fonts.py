"""An installed Chinese font for drawing characters with PIL (the demo's planted text, the Space's OCR labels).

Nothing is downloaded and no font is bundled: Debian's `fonts-noto-cjk` (Noto Serif/Sans CJK, whose `.ttc` files
hold one face per region) is looked for first, then any font matplotlib knows with a CJK name. `TPB_CJK_FONT`
names a font file to use instead (`none` turns fonts off, e.g. to check the fallbacks)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from PIL import ImageFont

NOTO_DIRS = ("/usr/share/fonts/opentype/noto", "/usr/share/fonts/noto-cjk", "/usr/share/fonts/google-noto-cjk")
NOTO_FILES = ("NotoSerifCJK-Regular.ttc", "NotoSansCJK-Regular.ttc", "NotoSerifCJK-Bold.ttc", "NotoSansCJK-Bold.ttc")
FONT_ENV = "TPB_CJK_FONT"


@dataclass(frozen=True)
class CJKFont:
    path: str
    index: int  # the face inside a .ttc collection (the simplified-Chinese one where there are several)

    @property
    def name(self) -> str:
        family, style = ImageFont.truetype(self.path, 12, index=self.index).getname()
        return f"{family} {style}"

    def at(self, size: int) -> ImageFont.FreeTypeFont:
        return _sized(self.path, self.index, int(size))


@lru_cache(maxsize=64)
def _sized(path: str, index: int, size: int) -> ImageFont.FreeTypeFont:
    return ImageFont.truetype(path, size, index=index)


def _simplified_face(path: str) -> int | None:
    """The index of the face whose name says SC (simplified Chinese), else 0; None if the file is no font."""
    faces = []
    for index in range(16):
        try:
            faces.append(ImageFont.truetype(path, 12, index=index).getname()[0])
        except OSError:
            break
    if not faces:
        return None
    return next((i for i, name in enumerate(faces) if name.endswith(" SC")), 0)


# Families that draw Chinese, best first: simplified-Chinese faces before any other CJK face (the JP, KR and TC
# variants of a pan-CJK font draw some simplified characters with other glyph shapes).
CJK_FONT_PREFERENCE = ("Noto Sans CJK SC", "Source Han Sans SC", "Source Han Sans CN", "Noto Serif CJK SC",
                       "WenQuanYi Zen Hei", "WenQuanYi Micro Hei", "PingFang SC", "Heiti SC", "SimHei", "Microsoft YaHei")
CJK_FONT_HINTS = ("CJK", "WenQuanYi", "Source Han", "SimHei", "Heiti", "PingFang", "YaHei")


@lru_cache(maxsize=1)
def cjk_family() -> str | None:
    """The installed matplotlib font family best suited to simplified Chinese, if any (see CJK_FONT_PREFERENCE).
    Noto CJK files installed after matplotlib cached its list of fonts are added to it first."""
    from matplotlib import font_manager

    def best() -> str | None:
        names = {f.name for f in font_manager.fontManager.ttflist}
        preferred = next((n for n in CJK_FONT_PREFERENCE if n in names), None)
        return preferred or next((n for n in sorted(names) if any(h in n for h in CJK_FONT_HINTS)), None)

    found = best()
    if found is None:
        for path in (Path(d) / f for d in NOTO_DIRS for f in NOTO_FILES):
            if path.is_file():
                font_manager.fontManager.addfont(str(path))  # every face of the collection
        found = best()
    return found


@lru_cache(maxsize=1)
def cjk_font() -> CJKFont | None:
    """The Chinese font to draw with, or None when none is installed (callers then fall back and say so)."""
    chosen = os.environ.get(FONT_ENV)
    if chosen:
        if chosen.lower() == "none":
            return None
        index = _simplified_face(chosen)
        if index is None:
            raise ValueError(f"{FONT_ENV}={chosen}: not a font file PIL can read")
        return CJKFont(chosen, index)
    candidates = [str(Path(d) / f) for d in NOTO_DIRS for f in NOTO_FILES]
    if cjk_family():
        from matplotlib import font_manager

        candidates += sorted(f.fname for f in font_manager.fontManager.ttflist if f.name == cjk_family())
    for path in candidates:
        if Path(path).is_file():
            index = _simplified_face(path)
            if index is not None:
                return CJKFont(path, index)
    return None
