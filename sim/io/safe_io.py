"""Reading untrusted files and writing outputs safely: the one helper every reader and writer uses.

Reading (:func:`read_input`): regular files only (a FIFO would hang, ``/dev/zero`` never ends, a folder
is a typo), at most ``max_bytes`` read (the size is checked, then at most one byte more is read, so a
file that grows is caught too). Every file read this way is remembered as an *input* of the command.

Parsing: :func:`load_yaml` is ``yaml.safe_load`` (no tags run code) that refuses duplicate keys (YAML
silently keeps the last one, so a typo'd second ``bandwidth_GBps`` would win unseen) and nesting deeper
than :data:`MAX_DEPTH`; :func:`load_json` refuses the same nesting (Python's json recurses per level).

Writing (:func:`write_output`, :func:`output_path`): never onto a file this command read (``calibrate IN
--out IN``), never through a symbolic link placed at the output path, and atomically: the data goes to
a temporary file in the same folder, which is then renamed over the target, so a crash or Ctrl-C leaves
either the old file or the new one, never half of one.
"""
from __future__ import annotations

import contextlib
import json
import os
import stat
import tempfile
import zlib
from itertools import chain, compress

import yaml

from ..errors import CollsimError

MAX_DEPTH = 64  # no collsim file nests deeper than ~6 levels; 64 leaves room and stops stack exhaustion
# (st_dev, st_ino) -> path of every file the running command read; None outside a command (Python API,
# notebooks: rewriting a file read earlier in a session is a normal workflow there, not a mistake)
_inputs: dict[tuple[int, int], str] | None = None


@contextlib.contextmanager
def command_inputs():
    """The scope of one CLI command: files read inside it may not be written over inside it."""
    global _inputs
    outer, _inputs = _inputs, {}
    try:
        yield
    finally:
        _inputs = outer


def remember_input(path: str) -> None:
    """Record ``path`` as an input of this command (:func:`write_output` will refuse to write over it)."""
    if _inputs is None:
        return
    try:
        st = os.stat(path)
    except OSError:
        return
    _inputs[(st.st_dev, st.st_ino)] = path


def read_input(path: str, what: str, max_bytes: int, binary: bool = False):
    """The contents of the regular file ``path`` (text unless ``binary``), refused clearly when it is not a
    regular file or is larger than ``max_bytes``."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise CollsimError(f"cannot read {what} {path!r}: it does not exist: check the path") from None
    except OSError as e:
        raise CollsimError(f"cannot read {what} {path!r}: {e.strerror}") from None
    if stat.S_ISDIR(st.st_mode):
        raise CollsimError(f"{what} {path!r} is a folder: give a file")
    if not stat.S_ISREG(st.st_mode):
        raise CollsimError(f"{what} {path!r} is not a regular file (a device, pipe or socket): give a file saved on disk")
    if st.st_size > max_bytes:
        raise CollsimError(f"{what} {path!r} is {st.st_size:,} bytes, over the {max_bytes:,}-byte limit: is it the right file?")
    try:
        with open(path, "rb") as f:
            blob = f.read(max_bytes + 1)
    except OSError as e:
        raise CollsimError(f"cannot read {what} {path!r}: {e.strerror}") from None
    if len(blob) > max_bytes:
        raise CollsimError(f"{what} {path!r} grew past the {max_bytes:,}-byte limit while being read: is it the right file?")
    remember_input(path)
    return blob if binary else blob.decode("utf-8", errors="replace")


class _UniqueKeyLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses a key given twice in one mapping and over-deep nesting."""

    def compose_node(self, parent, index):
        self._depth = getattr(self, "_depth", 0) + 1
        try:
            if self._depth > MAX_DEPTH:
                mark = self.peek_event().start_mark
                raise CollsimError(f"nesting deeper than {MAX_DEPTH} levels (line {mark.line + 1}): not a collsim file")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            try:
                duplicate = key in seen
            except TypeError:
                continue  # an unhashable key: safe_load itself reports it
            if duplicate:
                raise CollsimError(f"key {key!r} is given twice (line {key_node.start_mark.line + 1}): give each key once")
            seen.add(key)
        return super().construct_mapping(node, deep)


def load_yaml(text: str, source: str):
    """Parse YAML safely (see the module docstring); errors name ``source`` and the line."""
    try:
        return yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 (a SafeLoader subclass)
    except CollsimError as e:
        raise CollsimError(f"{source!r}: {e}") from None
    except yaml.YAMLError as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        mark = getattr(e, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        raise CollsimError(f"{source!r} is not valid YAML{where}: {first}") from None
    except RecursionError:
        raise CollsimError(f"{source!r}: nesting too deep: not a collsim file") from None
    except ValueError as e:   # an integer past Python's 4,300-digit conversion limit, a bad date, ...
        raise CollsimError(f"{source!r}: {_first_line(e)}: no collsim number needs that: check the file") from None


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return (text.splitlines()[0] if text else type(e).__name__)[:200]


_CONTAINERS = frozenset((dict, list))


def _too_deep(data) -> bool:
    """True when ``data`` (as json.loads builds it) nests deeper than :data:`MAX_DEPTH`: a walk one level at a
    time, no recursion to exhaust. The values of a level are filtered to its containers by C loops (map,
    compress): a Python step per value took ~0.5 s per million values, 20 s for a large profiler trace."""
    level = [data] if type(data) in _CONTAINERS else []
    depth = 1
    while level:
        if depth > MAX_DEPTH:
            return True
        values = list(chain.from_iterable(x.values() if type(x) is dict else x for x in level))
        level = list(compress(values, map(_CONTAINERS.__contains__, map(type, values))))
        depth += 1
    return False


GZIP_MAGIC = b"\x1f\x8b"
_GZIP_PIECE = 1 << 20


class GzipTooLarge(CollsimError):
    """gzip data that expands past the reader's limit (a bomb: 1 MB can stand for 1 GB)."""


class GzipDamaged(CollsimError):
    """gzip data zlib cannot read (``truncated``: it ends before its member does)."""

    def __init__(self, reason: str, truncated: bool = False):
        super().__init__(reason)
        self.truncated = truncated


def gunzip(blob: bytes, limit: int, keep: bool = True) -> tuple[int, bytes]:
    """(expanded size, data) of gzip bytes (every member, zero padding between them allowed, as ``gzip``
    reads them; ``data`` only when ``keep``), expanded a megabyte at a time and refused past ``limit``
    (:class:`GzipTooLarge`). Called once with ``keep=False`` before the pass that keeps, a bomb costs a
    megabyte of memory, not ``limit`` (a 1 MB trace gzip once held 512 MiB before its refusal, 1.1 GB peak):
    the profiler-trace and flight-dump readers share this."""
    parts, total, rest = [], 0, blob
    try:
        while rest:
            d = zlib.decompressobj(16 + zlib.MAX_WBITS)
            tail = rest
            while not d.eof:
                piece = d.decompress(tail, _GZIP_PIECE)
                tail = d.unconsumed_tail
                total += len(piece)
                if total > limit:
                    raise GzipTooLarge(f"expands past {limit:,} bytes")
                if keep:
                    parts.append(piece)
                if not piece and not tail:
                    raise GzipDamaged("the gzip data is truncated", truncated=True)
            rest = d.unused_data.lstrip(b"\x00")
    except zlib.error as e:
        raise GzipDamaged(str(e)) from None
    return total, b"".join(parts)


def load_json(text: str, source: str):
    """Parse JSON with bounded nesting; errors name ``source`` and the line."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        if e.pos >= len(text.rstrip()) or e.msg.startswith("Unterminated string"):   # the text ends mid-document
            raise CollsimError(f"{source!r} is not valid JSON: it ends before its JSON does ({e.msg.removesuffix(' at')} at line {e.lineno} "
                               f"column {e.colno}), so it looks truncated: export or copy it again") from None
        raise CollsimError(f"{source!r} is not valid JSON ({e.msg} at line {e.lineno} column {e.colno})") from None
    except RecursionError:  # json recurses per level: 100,000 '[' exhaust the stack
        data = None
    except ValueError:   # an integer past Python's 4,300-digit conversion limit (its message advises a setting)
        raise CollsimError(f"{source!r}: a number of more than 4300 digits: no collsim number needs that: check the "
                           "file") from None
    else:
        if not _too_deep(data):
            return data
    raise CollsimError(f"{source!r}: JSON nested deeper than {MAX_DEPTH} levels: too deeply nested to read safely (no "
                       "file collsim reads nests so deep)")


def check_output(path: str, flag: str) -> None:
    """Refuse ``path`` as an output now, before any work: its folder must exist, it must not be a folder,
    a symbolic link, or a file this command reads."""
    if not path:
        raise CollsimError(f"{flag}: give a file name")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        up = folder
        while up and not os.path.exists(up) and os.path.dirname(up) != up:
            up = os.path.dirname(up)
        if os.path.exists(up) and not os.path.isdir(up):
            raise CollsimError(f"{flag} {path}: {up} is a file, not a folder: write elsewhere")
        raise CollsimError(f"{flag} {path}: the folder {folder} does not exist: create it or write elsewhere")
    if os.path.islink(path):
        raise CollsimError(f"{flag} {path} is a symbolic link: collsim never writes through a link; remove it or "
                           "choose another name")
    if os.path.isdir(path):
        raise CollsimError(f"{flag} {path} is a folder: give a file name")
    if os.path.exists(path) and not os.path.isfile(path):
        raise CollsimError(f"{flag} {path} exists and is not a regular file: choose another name")
    try:
        st = os.stat(path)
    except OSError:
        return
    original = (_inputs or {}).get((st.st_dev, st.st_ino))
    if original is not None:
        raise CollsimError(f"{flag} {path} is an input of this command ({original}): writing there would destroy it; "
                           "choose another output name")


def check_not_input(path: str, flag: str, inputs) -> None:
    """Refuse ``path`` when it is one of ``inputs`` (paths the command will read), before reading them."""
    try:
        st = os.stat(path)
    except OSError:
        return
    for p in inputs:
        try:
            if os.path.samefile(p, path) or os.stat(p) == st:
                raise CollsimError(f"{flag} {path} is also an input of this command ({p}): writing there would destroy "
                                   "it; choose another output name")
        except OSError:
            continue


@contextlib.contextmanager
def output_path(path: str, flag: str = "output"):
    """Yield a temporary path next to ``path`` (same suffix, so writers that go by the extension work);
    when the block ends without an error it is renamed onto ``path``, otherwise removed."""
    check_output(path, flag)
    folder = os.path.dirname(os.path.abspath(path))
    base = os.path.basename(path)
    suffix = os.path.splitext(base)[1]
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{base}.", suffix=f".tmp{suffix}", dir=folder)
    except OSError as e:   # /proc, /sys, a read-only or full disk, no permission
        raise CollsimError(f"cannot write {flag} {path}: {e.strerror or e} in {folder}: choose a folder you can write to") from None
    os.close(fd)
    try:
        try:
            yield tmp
        except OSError as e:   # the writer failed: a full disk (ENOSPC), a quota, an I/O error
            raise CollsimError(f"cannot write {flag} {path}: {e.strerror or e}: free space or write elsewhere") from None
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; an output gets the usual permissions
        check_output(path, flag)  # again: a link or an input may have appeared meanwhile
        try:
            os.replace(tmp, path)  # atomic; replaces a file, never follows a link (check_output refused those)
        except OSError as e:
            raise CollsimError(f"cannot write {flag} {path}: {e.strerror or e}: write elsewhere") from None
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def write_output(path: str, data: "str | bytes", flag: str = "output") -> str:
    """Write ``data`` to ``path`` atomically and safely (see the module docstring); returns ``path``."""
    with output_path(path, flag) as tmp:
        with open(tmp, "wb") as f:
            f.write(data.encode("utf-8") if isinstance(data, str) else data)
            f.flush()
            os.fsync(f.fileno())
    return path
