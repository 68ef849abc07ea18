"""Files from and into data folders, the safe way.

- Writing: a folder all at once (`atomic_folder`: readers never see a half-written dataset or release), or a file
  all at once and never through a symbolic link (`atomic_file`, `write_file`, and `write_csv`, which also quotes
  cells a spreadsheet would run as formulas; `atomic_path` for a writer that needs a file name).
- Reading: paths from data kept inside their folder (`inside`, `link_outside`), images opened with their size checked
  from the header before they are decoded (`open_image`), JSON Lines with the line of each bad record.
- Sending: an image as its pixels alone, every piece of metadata left behind (`pixels_only`); work only to servers of
  this machine or its network where HF_HUB_OFFLINE is set, one policy for every destination a command is given (a
  served judge's `--base-url`, a Ray cluster's `--address`: `check_offline`).
"""

from __future__ import annotations

import csv
import io
import ipaddress
import json
import os
import re
import shutil
import socket
import tempfile
import warnings
from contextlib import contextmanager
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Iterable, Iterator, Mapping, Sequence
from urllib.parse import urlparse

from .errors import ImageError, ImageTooLarge, quote

if TYPE_CHECKING:
    from PIL import Image

DEFAULT_MAX_IMAGE_PIXELS = 50_000_000
"""Images with more pixels are refused before they are decoded, wherever one is read (a decompression bomb is a few
KB on disk and gigabytes in memory)."""


@contextmanager
def atomic_folder(out: Path) -> Iterator[Path]:
    """Yield a temporary folder beside `out`; on success it replaces `out`, on failure it is removed."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.building-", dir=out.parent))
    tmp.chmod(0o755)  # mkdtemp makes it private; the dataset folder is meant to be shared
    try:
        yield tmp
        old = None
        if out.exists():
            old = out.parent / f".{out.name}.old-{os.getpid()}"
            os.replace(out, old)
        os.replace(tmp, out)
        if old is not None:
            old.unlink() if old.is_symlink() else shutil.rmtree(old)  # a link replaced is removed, not followed
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)


def ensure_free(out: Path, overwrite: bool) -> None:
    """Refuse to replace a non-empty folder unless asked to."""
    if out.exists() and not (overwrite or (out.is_dir() and not any(out.iterdir()))):
        raise FileExistsError(f"{out} exists; choose another folder or pass --overwrite")


def json_lines(path: Path | str, partial: str = "read") -> Iterator[tuple[int, Any]]:
    """(line number, value) of each non-blank line of a JSON Lines file, read in one open; a line that is not JSON
    is an error naming the file and line. Lines end at a newline only (a U+2028 inside a string is no line break).

    A last line without its newline is what a writer killed mid-line, or still writing, leaves. `partial` says what
    to do with it: "read" it as any other line (where it is cut short, the error says so), "drop" it, or "cut" it
    off the file and drop it (only the one process about to append to the file may cut it)."""
    if partial not in ("read", "drop", "cut"):
        raise ValueError(f"partial is read, drop or cut, not {partial!r}")
    data = Path(path).read_bytes()
    end = data.rfind(b"\n") + 1
    if partial == "cut" and end < len(data):
        with open(path, "r+b") as f:
            f.truncate(end)
    lines = (data if partial == "read" else data[:end]).split(b"\n")
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            yield lineno, json.loads(line.decode("utf-8"))
        except UnicodeDecodeError:
            raise ValueError(f"{path}:{lineno}: not UTF-8 text") from None
        except json.JSONDecodeError as exc:
            if lineno == len(lines) and end < len(data):
                raise ValueError(f"{path}:{lineno}: a line cut short, with no newline (the run writing the file was "
                                 "killed, or is still running): resume it, or let it finish") from None
            raise ValueError(f"{path}:{lineno}: not valid JSON ({exc.msg})") from None


HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*(/[A-Za-z0-9][\w.-]*)?")
"""What the Hub accepts as a repo id: NAME or ORG/NAME."""


def looks_like_path(value: str) -> bool:
    """A value meant as a local path: `./`, `../`, `/` or `~` in front, a Windows separator, more than one `/`, or
    a folder that exists in front of its last part (`sample/datset` where `sample/` exists)."""
    if value.startswith(("./", "../", "/", "~", ".\\")) or value in (".", "..") or not HUB_ID.fullmatch(value):
        return True
    return "/" in value and Path(value).parent.is_dir()


def hub_offline() -> bool:
    from huggingface_hub import constants

    return bool(constants.HF_HUB_OFFLINE)


def host_of(destination: str) -> str | None:
    """The host a destination names: a URL's (`http://host:port/v1`, `ray://host:port`) or a bare `host:port`'s."""
    try:
        return urlparse(destination if "://" in destination else f"//{destination}").hostname
    except ValueError:
        return None


def is_internal_host(host: str | None) -> bool:
    """Whether every address of `host` is loopback, private or link-local: a server of this machine or of its own
    network, which an offline machine may call."""
    if not host:
        return False
    try:
        addresses = {info[4][0] for info in socket.getaddrinfo(host, None)}
    except (OSError, UnicodeError):
        return False
    ips = [ipaddress.ip_address(a.split("%")[0]) for a in addresses]
    return bool(ips) and all(ip.is_loopback or ip.is_private or ip.is_link_local for ip in ips)


def is_internal_url(url: str) -> bool:
    return is_internal_host(urlparse(url).hostname)


def check_offline(destinations: Sequence[str], action: str, unnamed: str | None = None) -> None:
    """The offline policy: with HF_HUB_OFFLINE set, each destination must be internal (`is_internal_host`); the first
    that is not is refused before anything is sent, named (or described by `unnamed`: where the command chose it
    itself), with `action`, what to do instead. docs/security.md's table says what goes to each destination."""
    if not hub_offline():
        return
    outside = [d for d in destinations if not is_internal_host(host_of(d))]
    if outside:
        where = unnamed or f"{outside[0]} is not a loopback or private address"
        raise ValueError(f"HF_HUB_OFFLINE is set and {where}: {action}, or unset HF_HUB_OFFLINE")


def local_or_hub(value: str | os.PathLike, what: str, repo_type: str = "model") -> str:
    """`value` as given if it is an existing file or folder, or a Hub id that may be fetched; otherwise an error
    that names it, at once and before any network call.

    A path that does not exist is never sent to the Hub (it would answer, after retries, with an error that does
    not name the path). With `HF_HUB_OFFLINE=1` a Hub id must already be in the local Hub cache. `what` names the
    option in the error (`--model`, `--dataset`)."""
    text = str(value)
    if Path(text).expanduser().exists():
        return text
    if looks_like_path(text):
        raise FileNotFoundError(f"{what} {text}: no such file or folder (check the path)")
    if hub_offline():
        from huggingface_hub import snapshot_download
        from huggingface_hub.errors import LocalEntryNotFoundError

        try:
            snapshot_download(text, repo_type=repo_type, local_files_only=True)
        except (LocalEntryNotFoundError, OSError, ValueError):
            raise ValueError(f"{what} {text} is neither a local folder nor in the Hub cache, and HF_HUB_OFFLINE=1 "
                             "forbids downloading it: give the path of a local copy, or unset HF_HUB_OFFLINE"
                             ) from None
    return text


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


UMASK = _umask()  # read once: os.umask can only be read by setting it


def refuse_links(path: Path | str, root: Path | str | None = None) -> None:
    """Refuse to write at `path` through a symbolic link: `path` itself, and with `root`, every folder between `root`
    and `path` (a link planted in a data folder would send the write anywhere)."""
    path = Path(path)
    steps = [path]
    if root is not None:
        below = path.relative_to(root).parts
        steps = [Path(root).joinpath(*below[:i]) for i in range(1, len(below) + 1)]
    for step in steps:
        if step.is_symlink():
            raise ValueError(f"{step} is a symbolic link (to {os.readlink(step)}): refusing to write through it; "
                             "remove the link, or write elsewhere")


def file_mode(private: bool) -> int:
    """The mode a written file gets: 0600 where it is `private` (it holds what only its owner may read: a rating
    campaign's answers and token digests), else what the umask leaves of 0666."""
    return 0o600 if private else 0o666 & ~UMASK


def private_folder(folder: Path | str) -> Path:
    """`folder`, made where it is missing with every folder above it that is missing too, each 0700 whatever the
    umask (`Path.mkdir(parents=True)` makes the folders above with the umask's mode): where a rating campaign's files
    go. Folders that exist are left as they are."""
    folder = Path(folder)
    missing = [p for p in (folder, *folder.parents) if not p.exists()]
    for path in reversed(missing):
        path.mkdir(mode=0o700, exist_ok=True)
        path.chmod(0o700)
    return folder


@contextmanager
def atomic_file(path: Path | str, mode: str = "w", root: Path | str | None = None, private: bool = False,
                **kwargs) -> Iterator[IO]:
    """A file object whose content becomes `path` whole, or not at all: written to a new temporary file beside it
    (created exclusively, so never through a link), then renamed over it, which replaces a link rather than
    following it. Symbolic links at `path` (and below `root`) are refused (`refuse_links`). `private`: readable by
    its owner alone (`file_mode`). Other keyword arguments go to `open` (`encoding`, `newline`)."""
    path = Path(path)
    refuse_links(path, root)  # before any folder is made: one made below a linked folder would be made elsewhere
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    if "b" not in mode:
        kwargs.setdefault("encoding", "utf-8")
    done = False
    try:
        with os.fdopen(fd, mode, **kwargs) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, file_mode(private))  # mkstemp makes it private; most files are meant to be shared
        os.replace(tmp, path)
        done = True
    finally:
        if not done:
            Path(tmp).unlink(missing_ok=True)


@contextmanager
def atomic_path(path: Path | str, root: Path | str | None = None, private: bool = False) -> Iterator[Path]:
    """`atomic_file` for a writer that needs a file name rather than a file object (sqlite's online backup): a new,
    empty temporary file beside `path` (mode 0600 while it is written), created exclusively under an unguessable
    name, renamed over `path` once the block ends without error, removed otherwise. Links at `path` (and below
    `root`) are refused."""
    path = Path(path)
    refuse_links(path, root)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        os.chmod(tmp, file_mode(private))
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write_file(path: Path | str, data: str | bytes, root: Path | str | None = None, private: bool = False) -> Path:
    """Write `data` (text as UTF-8) to `path` whole, never through a symbolic link (`atomic_file`)."""
    with atomic_file(path, "wb" if isinstance(data, bytes) else "w", root, private) as f:
        f.write(data)
    return Path(path)


FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
"""What makes a spreadsheet read a cell as a formula (OWASP's list)."""


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def quote_cell(value: object) -> object:
    """A CSV cell that a spreadsheet shows as text: one starting with `=`, `+`, `-`, `@`, a tab or a carriage return
    gets a leading `'` (a plain number such as -0.5 is left as it is). `unquote_cell` undoes it."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS) and not _is_number(value):
        return "'" + value
    return value


def unquote_cell(value: str) -> str:
    """A cell as `quote_cell` had it before quoting (a draft saved back by a spreadsheet reads as it was written)."""
    return value[1:] if value.startswith("'") and value[1:].startswith(FORMULA_STARTS) else value


def csv_text(columns: Iterable[str], rows: Iterable[Mapping]) -> str:
    """A CSV for people to open, as text: a header, then one line per row, every cell `quote_cell`d."""
    out = io.StringIO(newline="")
    writer = csv.DictWriter(out, fieldnames=list(columns), lineterminator="\n")
    writer.writeheader()
    writer.writerows({k: quote_cell(v) for k, v in row.items()} for row in rows)
    return out.getvalue()


def write_csv(path: Path | str, columns: Iterable[str], rows: Iterable[Mapping],
              root: Path | str | None = None, private: bool = False) -> Path:
    """`csv_text` written whole and never through a symbolic link (`write_file`), as UTF-8 bytes (no newline
    translation inside a quoted cell)."""
    return write_file(path, csv_text(columns, rows).encode("utf-8"), root, private)


def data_folder(folder: Path | str) -> Path:
    """A folder of data as its rows' readers take it: absolute, with every link and `..` resolved (as the system
    resolves them: `link/..` is the parent of the link's target), once, where its source is made. Its rows name their
    files relative to it (`inside` joins them), so a path given relative, with `..` or through a linked parent names
    the same files in any process and working directory (a data-loader worker, a Ray worker)."""
    return Path(folder).resolve()


def inside(root: Path | str, path: Path | str) -> Path:
    """`root / path` with every link resolved, refused (ValueError) unless it lies inside `root`: a path read from data
    (absolute, with `..`, or through a link) never reaches outside the data's folder. A relative `path` is taken from
    `root` (how rows name their files: `data_folder`)."""
    base = Path(root).resolve()
    target = (base / path).resolve()
    if not target.is_relative_to(base):
        raise ValueError(f"{quote(str(path))} lies outside {root}: refused (a path from data must stay inside its "
                         "folder)")
    return target


def link_outside(root: Path | str, path: Path | str) -> Path | None:
    """The first symbolic link on the way from `root` down to `path` (itself included) whose target lies outside
    `root`, or None: such a link pulls an outside file into what is read from `root`."""
    root, path = Path(root), Path(path)
    base = root.resolve()
    step = root
    for part in path.relative_to(root).parts:
        step = step / part
        if step.is_symlink() and not step.resolve().is_relative_to(base):
            return step
    return None


def open_image(source: str | os.PathLike | bytes | "Image.Image",
               max_pixels: int = DEFAULT_MAX_IMAGE_PIXELS) -> "Image.Image":
    """An image (a file, its bytes, or a PIL image not yet decoded) decoded, once its width × height, read from the
    header, is checked against `max_pixels`. Raises `ImageTooLarge` for a larger image (before decoding it) and
    `ImageError` for one that cannot be read, each with a one-line reason."""
    from PIL import Image, UnidentifiedImageError

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)  # the limit below is the one that counts
            image = source if isinstance(source, Image.Image) else Image.open(
                io.BytesIO(source) if isinstance(source, bytes) else source)
            if image.width * image.height > max_pixels:
                raise ImageTooLarge(f"{image.width}x{image.height} pixels is over the limit of {max_pixels:,} pixels "
                                    "(a decompression bomb, or an image far larger than a generator makes)")
            image.load()
    except ImageError:
        raise
    except Image.DecompressionBombError as exc:
        raise ImageTooLarge(f"refused as a decompression bomb: {exc}") from None
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as exc:
        raise ImageError(f"unreadable image: {exc}") from exc
    return image


def pixels_only(image: "Image.Image") -> "Image.Image":
    """The image's pixels and nothing else: a new RGB image that carries none of the file's metadata (PNG text
    chunks, EXIF, XMP, comments: a generator's prompt, often the poem itself, travels in them, and a PIL image keeps
    them in `info`, which gradio writes back into the PNG it serves). An embedded colour profile is applied (the
    pixels converted to sRGB, so the colours stay what the file meant) and then dropped, its own text with it; a
    profile that cannot be applied is dropped."""
    from PIL import Image, ImageCms

    base = image if image.mode in ("RGB", "CMYK", "L") else image.convert("RGB")
    rgb = None
    if image.info.get("icc_profile"):
        try:
            rgb = ImageCms.profileToProfile(base, ImageCms.ImageCmsProfile(io.BytesIO(image.info["icc_profile"])),
                                            ImageCms.createProfile("sRGB"), outputMode="RGB")
        except (ImageCms.PyCMSError, OSError, ValueError, TypeError):
            rgb = None
    rgb = rgb if rgb is not None else base.convert("RGB")
    return Image.frombytes("RGB", rgb.size, rgb.tobytes())
