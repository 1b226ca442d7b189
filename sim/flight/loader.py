"""Read flight-recorder dumps, from PyTorch (pickle or JSON, NCCL or gloo) or from the simulator.

Pickles are read by :class:`PlainUnpickler`, which builds only plain containers and refuses every
``find_class`` (so no import, no call, nothing executed: a hostile pickle gets an error, not a shell),
then every value is checked to be dict/list/tuple/str/int/float/bool/None/bytes.

Dumps are normalised so the analyzer sees one shape whatever wrote them:

- the rank comes from the file name (:func:`rank_of`): ``rank`` and its number (``rank_3``, ``rank3``,
  ``nccl_trace_rank_3``, ``rank3_node7``), else a number after a final ``_`` or ``-`` (``_dump_3``, as
  NVIDIA's resiliency tools write), else a bare number (``3``); then ``.json``, ``.pkl``, ``.pickle`` or ``.bin``,
  and ``.gz`` when compressed (read with a bounded decompressed size). Other files (``train.log.3``) are
  skipped and listed (``DumpSet.skipped``);
- ``pg_config`` ranks (a string ``"[0, 1]"`` in PyTorch) become lists; ``pg_status`` numbers (strings in
  the JSON form) become ints; ``time_discovered_*`` of 0 (the JSON form's "none") become ``None``;
- ``pg_status``, which PyTorch keys by each rank's *local* process-group uid, is re-keyed by the group's
  global name through the rank's own entries (:func:`_status_by_group`); keys that cannot be translated
  are dropped and listed in ``pg_status_unmapped``;
- each entry gets ``pg`` (process-group name), ``seq``, ``op`` (``"gloo:allreduce"`` and
  ``"nccl:all_reduce"`` both become ``"all_reduce"``) and ``completed`` (state ``completed``, or
  ``retired``, or a sequence id at or below ``last_completed_collective``: gloo leaves every entry
  ``scheduled``).

Values are checked, never guessed: ``entries`` that is not a list, a sequence id, ``pg_status`` counter or
tensor dimension that is not a whole number in PyTorch's int64 range (NaN, -5, 10**30), or member ranks that
do not parse make the dump malformed (:func:`load_dir` refuses it: a finding, like an unreadable file). A
clock, ``duration_ms`` or ``timeout_ms`` no recorder writes is left out and named in the entry's
``damaged`` (``DumpSet.damaged`` and ``collsim trace``'s notes say so), so one bad value does not hide the
rest of the rank's record.

>>> d = normalise({"version": "2.10", "pg_config": {"": {"name": "", "desc": "", "ranks": "[0, 1]"}},
...                "pg_status": {"0": {"last_completed_collective": "1"}},
...                "entries": [{"process_group": ["0", "default_pg"], "collective_seq_id": 1,
...                             "profiling_name": "gloo:all_reduce", "state": "scheduled"}]})
>>> d["entries"][0]["op"], d["entries"][0]["completed"], d["pg_config"][""]["ranks"]
('all_reduce', True, [0, 1])
"""
from __future__ import annotations

import io
import json
import os
import pickle
import re
import stat
from dataclasses import dataclass, field

from ..errors import CollsimError
from ..io.printable import short_repr
from ..io.safe_io import GZIP_MAGIC, GzipDamaged, GzipTooLarge, gunzip

MAX_DUMP_BYTES = 256 << 20  # PyTorch's default 2,000-entry buffer dumps ~1-5 MB; 256 MiB is 50x its largest
MAX_DIR_BYTES = 1 << 30     # a folder's dumps together: 1,024 ranks of PyTorch's default buffer at ~1 MB each
MAX_DUMP_NODES = 10_000_000  # values in one dump, shared references counted each time (~20,000 entries with stacks)
# Entries, not bytes, decide the work: a 1.2 KB gzip'd pickle can repeat one entry 150,000 times (pickle memo
# references), and every entry read costs time and memory however it was stored (12 such files took 47 s and
# 1.8 GB). PyTorch's ring buffer (TORCH_NCCL_TRACE_BUFFER_SIZE) keeps 2,000 entries per rank by default: a dump
# may hold 50 times that, and a folder 1,000,000 entries, 500 ranks of full default buffers or 4,000 ranks of
# their last 250 (--last); at that limit, 10 JSON dumps of 100,000 entries take 24 s and 1.2 GB on 2 cores.
# Past it the user says which part to analyze (--last N, or fewer ranks) rather than waiting minutes.
TRACE_BUFFER_DEFAULT = 2_000   # TORCH_NCCL_TRACE_BUFFER_SIZE's default: the entries a rank's dump keeps
MAX_DUMP_ENTRIES = 50 * TRACE_BUFFER_DEFAULT
MAX_DIR_ENTRIES = 1_000_000
_PLAIN = (dict, list, tuple, str, int, float, bool, type(None), bytes)
_OPS = {  # profiling names PyTorch uses (nccl and gloo, old and new) -> one vocabulary
    "allreduce": "all_reduce", "allreduce_coalesced": "all_reduce", "all_reduce_coalesced": "all_reduce",
    "allgather": "all_gather", "_allgather_base": "all_gather", "all_gather_into_tensor": "all_gather",
    "allgather_into_tensor_coalesced": "all_gather", "all_gather_into_tensor_coalesced": "all_gather",
    "allgather_coalesced": "all_gather", "reduce_scatter_tensor": "reduce_scatter",
    "_reduce_scatter_base": "reduce_scatter", "reduce_scatter_tensor_coalesced": "reduce_scatter",
    "reducescatter": "reduce_scatter", "alltoall": "all_to_all", "alltoall_base": "all_to_all",
    "all_to_allv": "all_to_all", "all_to_all_single": "all_to_all", "all_reduce_barrier": "barrier",
}


class RefusedDump(CollsimError):
    """A file that is not a dump we will read (hostile or foreign pickle, bad JSON, not a dump)."""


class _TooLarge(RefusedDump):
    """A gzip file that decompresses past the limit."""


class PlainUnpickler(pickle.Unpickler):
    """Builds dict/list/tuple/str/int/float/bool/None/bytes only; any class or callable is refused."""

    def find_class(self, module, name):
        raise pickle.UnpicklingError(f"it asks to load {module}.{name}; only plain data is allowed")

    def persistent_load(self, pid):
        raise pickle.UnpicklingError("it uses a persistent id; only plain data is allowed")


def _check_plain(root) -> None:
    """Refuse anything but plain data, nesting past 64 levels, cycles, and more than
    :data:`MAX_DUMP_NODES` values *counting shared references each time they are used*: a pickle can
    reference one list from many places, so 249 bytes can stand for 10**9 values (a "billion laughs").
    Each distinct container is visited once (memoised by identity), so the check itself is linear in
    the size of the file, whatever the sharing."""
    expanded: dict[int, int] = {}  # id(container) -> values it stands for, counted with repetitions
    stack = [(root, 0, False)]
    on_path: set[int] = set()
    while stack:
        x, depth, done = stack.pop()
        if not isinstance(x, _PLAIN):
            raise RefusedDump(f"it contains a {type(x).__name__}; only plain data is allowed")
        if not isinstance(x, (dict, list, tuple)):
            continue
        key = id(x)
        children = [v for kv in x.items() for v in kv] if isinstance(x, dict) else x
        if done:
            on_path.discard(key)
            total = 1 + sum(expanded.get(id(c), 1) for c in children)
            if total > MAX_DUMP_NODES:
                raise RefusedDump(f"it expands to more than {MAX_DUMP_NODES:,} values (shared references repeated): "
                                  "not a flight-recorder dump")
            expanded[key] = total
            continue
        if key in expanded:
            continue
        if key in on_path:
            raise RefusedDump("it contains a reference cycle: not a flight-recorder dump")
        if depth > 64:
            raise RefusedDump("nesting deeper than 64 levels: not a flight-recorder dump")
        on_path.add(key)
        stack.append((x, depth, True))
        stack.extend((c, depth + 1, False) for c in children if not (isinstance(c, (dict, list, tuple)) and id(c) in expanded))


def _gunzip(blob: bytes, path: str, keep: bool = True, limit: int = MAX_DUMP_BYTES) -> tuple[int, bytes]:
    """(decompressed size, data) of a dump's gzip bytes (:func:`sim.io.safe_io.gunzip`), refused as a dump
    past ``limit`` or when damaged."""
    try:
        return gunzip(blob, limit, keep)
    except GzipTooLarge:
        raise _TooLarge(f"{path}: it decompresses to more than {limit >> 20} MiB, more than any "
                        "flight-recorder dump; not read") from None
    except GzipDamaged as e:
        raise RefusedDump(f"{path}: the gzip data is truncated: copy the file again" if e.truncated else
                          f"{path}: damaged gzip data ({e}): copy the file again") from None


def dump_size(path: str) -> int:
    """Bytes ``path`` holds once decompressed (gzip data counted without being kept, and counted as
    ``MAX_DUMP_BYTES + 1`` past that limit); for folder totals, before anything is parsed."""
    size = os.path.getsize(path)
    if size > MAX_DUMP_BYTES:
        return size
    with open(path, "rb") as f:
        if f.read(2) != GZIP_MAGIC:
            return size
        f.seek(0)
        blob = f.read()
    try:
        return _gunzip(blob, path, keep=False)[0]
    except _TooLarge:
        return MAX_DUMP_BYTES + 1
    except RefusedDump:   # damaged: read_raw refuses it and says why
        return size


def read_raw(path: str, sized: bool = False) -> dict:
    """The raw dump in ``path`` (JSON if it starts with ``{``, else a plain-data pickle; either gzip'd).
    ``sized``: the caller has already counted its decompressed size within the limit (:func:`load_dir`'s
    folder total), so gzip data is expanded once, still refused past the limit while kept."""
    try:
        size = os.path.getsize(path)
        if size > MAX_DUMP_BYTES:
            raise RefusedDump(f"{path}: {size} bytes is larger than any flight-recorder dump; not read")
        with open(path, "rb") as f:
            blob = f.read()
    except OSError as e:
        raise RefusedDump(f"{path}: cannot read it ({e.strerror})") from None
    if blob[:2] == GZIP_MAGIC:
        if not sized:
            _gunzip(blob, path, keep=False)   # sized first, keeping nothing: a bomb is refused in constant memory
        blob = _gunzip(blob, path)[1]
    if blob.lstrip()[:1] == b"{":
        try:
            data = json.loads(blob)
        except (ValueError, UnicodeDecodeError) as e:
            raise RefusedDump(f"{path}: not valid JSON ({e}): a truncated or damaged dump; copy the file again") from None
        except RecursionError:  # json recurses per nesting level; a hostile file can exhaust the stack
            raise RefusedDump(f"{path}: JSON nested too deeply: not a flight-recorder dump") from None
    else:
        try:
            data = PlainUnpickler(io.BytesIO(blob)).load()
        except Exception as e:  # any malformed pickle: report it, never let it run
            if _PICKLE_HEADER.match(blob) or "only plain data" in str(e):   # a pickle: what is wrong with it
                raise RefusedDump(f"{path}: pickle refused: {e}" + (
                    "" if "only plain data" in str(e) else ": a truncated or damaged dump; copy the file again")) from None
            # not a pickle at all: the unpickler's words ("invalid load key, '['") would not say so
            raise RefusedDump(f"{path}: not a flight-recorder dump: {_looks_like(blob)}; a dump is a pickle or a "
                              f"JSON object: move this file out of the folder") from None
        try:
            _check_plain(data)
        except RefusedDump as e:
            raise RefusedDump(f"{path}: pickle refused: {e}") from None
    if not isinstance(data, dict) or not ({"entries", "pg_status"} & set(data)):
        what = "a mapping with neither" if isinstance(data, dict) else f"a {type(data).__name__}, not a mapping with"
        raise RefusedDump(f"{path}: not a flight-recorder dump: it holds {what} 'entries' or 'pg_status'; "
                          "move this file out of the folder")
    return data


_PICKLE_HEADER = re.compile(rb"\x80[\x02-\x05]", re.S)   # PROTO: how protocol 2+ pickles start (PyTorch writes 2)


def _looks_like(blob: bytes) -> str:
    """What a file that is neither a JSON object nor a pickle is, for its refusal (no contents printed raw)."""
    text = blob.strip()
    if not text:
        return "it is empty" if not blob else "it holds only white space"
    if text[:1] == b"[":
        return "it is JSON or text starting with '[', not a JSON object"
    line = text[:2000].decode("utf-8", "replace").splitlines()[0]
    if line.isprintable() and "\ufffd" not in line:   # no control bytes, no invalid UTF-8
        return f"it is text (it starts {short_repr(line[:60], 64)}; a log?)"
    return f"it is binary data (it starts with bytes {blob[:8].hex(' ')}), neither JSON nor a pickle"


def _int(x, default=None):
    try:
        return int(x)
    except (TypeError, ValueError):
        return default


MAX_INT64 = 2**63 - 1            # PyTorch keeps sequence ids, sizes and nanosecond clocks in int64
MAX_DURATION_MS = 86_400_000.0   # a day, as sim.evidence.job.MAX_EVENT_US: no collective takes longer
_DIGITS = re.compile(r"\s*-?\d{1,19}\s*")


def _whole(v, what: str, low: int = 0) -> int:
    """``v`` as PyTorch writes a counter or a size (an int; in the JSON form maybe a string of digits), at
    least ``low``; anything else (NaN, -5, 1.5, 10**30, "abc") makes the dump malformed: ValueError naming
    ``what``. Read as 0 or "none", such a value would move a rank's calls or silence a finding."""
    if isinstance(v, str) and _DIGITS.fullmatch(v):
        v = int(v)
    if isinstance(v, int) and not isinstance(v, bool) and low <= v <= MAX_INT64:
        return v
    raise ValueError(f"{what} is {short_repr(v)}, not a whole number from {low} to 2**63-1 as PyTorch writes it")


def _shapes(v, what: str) -> list:
    """``input_sizes``/``output_sizes``: a list of tensor shapes (lists of whole dimensions), else ValueError."""
    if v is None:
        return []
    if type(v) is list and all(type(s) is list and all(type(d) is int and 0 <= d <= MAX_INT64 for d in s) for s in v):
        return v   # as PyTorch writes it (most entries): nothing to convert
    if not isinstance(v, (list, tuple)) or not all(isinstance(s, (list, tuple)) for s in v):
        raise ValueError(f"{what} is {short_repr(v)}, not a list of tensor shapes like [[1024, 16]]")
    return [[_whole(d, f"{what} dimension") for d in s] for s in v]


def _clock(v, key: str, damaged: dict) -> int | None:
    """A nanosecond clock: None where unrecorded (None, or 0 in the JSON form); a value no recorder writes
    (NaN, negative, past int64, not a number) is not used and is named in ``damaged``: one bad clock should
    not hide what the rest of the dump shows, but it is never dropped silently."""
    if v is None or (v == 0 and not isinstance(v, bool)):
        return None
    if isinstance(v, str) and _DIGITS.fullmatch(v):
        v = int(v)
    if isinstance(v, int) and not isinstance(v, bool) and 0 < v <= MAX_INT64:
        return v
    damaged[key] = short_repr(v)
    return None


def _duration_ms(v, damaged: dict):
    """``duration_ms`` (TORCH_NCCL_ENABLE_TIMING=1): 0 to a day, else not used and named in ``damaged``."""
    if v is None:
        return None
    if isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v <= MAX_DURATION_MS:  # NaN fails both
        return v
    damaged["duration_ms"] = short_repr(v)
    return None


def _ranks(text, cache: dict | None = None) -> list[int]:
    """A group's member list. Every rank's dump repeats the default group's list (``"[0, 1, ...,
    N-1]"``), so identical lists are parsed once and shared through ``cache``: N dumps then hold one
    list, not N (memory linear in the number of dumps, not quadratic)."""
    key = text if isinstance(text, str) else tuple(text) if isinstance(text, (list, tuple)) else None
    if cache is not None and key in cache:
        return cache[key]
    if isinstance(text, (list, tuple)):   # a non-number here makes the dump malformed (load_dir refuses it)
        if not all(isinstance(r, int) and not isinstance(r, bool) for r in text):
            raise ValueError(f"pg_config ranks {short_repr(text)} is not a list of ranks like [0, 1, 2]")
        out = list(text)
    else:
        try:
            out = [int(r) for r in (json.loads(text) if text else [])]
        except (ValueError, TypeError):   # "[0, 1" or "abc": read as "no members", the group would lose its ranks
            raise ValueError(f"pg_config ranks {short_repr(text)} is not a list of ranks like \"[0, 1, 2]\"") from None
    if any(r < 0 for r in out):
        raise ValueError(f"pg_config ranks {short_repr(text)} holds a negative rank")
    if cache is not None and key is not None:
        cache[key] = out
    return out


def op_name(profiling_name: str) -> str:
    """``"nccl:all_reduce"`` -> ``"all_reduce"``; ``"gloo:allreduce"`` -> ``"all_reduce"``."""
    base = str(profiling_name or "").split(":", 1)[-1]
    return _OPS.get(base, base)


def _entry_group(e: dict) -> str:
    """The global name of an entry's process group (``process_group[0]``; ``pg_id`` where it has none). PyTorch
    writes ``(name, description)``, two strings (a list in the JSON form); anything else is ValueError: the
    string of ``[[1], "x"]`` made up a group "[1]" that only this rank was in."""
    pg = e.get("process_group")
    if pg is None:
        return str(e.get("pg_id", "0"))
    if (isinstance(pg, (list, tuple)) and 1 <= len(pg) <= 2
            and all(isinstance(x, str) or (isinstance(x, int) and not isinstance(x, bool)) for x in pg)):
        return str(pg[0])
    raise ValueError(f"process_group is {short_repr(pg, 40)}, not [name, description] (two strings) as PyTorch writes it")


def _status_by_group(raw: dict, config: dict) -> tuple[dict, list]:
    """``pg_status`` keyed by global process-group name, and the keys that could not be mapped.

    PyTorch keys ``pg_status`` by the process group's *local* uid (``ProcessGroupNCCL::uid_``, a per-process
    counter: ``std::to_string(pg_id)`` in ``FlightRecorder::getPgStatus``), the number each entry carries as
    ``pg_id``, while ``pg_config`` and the entries' ``process_group`` use the group's global name. Rank 0's
    uid 11 and rank 12's uid 11 are different groups, so a key is translated through the rank's own entries
    (``pg_id`` -> ``process_group[0]``). A uid no entry names is kept as a name only where the dump shows that
    uids are names (no entry says otherwise and every key names a group of ``pg_config``, as the simulator
    writes; gloo's unnamed config counts as the default group "0"); otherwise it is dropped: comparing it
    with another rank's number would compare two unrelated counters.

    The counters also count point-to-point calls (a group's last call decides which sequence its
    ``last_*`` numbers follow), so a group whose latest entry on this rank is a send/recv has its status
    dropped too: those numbers are ``p2p_seq_id``s, not ``collective_seq_id``s."""
    # the last_* counters decide who is behind: one that is not a counter (NaN, -5) makes the dump malformed;
    # -1 is PyTorch's "none yet"
    status = {str(k): {kk: _whole(vv, f"pg_status {str(k)!r} {kk}", low=-1) if str(kk).startswith("last_")
                       else _int(vv, -1) for kk, vv in v.items()}
              for k, v in _mapping(raw, "pg_status", "{last_enqueued_collective, ...}").items()}
    uid_name: dict[str, str | None] = {}  # None: entries disagree on the name (then the uid is unusable)
    last_p2p: dict[str, bool] = {}        # uid -> its latest entry (record order) is point-to-point
    identity = True
    entries = raw.get("entries")
    for e in entries if isinstance(entries, (list, tuple)) else ():
        if not isinstance(e, dict) or e.get("pg_id") is None:
            continue
        uid, name = str(_int(e.get("pg_id"), e.get("pg_id"))), _entry_group(e)
        uid_name[uid] = name if uid_name.get(uid, name) == name else None
        last_p2p[uid] = bool(e.get("is_p2p", False))
        identity = identity and uid == name
    names = {c["name"] or "0" for c in config.values()} | {k or "0" for k in config}
    identity = identity and set(status) <= names
    out, unmapped = {}, []
    for uid, st in status.items():
        name = uid_name.get(uid, uid if identity else None)
        if name is None or last_p2p.get(uid):
            unmapped.append(uid)
        else:
            out[name] = st
    return out, sorted(unmapped, key=lambda k: (len(k), k))


def normalise(raw: dict, ranks_cache: dict | None = None, values: dict | None = None) -> dict:
    """The canonical shape the analyzer reads (see the module docstring); ``ranks_cache`` shares equal
    member lists between dumps (see :func:`_ranks`), ``values`` equal names and shapes (:func:`_shared`). A field of the wrong shape raises ValueError or TypeError
    naming it (:func:`load_dir` refuses the dump): skipped or read as "none", it would move the rank's calls."""
    config = {str(k): {"name": str(v.get("name", k)), "desc": str(v.get("desc", "")),
                       "ranks": _ranks(v.get("ranks"), ranks_cache)}
              for k, v in _mapping(raw, "pg_config", "{name, desc, ranks}").items()}
    raw_entries = raw.get("entries")
    if raw_entries is None:
        raw_entries = []
    if not isinstance(raw_entries, (list, tuple)):   # a string would iterate as characters: a rank with no calls
        raise TypeError(f"'entries' is a {type(raw_entries).__name__}, not a list of entries")
    status, unmapped = _status_by_group(raw, config)
    entries = []
    values = {} if values is None else values
    for i, e in enumerate(raw_entries):
        try:
            entries.append(_entry(e, status, values))
        except (ValueError, TypeError) as x:   # the entry is named only here: most dumps have none to name
            record = f" (record {short_repr(e.get('record_id'))})" if isinstance(e, dict) else ""
            raise type(x)(f"entry #{i}{record}: {x}") from None
    _check_seqs(entries, status)
    backend = next((e["profiling_name"].split(":")[0] for e in entries if ":" in e["profiling_name"]), "")
    version = raw.get("nccl_version")   # PyTorch records NCCL's release beside the dump's own version
    return {"version": str(raw.get("version", "")), "backend": backend, "pg_config": config,
            "pg_status": status, "pg_status_unmapped": unmapped, "entries": entries,
            "nccl_version": version.strip()[:32] if isinstance(version, str) and version.strip() else None}


def _mapping(raw: dict, key: str, shape: str) -> dict:
    """``raw[key]`` ({} where absent), a mapping whose every value is a mapping of the given ``shape``: a value
    of another kind (``{"0": [1, 2]}``, ``{"0": "x"}``) was skipped, and its group silently lost its members or
    its counters."""
    value = raw.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise TypeError(f"{key} is a {type(value).__name__}, not a mapping of process groups to {shape}")
    for k, v in value.items():
        if not isinstance(v, dict):
            raise TypeError(f"{key} {short_repr(k)} is {short_repr(v)}, not a mapping {shape} as PyTorch writes it")
    return value


def _shared(values: dict, v):
    """``v`` (a string, or a list of shapes or of dtype names), or the equal value already kept: the entries of a
    folder repeat a few names and shapes, and keeping each file's own copies (pieces of the parsed file the
    rest of which is freed) made a million entries take 2 GB instead of 1."""
    if isinstance(v, str):
        return values.setdefault(v, v)
    if type(v) is list and all(type(x) in (list, str) for x in v):   # as _shapes returns them, or dtype names
        key = tuple(tuple(x) if type(x) is list else x for x in v)
        if all(type(x) is str or all(type(d) is int for d in x) for x in key):
            return values.setdefault(key, v)
    return v


def _entry(e, status: dict, values: dict) -> dict:
    """One raw entry in the analyzer's shape (:func:`normalise`); ``values``: see :func:`_shared`."""
    if not isinstance(e, dict):
        raise TypeError(f"a {type(e).__name__}, not a mapping")
    pg = e.get("process_group")
    name = _shared(values, _entry_group(e))
    desc = _shared(values, str(pg[1])) if isinstance(pg, (list, tuple)) and len(pg) > 1 else ""
    seq = 0 if e.get("collective_seq_id") is None else _whole(e["collective_seq_id"], "collective_seq_id")
    state = _shared(values, str(e.get("state", "")))
    last_done = status.get(name, {}).get("last_completed_collective", -1)
    damaged: dict = {}   # field -> the value no recorder writes (not used; load_dir and the trace notes name it)
    if e.get("timeout_ms") is not None:   # not used here, but a negative watchdog says the record is damaged
        try:
            _whole(e["timeout_ms"], "timeout_ms")
        except ValueError:
            damaged["timeout_ms"] = short_repr(e["timeout_ms"])
    return {
        "pg": name, "pg_desc": desc, "seq": seq, "is_p2p": bool(e.get("is_p2p", False)),
        "profiling_name": _shared(values, str(e.get("profiling_name", ""))),
        "op": _shared(values, op_name(e.get("profiling_name"))),
        "input_sizes": _shared(values, _shapes(e.get("input_sizes"), "input_sizes")),
        "output_sizes": _shared(values, _shapes(e.get("output_sizes"), "output_sizes")),
        "input_dtypes": _shared(values, e.get("input_dtypes") or []),
        "output_dtypes": _shared(values, e.get("output_dtypes") or []),
        "state": state, "retired": bool(e.get("retired", False)),
        "completed": state == "completed" or bool(e.get("retired")) or (0 < seq <= last_done and not e.get("is_p2p")),
        "created_ns": _clock(e.get("time_created_ns"), "time_created_ns", damaged),
        "started_ns": _clock(e.get("time_discovered_started_ns"), "time_discovered_started_ns", damaged),
        "completed_ns": _clock(e.get("time_discovered_completed_ns"), "time_discovered_completed_ns", damaged),
        "duration_ms": _duration_ms(e.get("duration_ms"), damaged), "record_id": _int(e.get("record_id")),
        "damaged": damaged or _UNDAMAGED,
    }


_UNDAMAGED: dict = {}   # shared by the entries with nothing damaged (read only): one empty dict each took 64 bytes


def _check_seqs(entries: list, status: dict) -> None:
    """A rank's collective sequence ids as PyTorch numbers them, else ValueError: per process group they grow
    in record order (the ring buffer keeps the newest entries, oldest first), never past the rank's own
    ``pg_status`` ``last_enqueued_collective`` + 1 (an entry is recorded just before its call is enqueued, so a
    dump taken in between shows one more), and one id is shared only by a coalesced batch, whose last entry is
    the ``...coalesced`` one (``nccl:coalesced``; PyTorch's own ``fr_trace`` reads such a run as one call). The
    analyzer matches ranks by these ids: a shifted rank would drop out of every comparison, and a repeated id
    would keep one call of several."""
    runs: dict = {}   # group -> [seq, index of the run's first entry, index of its last]

    def close(name: str, run: list) -> None:
        if run[1] != run[2] and not entries[run[2]]["profiling_name"].endswith("coalesced"):
            raise ValueError(f"entries #{run[1]} to #{run[2]} of process group {name!r} share collective_seq_id {run[0]} "
                             "and do not end in a coalesced entry: PyTorch gives each collective its own id (only a "
                             "coalesced batch, ending in 'nccl:coalesced', shares one)")

    for i, e in enumerate(entries):
        if e["is_p2p"] or not e["seq"]:   # point-to-point calls keep the last collective's id; 0: not numbered
            continue
        name, seq = e["pg"], e["seq"]
        run = runs.get(name)
        if run is not None and seq < run[0]:
            raise ValueError(f"entry #{i}: collective_seq_id {seq} of process group {name!r} comes after {run[0]} "
                             f"(entry #{run[2]}): a group's ids only grow in record order")
        last = status.get(name, {}).get("last_enqueued_collective")
        if last is not None and last >= 0 and seq > last + 1:
            raise ValueError(f"entry #{i}: collective_seq_id {seq} of process group {name!r} is past this rank's own "
                             f"pg_status last_enqueued_collective {last}")
        if run is not None and seq == run[0]:
            run[2] = i
        else:
            if run is not None:
                close(name, run)
            runs[name] = [seq, i, i]
    for name, run in runs.items():
        close(name, run)


@dataclass(frozen=True)
class DumpSet:
    """Normalised dumps by rank, plus files that were refused (path -> reason) or skipped (names in the folder
    not read: not named like a dump, subfolders, hidden files)."""
    dumps: dict
    refused: dict = field(default_factory=dict)
    refused_why: dict = field(default_factory=dict)  # rank -> why its file was refused (the first, if several)
    skipped: tuple = ()
    other_job: dict = field(default_factory=dict)   # path -> why it belongs to another job (left out)
    damaged: dict = field(default_factory=dict)     # path -> which entries hold values no recorder writes (not used)

    @property
    def refused_ranks(self) -> tuple:
        """The ranks whose dump file was refused, in order."""
        return tuple(sorted(self.refused_why))


_EXTENSIONS = (".json", ".pkl", ".pickle", ".bin")
# The names dumps are given (see the module docstring), in order of preference. "rank" and its number win
# over any other number (rank0_node7 is rank 0); without it, only a number after a final "_" or "-" (a
# TORCH_NCCL_DEBUG_INFO_TEMP_FILE prefix such as "/dumps/_dump_") or a bare number. A "." never precedes the
# number: the last number of any name made train.log.3 a second dump of rank 3.
_RANK_NAMES = (re.compile(r"[A-Za-z0-9_-]*?rank[_-]?([0-9]+)(?:[_-][A-Za-z0-9_-]*)?", re.I),
               re.compile(r"[A-Za-z0-9_-]*[_-]([0-9]+)"),
               re.compile(r"([0-9]+)"))
NAMING = "rank_0, rank0.json, rank_0.pkl, nccl_trace_rank_0, _dump_0, each optionally .gz"


def rank_of(filename: str) -> int | None:
    """The rank a dump file is for, from its name (``rank_3.json``, ``nccl_trace_rank_3``, ``_dump_3``,
    ``rank3_node7.pkl``), or None when the name is not a dump's. Compressed names (``.gz``) are
    :func:`dump_rank`'s.

    >>> [rank_of(n) for n in ("rank_3.json", "rank0_node7.json", "_dump_12", "train.log.3", "rank_3.gz")]
    [3, 0, 12, None, None]
    """
    stem = os.path.basename(filename)
    for ext in _EXTENSIONS:
        if stem.lower().endswith(ext):
            stem = stem[: -len(ext)]
            break
    for pattern in _RANK_NAMES:
        m = pattern.fullmatch(stem)
        if m:
            return int(m.group(1))
    return None


def dump_rank(filename: str) -> int | None:
    """:func:`rank_of`, for compressed dumps too (``_dump_3.gz``, ``rank_3.json.gz``)."""
    name = os.path.basename(filename)
    return rank_of(name[:-3] if name.lower().endswith(".gz") else name)


def not_regular(path: str) -> str | None:
    """What ``path`` is when it is neither a regular file nor a folder (a FIFO, a link to ``/dev/zero``, a link
    to nothing), else None. Only its status is read: opening a FIFO would wait for a writer forever, and a
    device would be read without end."""
    try:
        mode = os.stat(path).st_mode   # follows links: what reading it would read
    except OSError:
        return "a symbolic link to nothing" if os.path.islink(path) else None
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    kind = ("a FIFO (named pipe)" if stat.S_ISFIFO(mode) else "a character device" if stat.S_ISCHR(mode)
            else "a block device" if stat.S_ISBLK(mode) else "a socket" if stat.S_ISSOCK(mode) else "a special file")
    return f"a symbolic link to {kind}" if os.path.islink(path) else kind


def _dump_names(directory: str) -> tuple[dict, list, dict]:
    """({rank: file name}, skipped names, {name: what it is}) of a folder: one dump per rank; names like a
    dump's that are not regular files (a FIFO, a link to a device), for :func:`load_dir` to refuse saying what
    they are; every other entry (folders, hidden files, other names) skipped. Two names for one rank are
    refused, naming both (which to keep is the user's call)."""
    try:
        names = sorted(os.listdir(directory))
    except OSError as e:
        raise CollsimError(f"cannot list {directory!r} ({e.strerror}): give a readable folder") from None
    by_rank: dict[int, str] = {}
    skipped = []
    special = {}
    for name in names:
        rank = dump_rank(name)
        path = os.path.join(directory, name)
        if not name.startswith(".") and rank is not None and (what := not_regular(path)):
            special[name] = what
        elif name.startswith(".") or rank is None or not os.path.isfile(path):
            skipped.append(name)
        elif rank in by_rank:
            raise CollsimError(f"two dumps for rank {rank} in {directory!r}: {by_rank[rank]} and {name}: keep one "
                               "file per rank (move the other out of the folder)")
        else:
            by_rank[rank] = name
    return by_rank, skipped, special


def _check_total_size(directory: str, names) -> set[str]:
    """Refuse, before reading any, a folder whose dumps total more than :data:`MAX_DIR_BYTES` (decompressed):
    each file is bounded (:data:`MAX_DUMP_BYTES`), and a folder of them must be too (four 134 MB dumps took
    52 s and 2.6 GB). Returns the names of gzip files that decompress past :data:`MAX_DUMP_BYTES` (bombs),
    so that they are refused without being expanded a second time."""
    total, bombs = 0, set()
    for name in names:
        path = os.path.join(directory, name)
        try:
            size = dump_size(path)
            if size > MAX_DUMP_BYTES >= os.path.getsize(path):
                bombs.add(name)
        except OSError:
            continue   # read_raw refuses it and says why
        total += min(size, MAX_DUMP_BYTES + 1)   # a file over the limit is refused, not read
        if total > MAX_DIR_BYTES:
            raise CollsimError(f"the dumps in {directory!r} total over {MAX_DIR_BYTES >> 30} GiB (decompressed), more "
                               "than collsim reads per folder (PyTorch's default 2,000-entry buffer writes 1-5 MB per "
                               "rank): copy the ranks of interest to a folder of their own, or record with a smaller "
                               "TORCH_NCCL_TRACE_BUFFER_SIZE")
    return bombs


MAX_SUBFOLDERS = 256   # subfolders looked into to name those that hold dumps or traces (a hint, bounded work)
NAMES_LOOKED = 64      # ... and names looked at in each


def subfolders_holding(directory: str, wanted=lambda name: dump_rank(name) is not None) -> list[str]:
    """The names of the subfolders of ``directory`` holding a file whose name ``wanted`` accepts (default: named
    like a rank's dump): a parent of several jobs' folders. The first :data:`MAX_SUBFOLDERS` subfolders, the
    first :data:`NAMES_LOOKED` names of each: bounded work on any tree."""
    try:
        subs = sorted(e.name for e in os.scandir(directory) if e.is_dir() and not e.name.startswith("."))
    except OSError:
        return []
    out = []
    for sub in subs[:MAX_SUBFOLDERS]:
        try:
            with os.scandir(os.path.join(directory, sub)) as it:
                if any(wanted(e.name) for _, e in zip(range(NAMES_LOOKED), it)):
                    out.append(sub)
        except OSError:
            continue
    return out


def shown_items(items, shown: int = 8) -> str:
    """Text pieces (file names, findings) for one line: the first ``shown``, then how many more."""
    items = list(items)
    return ", ".join(items[:shown]) + (f", ... ({len(items) - shown:,} more)" if len(items) > shown else "")


def load_dir(directory: str, last: int | None = None) -> DumpSet:
    """Every rank's dump in ``directory`` (one file per rank, named as :func:`rank_of` reads). ``last``: read
    only each dump's last ``last`` entries (what a ring buffer of that size would have kept; ``pg_status`` is
    kept whole). At most :data:`MAX_DUMP_ENTRIES` entries a dump (else it is refused) and
    :data:`MAX_DIR_ENTRIES` a folder (else CollsimError), counted before any is normalised."""
    if not os.path.isdir(directory):
        raise CollsimError(f"{directory!r} is not a directory: give the directory holding rank_0, rank_1, ... dumps")
    dumps, refused, refused_why, ranks_cache, paths, values = {}, {}, {}, {}, {}, {}
    by_rank, skipped, special = _dump_names(directory)
    for name, what in special.items():
        path = os.path.join(directory, name)
        refused[path] = (f"{path}: it is {what}, not a regular file: not read (copy the dump itself into the folder, "
                         "or move this out of it)")
        if dump_rank(name) not in by_rank:
            refused_why.setdefault(dump_rank(name), refused[path])
    bombs = _check_total_size(directory, by_rank.values())
    total = 0
    for done, (rank, name) in enumerate(sorted(by_rank.items()), 1):
        path = os.path.join(directory, name)
        try:
            if name in bombs:   # known from the size pass: not expanded a second time
                raise RefusedDump(f"{path}: it decompresses to more than {MAX_DUMP_BYTES >> 20} MiB, more than any "
                                  "flight-recorder dump; not read")
            raw = read_raw(path, sized=True)   # _check_total_size counted it: expanded once more, not twice
            total += _count_entries(raw, path, last)
            if total > MAX_DIR_ENTRIES:
                cut = MAX_DIR_ENTRIES // len(by_rank)
                raise CollsimError(
                    f"the dumps in {directory!r} hold over {MAX_DIR_ENTRIES:,} entries together (the first {done:,} "
                    f"of {len(by_rank):,} files), more than collsim analyzes per folder (PyTorch's default buffer "
                    f"keeps {TRACE_BUFFER_DEFAULT:,} per rank): " + (f"analyze each rank's last {cut:,} with --last {cut}, or " if cut else "")
                    + "copy the ranks of interest to a folder of their own")
            try:
                dumps[rank] = normalise(raw, ranks_cache, values)
                paths[rank] = path
            except RefusedDump:
                raise
            except (TypeError, ValueError) as e:
                # a field of the wrong shape (entries: 5, pg_config: [1], ranks: [0, "a"]), named by our checks:
                # refuse the file like any other non-dump, so one bad rank does not hide the others' findings
                raise RefusedDump(f"{path}: malformed dump: {e} (its rank is read as unknown; if the file was "
                                  "damaged on the way, copy it again)") from None
            except (AttributeError, KeyError, RecursionError) as e:   # a shape no check names
                raise RefusedDump(f"{path}: malformed dump ({type(e).__name__}: {e})") from None
        except RefusedDump as e:
            refused[path] = str(e)
            refused_why[rank] = str(e)
    if not dumps:
        reasons = list(refused.values())   # every file refused: the first few reasons, then how many more
        why = "; ".join(reasons[:3]) + (f"; ... {len(reasons) - 3:,} more refused" if len(reasons) > 3 else "")
        if not by_rank and not special:
            why = f"no file named like a rank's dump ({NAMING})"
            inner = subfolders_holding(directory)
            if inner:
                why += f"; its subfolder(s) {shown_items(inner)} hold dumps: give one of them"
            elif skipped:
                why += f"; skipped: {shown_items(skipped)}"
        raise CollsimError(f"no readable flight-recorder dump in {directory!r} ({why})")
    dumps, other = split_jobs(dumps, paths)
    check_one_job(dumps, directory)
    damaged = {paths[r]: why for r in sorted(dumps) if (why := damage_note(dumps[r]))}
    return DumpSet(dumps, refused, refused_why, tuple(skipped), other, damaged)


def _count_entries(raw: dict, path: str, last: int | None) -> int:
    """How many entries of ``raw`` will be read (cut to the last ``last`` in place), at most
    :data:`MAX_DUMP_ENTRIES` (else RefusedDump): counted before any is normalised, since their number, not the
    file's size, decides the work."""
    entries = raw.get("entries")
    if not isinstance(entries, (list, tuple)):
        return 0   # normalise refuses it, naming the field
    if last is not None and len(entries) > last:
        raw["entries"] = entries = entries[len(entries) - last:]
    if len(entries) > MAX_DUMP_ENTRIES:
        times = MAX_DUMP_ENTRIES // TRACE_BUFFER_DEFAULT
        raise RefusedDump(f"{path}: {len(entries):,} entries, more than {MAX_DUMP_ENTRIES:,} ({times} times PyTorch's default "
                          f"buffer of {TRACE_BUFFER_DEFAULT:,}) that collsim reads from one dump: analyze the last ones with "
                          f"--last {MAX_DUMP_ENTRIES}")
    return len(entries)


def damage_note(dump: dict) -> str:
    """How many of a normalised dump's entries hold values no recorder writes, and the first ("" if none)."""
    bad = [e for e in dump["entries"] if e["damaged"]]
    if not bad:
        return ""
    first = ", ".join(f"{k} {v}" for k, v in bad[0]["damaged"].items())
    return (f"{len(bad)} entr{'y holds' if len(bad) == 1 else 'ies hold'} values no recorder writes (first: record "
            f"{bad[0]['record_id']}: {first}): those values are not used")


def _job_of(d: dict):
    """What identifies a dump's job: the recorder version and its default group's members (None: unknown)."""
    for name, cfg in d["pg_config"].items():
        if (cfg.get("desc") == "default_pg" or name == "0") and cfg.get("ranks"):
            return d.get("version"), tuple(cfg["ranks"])
    return None


def split_jobs(dumps: dict, paths: dict) -> tuple[dict, dict]:
    """Keep the dumps of one job and name the others: where dumps disagree on their default group (or
    version), and one job's members hold none of the other dumps' ranks, that job (the newest such) is this
    one and the rest, stale dumps of another job, are returned as ``{path: why}`` and left out; where the
    ranks overlap nothing is left out (:func:`check_one_job` then refuses the mix)."""
    jobs: dict = {}
    for rank, d in dumps.items():
        jobs.setdefault(_job_of(d), []).append(rank)
    known = [j for j in jobs if j is not None]
    if len(known) <= 1:
        return dumps, {}

    def newest(job):
        times = []
        for r in jobs[job]:
            try:
                times.append(os.stat(paths[r]).st_mtime)
            except (OSError, KeyError):
                pass
        return max(times, default=0.0), len(jobs[job])
    # "this job" can only be one whose members do not include the other jobs' dump ranks (an older, larger
    # job's rank_6 left beside a 4-rank job's rank_0..3); otherwise which dump is whose is not known: refuse
    fits = [j for j in known if all(r not in j[1] for o in known if o != j for r in jobs[o])]
    if not fits:
        return dumps, {}    # check_one_job names the disagreement
    mine = max(fits, key=newest)
    keep = {r: d for r, d in dumps.items() if _job_of(d) in (mine, None)}
    other = {}
    for job in known:
        if job == mine:
            continue
        for r in sorted(jobs[job]):
            other[paths.get(r, f"rank {r}")] = (f"rank {r}'s dump is of another job (its default group has {len(job[1])} ranks, "
                                                f"this job's {len(mine[1])}): left out")
    return keep, other


def check_one_job(dumps: dict, directory: str = "") -> None:
    """Refuse dumps that cannot come from one job: a process group whose member list differs between
    ranks, a rank outside its own default group, or different recorder versions. Matching records of
    two jobs by sequence id would blame ranks for another job's calls."""
    fix = f"keep one job's dumps per directory{f' ({directory})' if directory else ''}"
    versions = {d["version"] for d in dumps.values() if d.get("version")}
    if len(versions) > 1:
        raise CollsimError(f"the dumps were written by different flight-recorder versions ({', '.join(sorted(versions))}): "
                           f"they come from different jobs; {fix}")
    seen: dict[str, tuple[int, list]] = {}
    for rank, d in sorted(dumps.items()):
        for name, cfg in d["pg_config"].items():
            members = cfg["ranks"]
            if not members:
                continue
            if name in seen and seen[name][1] is not members and seen[name][1] != members:  # shared: O(1)
                other, theirs = seen[name]
                raise CollsimError(f"rank {other}'s dump says process group {name!r} has ranks {theirs[:16]}, rank {rank}'s "
                                   f"says {members[:16]}: the dumps come from different jobs; {fix}")
            seen.setdefault(name, (rank, members))
            if (cfg["desc"] == "default_pg" or name == "0") and rank not in members:
                raise CollsimError(f"the dump of rank {rank} lists its default group as ranks {members[:16]}, which do not "
                                   f"include {rank}: a dump of another job (or a renamed file); {fix}")
