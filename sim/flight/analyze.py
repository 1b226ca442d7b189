"""Find the rank(s) at fault from every rank's flight-recorder dump (real or simulated).

Records are matched across ranks by process group and ``collective_seq_id``. At each sequence id the
members' entries are compared; the first thing that differs is a *finding*:

============================  =========================================================================
``collective_type_mismatch``  members called different collectives; culprits: the minority
``size_mismatch``             same collective, different tensor shapes; culprits: the minority
``dtype_mismatch``            same collective and shapes, different dtypes; culprits: the minority
``missing_rank``              some members never reached this sequence id (their last enqueued id is
                              lower), or sent no dump while the others wait here (ranked after the
                              findings records support: a lost file looks the same); culprits: those ranks
``extra_collective``          the few members that did reach it, when most never did
``stuck_collective``          every member joined, it matches, none completed: no desync, so the
                              transport (a link, a NIC) among them is suspect; culprits: the members
                              (none when the group is the whole job: the records cannot narrow it)
``straggler``                 nothing wrong, but a rank enqueued a collective much later (default
                              10 ms) than the median member: the others waited for it
``slow_link``                 nothing wrong, but a group takes ``slow_factor`` times longer than other
                              groups running the same collective: a link among its members is slow
============================  =========================================================================

*Minority rule*: with ranks 0 and 1 calling ``all_reduce`` at seq 3 and rank 2 calling ``barrier``,
rank 2 is the one out of line. When rank 2 skipped a collective, its later calls line up with the
others' one sequence id late: identical calls match until the end, where ranks 0 and 1 wait at a
sequence id rank 2 never reaches, so rank 2 (behind, the minority) is named ``missing_rank``; if its
calls differ, a mismatch names it, and a shifted comparison (its calls from seq ``s`` equal the
others' from ``s+k``) turns that into ``missing_rank`` at ``s``. A tie (2-rank group) names both sides
and says so. A rank absent from one group because it is blocked in another group's collective is not
the cause: that finding is *secondary* and the analyzer follows it to the group where it is blocked.

>>> dumps = {r: {"pg_config": {"0": {"ranks": [0, 1, 2], "desc": "default_pg"}},
...              "pg_status": {"0": {"last_enqueued_collective": 2 if r < 2 else 1}},
...              "entries": [{"pg": "0", "pg_desc": "default_pg", "seq": s, "op": "all_reduce",
...                           "input_sizes": [[4]], "output_sizes": [[4]], "input_dtypes": ["Float"],
...                           "output_dtypes": ["Float"], "completed": s == 1, "created_ns": None,
...                           "started_ns": None, "completed_ns": None, "is_p2p": False}
...                          for s in (1, 2) if s == 1 or r < 2]} for r in range(3)}
>>> d = analyze(dumps)
>>> d["error_type"], d["culprits"], d["collective_seq_id"]
('missing_rank', [2], 2)
"""
from __future__ import annotations

import bisect
import json
import statistics

from .loader import DumpSet, shown_items

_NO_SIZE_CHECK = {"all_to_all", "gather", "scatter", "send", "recv", "recv_anysource"}
_ERRORS = ("collective_type_mismatch", "size_mismatch", "dtype_mismatch", "missing_rank", "extra_collective")
SHOWN = 16   # ranks (or pieces of rank ranges, or items) one line of a finding shows


def ranks_short(ranks) -> str:
    """A rank list for a finding's text: as a list up to :data:`SHOWN` ranks (``[0, 1, 2]``), beyond that in
    ranges (:func:`rank_text`): 4 dumps whose default group lists 3,000,000 ranks once printed 148 MB.

    >>> ranks_short([2, 0, 1]), ranks_short(range(1024))
    ('[0, 1, 2]', '[0-1023]')
    """
    ranks = sorted(ranks)
    return str(ranks) if len(ranks) <= SHOWN else rank_text(ranks)


def _lost_evidence(pg) -> dict:
    """Evidence for the group's ranks that left no readable dump, one key per run of consecutive ranks with the
    same reason (``"4-2999999"``; a single rank keeps its own key, ``"4"``), at most :data:`SHOWN` keys: one key
    per rank made the evidence of a 3,000,000-rank group with 4 dumps 3,000,000 lines long. Made once per group."""
    if pg.lost_evidence is None:
        out: dict = {}
        unread = sorted(pg.unreadable)   # few (files that were refused): split the runs where the reason changes
        done = 0
        for part in _split(pg.no_dump, unread):
            pieces, more = _runs(part, SHOWN - len(out))
            for a, b in pieces:
                out[str(a) if a == b else f"{a}-{b}"] = _lost(pg, a)
            done += len(part) - more
            if len(out) >= SHOWN:
                break
        if len(pg.no_dump) > done:
            out["..."] = f"{len(pg.no_dump) - done:,} more rank(s) left no readable dump"
        pg.lost_evidence = out
    return pg.lost_evidence


def _split(ranks: list, unread: list) -> list:
    """``ranks`` (sorted) cut into pieces of one kind: each unreadable rank on its own, the others between."""
    parts, start = [], 0
    for u in unread:
        i = bisect.bisect_left(ranks, u, start)
        if i < len(ranks) and ranks[i] == u:
            if i > start:
                parts.append(ranks[start:i])
            parts.append([u])
            start = i + 1
    if start < len(ranks):
        parts.append(ranks[start:])
    return parts


def _members(dumps: dict, refused) -> dict[str, tuple]:
    """pg name -> member ranks. gloo leaves pg_config names empty, so the default group falls back to
    every rank that left a file, and other groups to the ranks whose records mention them."""
    everyone = set(dumps) | set(refused)
    names, mentioned, listed, default, merged = set(), {}, {}, set(), set()
    for r, d in dumps.items():
        for name, cfg in d["pg_config"].items():
            if cfg["ranks"]:  # equal lists are one shared object across dumps (loader): set() each once
                if name not in listed:
                    listed[name] = set(cfg["ranks"])
                if name == "" and id(cfg["ranks"]) not in merged:
                    merged.add(id(cfg["ranks"]))
                    everyone |= set(cfg["ranks"])
        for name in d["pg_status"]:
            mentioned.setdefault(name, set()).add(r)
            names.add(name)
        for e in d["entries"]:
            names.add(e["pg"])
            mentioned.setdefault(e["pg"], set()).add(r)
            if e["pg_desc"] == "default_pg":
                default.add(e["pg"])
    out = {}
    for name in names:
        if name in listed and name != "":
            out[name] = tuple(sorted(listed[name]))
        elif name in default or name == "0":
            out[name] = tuple(sorted(everyone))
        else:
            out[name] = tuple(sorted(mentioned[name]))
    return out


def _minority(groups: dict) -> tuple[list[int], object, bool]:
    """(culprits, majority key, tie?) for {key: [ranks]}: everyone outside the one largest group."""
    sizes = sorted((len(v) for v in groups.values()), reverse=True)
    if len(sizes) > 1 and sizes[0] == sizes[1]:
        return sorted(r for v in groups.values() for r in v), None, True
    major = max(groups, key=lambda k: len(groups[k]))
    return sorted(r for k, v in groups.items() if k != major for r in v), major, False


def _sig(e: dict, what: str):
    if what == "op":
        return e["op"]
    if what == "size":   # lists of whole numbers (the loader checks them): str is JSON's text, ~5x faster
        return str([e["input_sizes"], e["output_sizes"]])
    # the dtypes are the dump's own values, unchecked: a value JSON cannot write is shown as Python writes it
    return json.dumps([e["input_dtypes"], e["output_dtypes"]], default=repr)


def _fields(e: dict, what: str):
    """What :func:`_sig` compares, as it is: equal fields need no signature (a fast path taken at nearly every
    sequence id: building signatures of every entry once took half the analysis)."""
    if what == "op":
        return e["op"]
    if what == "size":
        return e["input_sizes"], e["output_sizes"]
    return e["input_dtypes"], e["output_dtypes"]


class _Pg:
    """One process group's records, by rank and sequence id."""

    def __init__(self, name: str, members: tuple, dumps: dict, refused_why: dict):
        self.name, self.members = name, members
        self.by_rank = {r: {e["seq"]: e for e in dumps[r]["entries"] if e["pg"] == name and not e["is_p2p"]}
                        for r in members if r in dumps}
        # a member whose dump is unreadable (truncated, refused) is as silent as one that left none: both are
        # findings, never a reason to say "every collective matches"
        self.no_dump = [r for r in members if r not in dumps]
        self.unreadable = {r for r in members if r in refused_why}
        self.why = {r: refused_why[r] for r in self.unreadable}   # why each file was refused
        self.lost_evidence: dict | None = None   # made once (_lost_evidence), not at every sequence id
        self.desc = next((e["pg_desc"] for es in self.by_rank.values() for e in es.values()), "")
        self.last, self.status = {}, {}
        for r, es in self.by_rank.items():
            st = dumps[r]["pg_status"].get(name, {}).get("last_enqueued_collective")
            if st is not None:  # a rank whose status for this group is unknown (unmapped, absent) casts no vote
                self.status[r] = st
            self.last[r] = max([-1 if st is None else st, *es])  # pg_status survives when the ring buffer dropped entries
        self.seqs = sorted({s for es in self.by_rank.values() for s in es})


def _lost(pg: _Pg, r: int) -> str:
    return "dump unreadable (refused: see 'refused')" if r in pg.unreadable else "no dump"


def _lost_text(pg: _Pg, why: bool = False, ranks=None) -> str:
    """Which of the group's ranks (or of ``ranks``) left no dump and whose file was refused; ``why``: the first
    refusal's reason and what a missing file means (a refused file is there: a crash or a lost file does not
    explain it)."""
    ranks = pg.no_dump if ranks is None else ranks
    bad = [r for r in ranks if r in pg.unreadable]
    none = [r for r in ranks if r not in pg.unreadable]
    first = next((pg.why[r] for r in bad if pg.why[r]), "")
    return "; ".join(([f"the file of rank(s) {ranks_short(bad)} is there but was refused"
                       + (f" ({first}{', ...' if len(bad) > 1 else ''})" if why and first else "")] if bad else [])
                     + ([f"rank(s) {ranks_short(none)} wrote none" + (": crashed or killed, or the file was lost"
                                                                      if why else "")] if none else []))


TIE = " (a tie: the records cannot say which side is wrong, so both are named)"


def _finding(kind, pg, seq, culprits, details, evidence, tie=False, silent=False, behind=None):
    """One finding. ``silent``: it rests only on ranks having left no readable dump, which a crash explains but
    so does a lost file: weaker than any record that disagrees, so it is ranked after those. ``behind``: in a
    tie of ranks that are behind against ranks ahead (both named), the ranks behind: if they are blocked in
    another group, that explains the tie."""
    unknown = "" if silent or not pg.no_dump else f"; unknown for rank(s) {ranks_short(pg.no_dump)} ({_lost_text(pg)})"
    return {"error_type": kind, "culprits": sorted(culprits), "collective_seq_id": seq,
            "process_group": pg.name, "pg_desc": pg.desc, "details": details + (TIE if tie else "") + unknown,
            "evidence": evidence, "_silent": silent, "_tie": tie, "_behind": sorted(behind if behind is not None else culprits)}


def _calls(pg: _Pg, r: int, start: int, n: int = 8) -> list:
    es = pg.by_rank.get(r, {})
    return [(_sig(es[s], "op"), _sig(es[s], "size")) if s in es else None for s in range(start, start + n)]


def _aligned(a: list, b: list, need: int = 1) -> bool | None:
    """True/False when at least ``need`` positions hold calls on both sides, else None (no evidence)."""
    pairs = [(x, y) for x, y in zip(a, b) if x is not None and y is not None]
    return None if len(pairs) < need else all(x == y for x, y in pairs)


def _shift(pg: _Pg, culprits, ref_rank: int, seq: int) -> int:
    """k > 0 if the culprits' calls from ``seq`` equal the majority's from ``seq + k`` (they skipped
    k), k < 0 if the majority's from ``seq`` equal theirs from ``seq - k`` (they made extra calls).

    A shift must beat the plain reading (one call replaced by another): it needs two aligned calls,
    and the calls after ``seq`` must not already line up without it."""
    for r in culprits:
        if _aligned(_calls(pg, r, seq + 1), _calls(pg, ref_rank, seq + 1)):
            return 0
    for k in (1, 2, 3, -1, -2, -3):
        ref = _calls(pg, ref_rank, seq + max(k, 0))
        if all(_aligned(_calls(pg, r, seq + max(-k, 0)), ref, need=2) for r in culprits):
            return k
    return 0


def _waiting(present: dict, op: str) -> str:
    """What the ranks that reached a sequence id some member never reached did there. Their records may say
    the call completed: gloo retires a call that failed or timed out (a rank went missing) as well, so
    "wait in" would contradict the evidence printed beside it."""
    done = [r for r, e in present.items() if e["completed"]]
    if not done:
        return f"wait in {op}"
    if len(done) == len(present):
        return f"called {op}, which their records mark completed (a call that failed or timed out is retired too)"
    return (f"called {op}: rank(s) {ranks_short(done)} mark it completed (a call that failed or timed out is "
            "retired too), the others wait in it")


def _check_seq(pg: _Pg, s: int, completed_lowest: bool):
    present = {r: es[s] for r, es in pg.by_rank.items() if s in es}
    absent = [r for r in pg.by_rank if s not in pg.by_rank[r] and pg.last[r] < s]

    def evidence() -> dict:   # made only for a finding: most sequence ids have none
        ev = {str(r): {"op": e["op"], "input_sizes": e["input_sizes"], "dtypes": e["input_dtypes"],
                       "completed": e["completed"]} for r, e in present.items()}
        ev.update({str(r): {"last_enqueued_collective": pg.last[r]} for r in absent})
        ev.update(_lost_evidence(pg))
        return ev
    for what, kind in (("op", "collective_type_mismatch"), ("size", "size_mismatch"), ("dtype", "dtype_mismatch")):
        if what == "size" and any(e["op"] in _NO_SIZE_CHECK for e in present.values()):
            continue
        values = [_fields(e, what) for e in present.values()]
        if all(v == values[0] for v in values):
            continue
        groups = {}
        for r, e in present.items():
            groups.setdefault(_sig(e, what), []).append(r)
        if len(groups) > 1:
            culprits, major, tie = _minority(groups)
            said = "; ".join(f"rank(s) {ranks_short(v)} {what} {k}" for k, v in groups.items())
            if tie:  # e.g. a rank with no dump left two against one: ask the group's other records
                seen = {k: sum(1 for es in pg.by_rank.values() for q, e in es.items() if q != s and _sig(e, what) == k)
                        for k in groups}
                rare = [k for k in groups if seen[k] == min(seen.values())]
                if len(rare) == 1 and seen[rare[0]] < max(seen.values()):
                    culprits, tie = sorted(groups[rare[0]]), False
                    major = next(k for k in groups if k != rare[0])
                    said += f" ({what} {rare[0]} appears in {seen[rare[0]]} other record(s) of this group, the other side's in more)"
            if not tie:
                k = _shift(pg, culprits, groups[major][0], s)
                if k > 0:
                    return _finding("missing_rank", pg, s, culprits, f"rank(s) {ranks_short(culprits)} skipped {k} collective(s) "
                                    f"at seq {s}: their calls from seq {s} match the others' from seq {s + k} ({said})", evidence())
                if k < 0:
                    return _finding("extra_collective", pg, s, culprits, f"rank(s) {ranks_short(culprits)} made {-k} extra call(s) "
                                    f"at seq {s}: the others' calls from seq {s} match theirs from seq {s - k} ({said})", evidence())
            hint = ""
            if what == "op" and not tie:  # a skipped call also shows up as one call of that kind fewer
                count = lambda r, s=s, major=major: sum(1 for q, e in pg.by_rank[r].items() if q <= s and e["op"] == major)
                ref = count(groups[major][0])
                fewer = [r for r in culprits if count(r) < ref]
                if fewer:
                    mine = pg.by_rank[fewer[0]][s]["op"]
                    hint = (f"; rank(s) {ranks_short(fewer)} made fewer {major} calls up to seq {s} ({count(fewer[0])} vs {ref}):"
                            f" called {mine} in place of one, or skipped one and went on to {mine}")
            return _finding(kind, pg, s, culprits, f"at seq {s} {said}{hint}", evidence(), tie)
    if absent:
        here = sorted(present)
        op = next(iter(present.values()))["op"]
        if len(absent) > len(here):
            return _finding("extra_collective", pg, s, here, f"only rank(s) {ranks_short(here)} called seq {s} "
                            f"({op}); rank(s) {ranks_short(absent)} never did", evidence())
        said = lambda v: str(v) if v >= 0 else "none recorded"
        lasts = sorted({pg.last[r] for r in absent})
        # one number for all, or each absent rank's own while they are few; past that the range (bounded text)
        last = (said(lasts[0]) + (" for each" if len(absent) > 1 else "") if len(lasts) == 1
                else ", ".join(f"{said(pg.last[r])} on rank {r}" for r in sorted(absent)) if len(absent) <= SHOWN
                else f"between {said(lasts[0])} and {lasts[-1]}")
        # as many behind as ahead (a 2-rank group): they skipped a call or the others made an extra one, and
        # nothing here says which: both sides are named (the docs' tie), the ranks behind first in the text
        tie = len(absent) == len(here)
        return _finding("missing_rank", pg, s, absent + here if tie else absent,
                        f"rank(s) {ranks_short(absent)} never reached seq {s} (last enqueued: {last}); rank(s) "
                        f"{ranks_short(here)} {_waiting(present, op)}" + (
                            f": rank(s) {ranks_short(absent)} skipped a call, or rank(s) {ranks_short(here)} made "
                            "one more" if tie else ""), evidence(), tie, behind=absent)
    if present and not all(e["completed"] for e in present.values()):
        if pg.no_dump:
            # the only members not seen here are those without a readable dump: named by elimination, after
            # every finding records support; a refused file is there, so a crash or a lost file is not the reason
            return _finding("missing_rank", pg, s, pg.no_dump, f"rank(s) {ranks_short(pg.no_dump)} left no readable "
                            f"dump ({_lost_text(pg, why=True)}) and are the only member(s) not seen at seq {s}, where "
                            f"rank(s) {ranks_short(present)} wait: named by elimination, what they did is unknown",
                            evidence(), silent=True)
        if completed_lowest and len(present) == len(pg.members) and not any(e["completed"] for e in present.values()):
            return _finding("stuck_collective", pg, s, list(pg.members), f"every member of group {pg.name} "
                            f"joined seq {s} ({next(iter(present.values()))['op']}), the calls match and none "
                            "completed: no desync; suspect the transport (link, NIC) among these ranks", evidence())
    return None


def _status_only(pg: _Pg):
    """Without entries (dumped with includeCollectives=False, or evicted) the last enqueued sequence id
    per rank still shows who is behind: the minority rule on those numbers."""
    groups = {}
    for r, last in pg.status.items():
        groups.setdefault(last, []).append(r)
    if len(groups) < 2:
        return None
    culprits, major, tie = _minority(groups)
    ev = {str(r): {"last_enqueued_collective": last} for r, last in pg.status.items()}
    # in a tie every side is named (_minority); the text speaks of the ranks behind the furthest
    named = culprits
    if tie:
        major = max(groups)
        culprits = sorted(r for k, v in groups.items() if k != major for r in v)
    behind = all(pg.last[r] < major for r in culprits)
    seq = min(pg.last[r] for r in culprits) + 1 if behind else major + 1
    return _finding("missing_rank" if behind or tie else "extra_collective", pg, seq, named,
                    f"no entries recorded; pg_status says rank(s) {ranks_short(culprits)} last enqueued "
                    f"[{shown_items((str(v) for v in sorted({pg.last[r] for r in culprits})), SHOWN)}] while the others reached {major}",
                    ev, tie, behind=culprits)


def _blocked_elsewhere(r: int, pg_name: str, dumps: dict, found: dict) -> tuple | None:
    """Where rank ``r`` waits on *someone else*: an unfinished call of another group whose own finding
    names other ranks (or the transport). An unfinished call alone proves nothing: NCCL enqueues
    asynchronously, so a rank that stopped (a GPU error) leaves unfinished calls in every group, and
    those must not excuse it from the findings that name it."""
    for e in dumps.get(r, {}).get("entries", []):
        if e["pg"] != pg_name and not e["completed"] and not e["is_p2p"]:
            f = found.get(e["pg"])
            if f is not None and (f["error_type"] == "stuck_collective" or r not in f["culprits"]):
                return e["pg"], e["seq"]
    return None


def _lag_findings(pgs, threshold_ns):
    best = None
    for pg in pgs:
        for s in pg.seqs:
            t = {r: es[s]["created_ns"] for r, es in pg.by_rank.items() if s in es and es[s]["created_ns"]}
            if len(t) < 3 or len(t) < len(pg.members):
                continue
            med = statistics.median(t.values())
            late = {r: v - med for r, v in t.items() if v - med > threshold_ns}
            if late and (best is None or max(late.values()) > best[0]):
                best = (max(late.values()), pg, s, late)
    if best is None:
        return None
    _, pg, s, late = best
    return _finding("straggler", pg, s, list(late), "rank(s) " + shown_items(
        (f"{r} enqueued seq {s} {v / 1e6:.3f} ms after the median member" for r, v in sorted(late.items())), SHOWN)
        + "; the others waited for it", {str(r): {"late_ms": v / 1e6} for r, v in late.items()})


def _slow_groups(pgs, slow_factor):
    by_sig = {}
    for pg in pgs:
        durs = []
        for s in pg.seqs:
            es = [pg.by_rank[r].get(s) for r in pg.members if r in pg.by_rank]
            if len(es) == len(pg.members) and all(e and e["started_ns"] and e["completed_ns"] for e in es):
                durs.append((max(e["completed_ns"] for e in es) - max(e["started_ns"] for e in es), s, es[0]))
        for d, s, e in durs:
            key = (len(pg.members), e["op"], _sig(e, "size"), repr(_fields(e, "dtype")))   # compared, not shown
            by_sig.setdefault(key, {}).setdefault(pg.name, []).append((d, s))
    found = []
    members = {p.name: set(p.members) for p in pgs}
    for key, per_pg in by_sig.items():
        if len(per_pg) < 2:
            continue
        med = {name: statistics.median(d for d, _ in v) for name, v in per_pg.items()}
        fastest = min(med.values())
        slow = [n for n, m in med.items() if fastest > 0 and m > slow_factor * fastest]
        if slow:
            fast_ranks = set().union(*(members[n] for n in med if n not in slow))
            suspects = set().union(*(members[n] for n in slow))
            found.append((key, slow, med, fastest, suspects - fast_ranks or suspects))
    if not found:
        return None
    # Each kind of collective narrows the suspects; a link shared by all slow groups is the best guess.
    culprits = set.intersection(*(c for *_, c in found)) or found[0][4]
    key, slow, med, fastest, _ = found[0]
    pg = next(p for p in pgs if p.name == slow[0])
    worst = max(by_sig[key][slow[0]])[1]  # the sequence id where the slow group took longest
    return _finding("slow_link", pg, worst, culprits, f"group(s) [{shown_items((repr(n) for n in sorted(n for _, s, *_ in found for n in s)), SHOWN)}] "
                    f"take up to {max(med.values()) / fastest:.1f}x as long as the fastest group running the same "
                    f"{key[1]} ({med[slow[0]] / 1e6:.3f} ms vs {fastest / 1e6:.3f} ms): a link of rank(s) "
                    f"{ranks_short(culprits)} is slow", {n: m / 1e6 for n, m in med.items()})



def _runs(ranks: list, shown: int) -> tuple[list, int]:
    """([first, last] of the first ``shown`` runs of consecutive ranks, how many ranks follow them) for a sorted
    list without repeats. Each run's end is found by bisection (``ranks[j] - j`` is constant along a run and
    grows after it), so 16 runs of 3,000,000 ranks cost a few hundred steps, not a pass over the list."""
    pieces, i, n = [], 0, len(ranks)
    while i < n and len(pieces) < shown:
        lo, hi, key = i, n - 1, ranks[i] - i
        while lo < hi:   # the last j with ranks[j] - j == key
            mid = (lo + hi + 1) // 2
            if ranks[mid] - mid == key:
                lo = mid
            else:
                hi = mid - 1
        pieces.append([ranks[i], ranks[lo]])
        i = lo + 1
    return pieces, n - i


def rank_text(ranks, shown: int = 16) -> str:
    """Ranks for one line of text, runs written as ranges and at most ``shown`` pieces (JSON keeps every rank):
    a hostile dump's group of 2,000,000 members once printed one 16 MB line.

    >>> rank_text([0, 1, 2, 3, 8, 10, 11]), rank_text(range(2_000_000)), rank_text([5])
    ('[0-3, 8, 10-11]', '[0-1999999]', '[5]')
    """
    pieces, more = _runs(sorted(set(ranks)), shown)
    text = [f"{a}-{b}" if b > a else str(a) for a, b in pieces]
    return "[" + ", ".join(text) + (f", ... {more:,} more" if more else "") + "]"


def analyze(dumps, straggler_ms: float = 10.0, slow_factor: float = 1.5) -> dict:
    """Diagnose ``dumps`` ({rank: normalised dump} or a :class:`~sim.flight.loader.DumpSet`).

    Returns ``{"error_type", "culprits", "collective_seq_id", "process_group", "details", "evidence",
    "secondary", "other_findings", "ranks", "missing_dumps", "refused", "damaged", "skipped"}`` (``missing_dumps``:
    ranks a group lists whose dump was not read, unknown rather than culprits; ``damaged``: dump path -> its entries
    whose values no recorder writes, which were not used; ``skipped``: the folder's other files, not read);
    ``error_type`` is ``"none"`` when nothing is
    wrong. ``straggler_ms``: lateness that counts as straggling; ``slow_factor``: how much slower a
    group must be than its peers to blame a link."""
    refused_files, refused, other_job, damaged, skipped = ({}, {}, {}, {}, ())
    if isinstance(dumps, DumpSet):   # refused: rank -> why its file was refused
        refused_files, refused, other_job, damaged, skipped, dumps = (
            dumps.refused, dumps.refused_why, dumps.other_job, dumps.damaged, dumps.skipped, dumps.dumps)
    members = _members(dumps, refused)
    pgs = [_Pg(n, m, dumps, refused) for n, m in sorted(members.items(), key=lambda x: (len(x[0]), x[0]))]
    findings = []
    for pg in pgs:
        first_open = min((s for s in pg.seqs if not all(es[s]["completed"] for es in pg.by_rank.values()
                                                         if s in es)), default=None)
        if not pg.seqs and (f := _status_only(pg)):
            f["_t"] = 0
            findings.append(f)
        for s in pg.seqs:
            f = _check_seq(pg, s, s == first_open)
            if f:
                # when it happened: the earliest enqueue at that sequence id (to order groups)
                f["_t"] = min((es[s]["created_ns"] or 0 for es in pg.by_rank.values() if s in es), default=0)
                findings.append(f)
                break  # later sequence ids of a desynchronised group say nothing new
        else:
            # Without a recorded collective of this group there is nothing to weigh. A rank whose file was refused
            # is there: where the others' last call is marked completed, it took part in every call and is unknown,
            # not named; where that call is only retired (gloo retires a call that failed too), it may be why
            top = pg.seqs[-1] if pg.seqs else 0
            confirmed = all(es[top]["state"] == "completed" for es in pg.by_rank.values() if top in es)
            named = [r for r in pg.no_dump if r not in pg.unreadable or not confirmed]
            if named and pg.seqs:
                s = max(pg.last.values()) + 1
                lost = _lost_text(pg, why=True, ranks=named)
                f = _finding("missing_rank", pg, s, named, f"rank(s) {ranks_short(named)} left no readable dump "
                             f"({lost}); the others recorded every collective of this group up to seq {s - 1} as "
                             "completed or retired" + ("" if confirmed else ", and a call that failed is retired too: "
                                                       "named by elimination, what they did is unknown"),
                             dict(_lost_evidence(pg)), silent=True)
                f["_t"] = float("inf")
                findings.append(f)
    primary, secondary = [], []
    found = {f["process_group"]: f for f in findings}
    for f in findings:
        blocked: dict | None = {}
        for r in f["_behind"] if f["error_type"] == "missing_rank" else ():
            b = _blocked_elsewhere(r, f["process_group"], dumps, found)
            if b is None:   # one culprit not blocked elsewhere keeps the finding primary: stop looking
                blocked = None
                break
            blocked[r] = b
        if f["error_type"] == "missing_rank" and f["culprits"] and blocked:
            if f["_tie"]:   # the ranks behind are blocked elsewhere: that settles the tie
                f["details"], f["culprits"] = f["details"].replace(TIE, ""), f["_behind"]
            f["details"] += "; but " + shown_items((f"rank {r} is blocked in group {b[0]} seq {b[1]}"
                                                  for r, b in blocked.items()), SHOWN)
            secondary.append(f)
        else:
            primary.append(f)
    order = lambda f: (_ERRORS + ("stuck_collective",)).index(f["error_type"])
    primary.sort(key=lambda f: (order(f) > 4, f["_silent"], f["_t"]))
    if not primary and secondary:  # every rank waits on another: a cross-group deadlock
        primary = [dict(secondary[0], details=secondary[0]["details"] + " (cross-group wait cycle)")]
    main = primary[0] if primary else (_lag_findings(pgs, straggler_ms * 1e6) or _slow_groups(pgs, slow_factor))
    if main is None:
        main = {"error_type": "none", "culprits": [], "collective_seq_id": None, "process_group": None,
                "pg_desc": "", "details": "every collective matches on every rank read and none is stuck, late or slow",
                "evidence": {}}
    strip = lambda f: {k: v for k, v in f.items() if k not in ("_t", "_silent", "_tie", "_behind")}
    # the ranks some group lists but whose dump was not read (unknown, not healthy and not guilty)
    unseen = sorted({r for p in pgs for r in p.no_dump})
    if unseen and primary and all(f["error_type"] == "stuck_collective" for f in primary):
        # every stuck group among the ranks read has all its members in matching calls: no rank read is
        # behind, so picking one group's members as culprits (and the transport as the cause) is a tie broken
        # by order; the rank that stopped first is likelier among those without a dump (a trial's 4 of 16
        # dumps blamed ranks 2-3 where rank 12's GPU had failed)
        primary = [dict(f, _silent=False) for f in primary]
        main = {"error_type": "stuck_collective", "culprits": [], "collective_seq_id": None, "process_group": None,
                "pg_desc": "", "evidence": {},
                "details": (f"{len(primary)} group(s) are stuck with every member read in matching calls and none "
                            "completed: no rank read is behind the others, so the cause is likely among the ranks "
                            "without a dump (read them all before suspecting the transport)")}
        primary = [main] + primary
    out = strip(main)
    if unseen:   # said once, up front, so a reader knows which ranks the diagnosis could not see
        lost = sorted(r for r in unseen if r in refused)
        out["details"] += (f"; no dump read from rank(s) {rank_text(unseen)}" + (
            f" ({rank_text(lost)}: file refused, see 'refused')" if lost else "")
                           + ": what they did is unknown")
    secondary, primary = [strip(f) for f in secondary], [strip(f) for f in primary]
    out.update(secondary=[f for f in secondary if f != out], other_findings=primary[1:],
               ranks=sorted(dumps), missing_dumps=unseen, refused=refused_files, other_job=other_job, damaged=damaged,
               skipped=list(skipped),
               process_groups={p.name: {"desc": p.desc, "ranks": list(p.members)} for p in pgs})
    return out
