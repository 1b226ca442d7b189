"""The autograders pass the reference solutions and reject wrong answers with messages that say what is wrong.

Wrong answers are made from the reference solutions' own code (read from notebooks/solutions/ with
nbformat) by changing one thing, so each test shows that one mistake is caught and named. Most run the
checks in-process (fast); the CLI tests run `collsim grade` as a student does (a subprocess per file).
"""
import json
import os
import subprocess
import sys

import pytest

from sim.errors import CollsimError
from sim.grade import ASSIGNMENTS, assignment_module, execute_cells, grade
from sim.grade.source import detect_assignment, read_submission

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SOLUTIONS = os.path.join(ROOT, "notebooks", "solutions")
ASSIGN_DIR = os.path.join(ROOT, "notebooks", "assignments")
NOTEBOOKS = {"a1": "a1_ring_reduce_scatter.ipynb", "a2": "a2_torus_all_reduce.ipynb", "a3": "a3_ring_tree_sharp.ipynb",
             "a4": "a4_nvls_all_reduce.ipynb", "a5": "a5_debug_hang.ipynb"}


def solution_code(key: str) -> str:
    cells, _ = read_submission(os.path.join(SOLUTIONS, NOTEBOOKS[key]))   # skip-grade cells left out
    return CELL.join(c.code for c in cells)


CELL = "\n# ---- next cell ----\n"   # run() splits here, so cells run one by one as the grader runs them


def mutate(code: str, old: str, new: str) -> str:
    assert old in code, f"the reference solution no longer contains {old!r}"
    return code.replace(old, new)


def mutate_last(code: str, old: str, new: str) -> str:
    """Change only the last occurrence: the student's function, not an example above it that reads alike."""
    assert old in code, f"the reference solution no longer contains {old!r}"
    head, tail = code.rsplit(old, 1)
    return head + new + tail


def run(key: str, code: str):
    ns, notes = execute_cells([(f"cell {k}", c) for k, c in enumerate(code.split(CELL), start=1)])
    return {c.name: c for c in assignment_module(key).check(ns)}, notes


def failed(checks: dict) -> dict:
    return {name: c.message for name, c in checks.items() if not c.ok and not c.skipped}


# ---- every assignment: the reference solution passes, the unsolved notebook does not -----------------
@pytest.mark.parametrize("key", sorted(ASSIGNMENTS))
def test_reference_solution_passes_every_check(key):
    checks, notes = run(key, solution_code(key))
    assert not failed(checks), failed(checks)
    assert len(checks) >= 6 and all(c.ok for c in checks.values())


@pytest.mark.parametrize("key", sorted(ASSIGNMENTS))
def test_each_assignment_has_notebook_solution_and_grading_instructions(key):
    name = NOTEBOOKS[key]
    assert assignment_module(key).NOTEBOOK == name
    assert os.path.exists(os.path.join(SOLUTIONS, name))
    import nbformat
    nb = nbformat.read(os.path.join(ASSIGN_DIR, name), as_version=4)
    text = "\n".join(c.source for c in nb.cells)
    assert f"collsim grade notebooks/assignments/{name}" in text
    assert "raise NotImplementedError" in text          # incomplete by design
    assert nb.metadata["collsim"]["assignment"] == key


@pytest.mark.slow
@pytest.mark.parametrize("key", sorted(ASSIGNMENTS))
def test_released_notebook_scores_zero_through_the_sandboxed_grader(key):
    report = grade(os.path.join(ASSIGN_DIR, NOTEBOOKS[key]))   # the released student notebook, as shipped
    assert not report.passed and report.error is None
    assert report.score[0] == 0 and report.score[1] >= 5       # nothing earned: a gate such as "defines f" is worth 0
    msgs = [c.message for c in report.failures()]
    assert msgs and "NotImplementedError" in msgs[0] and "replace" in msgs[0]


# ---- a1: ring reduce-scatter ----------------------------------------------------------------------------
# The solution is one line of the chunk language in a given loop; each mistake below changes that line.
A1_SEND = "p.send(r, r + 1, chunk=r - s - 1, reduce=True)"
A1_CHUNK = "chunk=r - s - 1,"


def test_a1_solution_is_the_lectures_loop_in_the_chunk_language():
    code = solution_code("a1")
    assert "ChunkProgram(\"reduce_scatter\", n, chunks=n)" in code and "for s in p.steps(n - 1):" in code
    assert A1_SEND in code and "from_ops" not in code and "meshgrid" not in code


def test_a1_copy_instead_of_reduce_is_caught_by_the_verifier():
    checks, _ = run("a1", mutate(solution_code("a1"), A1_SEND, A1_SEND.replace("reduce=True", "reduce=False")))
    msg = failed(checks)["correct (sim.verify)"]
    assert "rank 0 ends with chunk 0" in msg and "should hold the sum of all 4 ranks" in msg
    assert "reduce=True" in msg                                  # the hint for this mistake
    assert checks["time = ring bound"].skipped


def test_a1_off_by_one_chunk_names_rank_and_chunk():
    checks, _ = run("a1", mutate(solution_code("a1"), A1_CHUNK, "chunk=r - s,"))
    msg = failed(checks)["correct (sim.verify)"]
    assert msg.startswith("n=4:") and "ends with chunk" in msg and "rank" in msg
    assert set(failed(checks)) == {"correct (sim.verify)"}      # shape, steps and traffic are still right


def test_a1_serialised_ring_fails_the_step_count():
    checks, _ = run("a1", mutate(solution_code("a1"), A1_SEND, A1_SEND.replace(")", ", step=s * n + r)")))
    assert set(failed(checks)) == {"n-1 steps"}
    assert "12 rounds" in failed(checks)["n-1 steps"] and "n-1 = 3" in failed(checks)["n-1 steps"]


def test_a1_direct_sends_fail_neighbours_steps_and_time():
    code = solution_code("a1") + CELL + "ring_reduce_scatter = direct_reduce_scatter\n"   # the notebook's non-ring example
    checks, _ = run("a1", code)
    bad = failed(checks)
    assert set(bad) == {"only ring neighbours", "n-1 steps", "time = ring bound"}
    assert "rank 0 sends chunk 2 to rank 2, which is not its ring neighbour" in bad["only ring neighbours"]
    assert "594.2 us" in bad["time = ring bound"]                # the ring bound it should meet


def test_a1_wrong_collective_and_wrong_type_are_named():
    checks, _ = run("a1", mutate_last(solution_code("a1"), 'ChunkProgram("reduce_scatter"', 'ChunkProgram("all_gather"'))
    msg = failed(checks)["returns a reduce_scatter Program"]
    assert "Program for all_gather" in msg and 'write ChunkProgram("reduce_scatter", ...)' in msg
    checks, _ = run("a1", "def ring_reduce_scatter(n):\n    return [1, 2, 3]\n")
    assert "returned a list; return a sim.Program" in failed(checks)["returns a reduce_scatter Program"]


@pytest.mark.parametrize("body", ['return sim.build_program("ring", "reduce_scatter", n)',
                                  'import importlib\n    return importlib.import_module("sim.algorithms").build_program('
                                  '"ring", "reduce_scatter", n)',
                                  'from sim.algorithms import get_algorithm\n    '
                                  'return get_algorithm("ring").builder(sim.get_collective("reduce_scatter"), n)',
                                  'from sim.algorithms.ring import build_ring\n    '
                                  'return build_ring(sim.get_collective("reduce_scatter"), n)'])
def test_a1_handing_in_the_librarys_own_ring_gets_no_marks(body):
    # a one-line submission returning the library's ring got 6/6; the library's builders refuse while the
    # student's function runs, and work again after it (the checker's own comparisons need them)
    checks, _ = run("a1", f"import sim\ndef ring_reduce_scatter(n):\n    {body}\n")
    msg = failed(checks)["returns a reduce_scatter Program"]
    assert "write the algorithm yourself" in msg
    import sim
    assert sim.build_program("ring", "reduce_scatter", 4).steps == 3


def test_a1_returning_the_chunk_program_instead_of_its_program_says_how_to_finish():
    checks, _ = run("a1", mutate(solution_code("a1"), 'return p.program("my_ring", steps=n - 1)', "return p"))
    msg = failed(checks)["returns a reduce_scatter Program"]
    assert "returned a ChunkProgram" in msg and "return p.program(" in msg


def test_a1_extra_traffic_is_caught():
    # every transfer also copies the next chunk along: twice the bytes of the ring
    code = solution_code("a1") + CELL + """
_good = ring_reduce_scatter
def ring_reduce_scatter(n):
    p = _good(n)
    return sim.Program.from_ops("reduce_scatter", n, n, np.concatenate([p.src, p.src]),
                                np.concatenate([p.dst, p.dst]), np.concatenate([p.chunk, (p.chunk + 1) % n]),
                                np.concatenate([p.step, p.step]), np.concatenate([p.reduce, np.zeros(p.nops, bool)]),
                                algorithm="chatty", steps=n - 1)
"""
    checks, _ = run("a1", code)
    assert "bandwidth-optimal traffic" in failed(checks)
    assert "the ring optimum is (n-1)/n" in failed(checks)["bandwidth-optimal traffic"]


# ---- a2: torus all-reduce -------------------------------------------------------------------------------
A2_PARTS = ("parts = [(along_rows, along_cols, +1), (along_rows, along_cols, -1), (along_cols, along_rows, +1), "
            "(along_cols, along_rows, -1)]")


def test_a2_solution_is_written_in_the_chunk_language():
    code = solution_code("a2")
    assert "ChunkProgram(\"all_reduce\", n, chunks=4 * n)" in code and "p.send(r, at(i, j + d)" in code
    assert "from_ops" not in code and "ops.append" not in code


def test_a2_plain_2d_algorithm_is_fast_when_small_but_not_when_large():
    code = mutate(solution_code("a2"), A2_PARTS, "parts = [(along_rows, along_cols, +1)]")
    code = mutate(code, "chunks=4 * n", "chunks=n")
    checks, _ = run("a2", code)
    assert set(failed(checks)) == {"beats the ring at 256 MiB"}
    assert "at most 0.6x" in failed(checks)["beats the ring at 256 MiB"]
    assert checks["beats the ring at 1 KiB"].ok


def test_a2_snake_ring_uses_links_but_is_too_slow():
    code = solution_code("a2") + CELL + """
def torus_all_reduce(rows, cols):
    if rows % 2 == 0:     # boustrophedon along rows, back up the first column's wrap-around link
        order = [i * cols + (j if i % 2 == 0 else cols - 1 - j) for i in range(rows) for j in range(cols)]
    else:                 # along columns (cols even), back along the first row's wrap-around link
        order = [(i if j % 2 == 0 else rows - 1 - i) * cols + j for j in range(cols) for i in range(rows)]
    ring = sim.build_program("ring", "all_reduce", rows * cols)
    o = np.array(order)
    return sim.Program.from_ops("all_reduce", rows * cols, ring.nchunks, o[ring.src], o[ring.dst], ring.chunk,
                                ring.step, ring.reduce, algorithm="snake", steps=ring.steps)
"""
    checks, _ = run("a2", code)
    bad = failed(checks)
    assert set(bad) == {"beats the ring at 256 MiB", "beats the ring at 1 KiB"}
    assert "1.00x an ideal ring" in bad["beats the ring at 256 MiB"]
    assert "2(rows-1) + 2(cols-1) = 12" in bad["beats the ring at 1 KiB"]


def test_a2_rank_order_ring_crosses_non_neighbours():
    checks, _ = run("a2", solution_code("a2") + CELL + """
def torus_all_reduce(rows, cols):
    return sim.build_program("ring", "all_reduce", rows * cols)
""")
    msg = failed(checks)["only torus neighbours"]
    assert "rank 3 at (row 0, col 3) sends" in msg and "not a torus neighbour" in msg
    assert checks["beats the ring at 256 MiB"].skipped


def test_a2_missing_all_gather_phase_is_named_by_the_verifier():
    code = mutate(solution_code("a2"), "        t = second(part, d, False, False, t)\n", "")   # no all-gather along the 2nd
    checks, _ = run("a2", code)
    msg = failed(checks)["correct (sim.verify)"]
    assert msg.startswith("2x2 torus:") and "ends with chunk" in msg and "should hold the sum" in msg


def test_a4_handing_in_the_librarys_own_nvls_gets_no_marks():
    code = solution_code("a4") + CELL + ("import sim\nfrom sim.presets import load_topology\ndef nvls_all_reduce(n):\n"
                                         "    return sim.build_program('nvls', 'all_reduce', n, "
                                         "topology=load_topology(f'switch:n={n},nvls=1'))\n")
    checks, _ = run("a4", code)
    assert "write the algorithm yourself" in failed(checks)["returns an all_reduce Program with the switch"]


def test_a2_wrong_rank_count():
    checks, _ = run("a2", "import sim\ndef torus_all_reduce(rows, cols):\n    return sim.build_program('ring', 'all_reduce', rows + cols)\n")
    assert "a 2x3 torus has 6" in failed(checks)["returns an all_reduce Program"]


# ---- a3: ring/tree crossover and SHARP ---------------------------------------------------------------------
def test_a3_ring_with_n_steps_instead_of_n_minus_1():
    checks, _ = run("a3", mutate(solution_code("a3"), "return 2 * (n - 1)", "return 2 * n"))
    bad = failed(checks)
    assert "ring_steps(8) = 16" in bad["step counts"] and "takes 14 steps" in bad["step counts"]
    assert "ring_us(8, 1024" in bad["ring time (exact)"]


def test_a3_textbook_tree_bandwidth_is_too_optimistic():
    checks, _ = run("a3", mutate(solution_code("a3"), "+ 2 * nbytes / B", "+ nbytes / B"))
    msg = failed(checks)["tree time (within 25%)"]
    assert "tree_us(8, 1073741824" in msg and "how many bytes leave the busiest GPU" in msg


def test_a3_one_way_tree_latency_is_caught_at_small_sizes():
    checks, _ = run("a3", mutate(solution_code("a3"), "return tree_steps(n) * latency_us + 2 * nbytes / B",
                                 "return tree_steps(n) / 2 * latency_us + 2 * nbytes / B"))
    assert "at 1 KiB only latency counts" in failed(checks)["tree time (within 25%)"]


def test_a3_crossover_must_match_own_formulas_and_the_simulator():
    checks, _ = run("a3", mutate(solution_code("a3"), "return (ring_steps(n) - tree_steps(n)) * latency_us /",
                                 "return 100 * (ring_steps(n) - tree_steps(n)) * latency_us /"))
    assert "your own formulas disagree" in failed(checks)["crossover size"]
    code = solution_code("a3") + CELL + "def crossover_nbytes(n, bandwidth_GBps, latency_us):\n    return 1 << 12\n"
    checks, _ = run("a3", code)   # would need tree_us == ring_us there too: caught by the consistency test first
    assert "crossover size" in failed(checks)


def test_a3_sharp_speedup_of_n_is_wrong():
    code = solution_code("a3") + CELL + "def sharp_speedup(n, nbytes, bandwidth_GBps, latency_us):\n    return float(n)\n"
    checks, _ = run("a3", code)
    assert set(failed(checks)) == {"SHARP gain"}
    assert "ratio of the bytes each GPU sends" in failed(checks)["SHARP gain"]


def test_a3_predictions_may_not_run_the_simulator():
    code = solution_code("a3") + CELL + """
def sharp_us(n, nbytes, bandwidth_GBps, latency_us):
    return sim.simulate("all_reduce", nbytes, f"switch:n={n},bandwidth_GBps={bandwidth_GBps},latency_us={latency_us},sharp=1",
                        "collnet_direct", "ideal").time_us
"""
    checks, _ = run("a3", code)
    assert "predict with a formula" in failed(checks)["SHARP time (within 15%)"]
    import sim
    assert sim.simulate("all_reduce", 1024, "ring:n=4", "ring", "ideal").time_us > 0   # restored afterwards


# ---- running student files: cells, errors, timeouts, the CLI ----------------------------------------------
def test_cells_keep_running_after_one_raises_and_errors_name_the_cell():
    ns, notes = execute_cells([("cell 2", "x = 1"), ("cell 3", "1 / 0"), ("cell 4", "y = x + 1"), ("cell 5", "def f(:")])
    assert ns["y"] == 2
    assert notes[0] == "cell 3 raised ZeroDivisionError: division by zero (cell 3, line 1); the cells after it still ran"
    assert notes[1].startswith("cell 5 has a syntax error at line 1")


def test_assignment_detection(tmp_path):
    known = ASSIGNMENTS
    assert detect_assignment("x/a2_my_try.ipynb", [], {}, known) == "a2"
    assert detect_assignment("x/mine.ipynb", [], {"collsim": {"assignment": "a3"}}, known) == "a3"
    assert detect_assignment("x/ring_reduce_scatter_v2.py", [], {}, known) == "a1"
    from sim.grade.source import Cell
    assert detect_assignment("x/mine.py", [Cell("mine.py", 'ASSIGNMENT = "a2"\n')], {}, known) == "a2"
    with pytest.raises(CollsimError, match="pass --assignment"):
        detect_assignment("x/mine.py", [], {}, known)


@pytest.mark.slow
@pytest.mark.parametrize("key", sorted(ASSIGNMENTS))
def test_cli_grades_each_solution_notebook_and_exits_0(key):
    out = subprocess.run([sys.executable, "-m", "sim", "grade", os.path.join(SOLUTIONS, NOTEBOOKS[key]), "--format", "json"],
                         capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stdout + out.stderr
    report = json.loads(out.stdout)
    assert report["assignment"] == key and report["error"] is None and not report["warnings"]
    assert all(c["ok"] for c in report["checks"]) and len(report["checks"]) >= 6
    assert report["score"] == report["max_score"] == sum(c["points"] for c in report["checks"]) > 0


def test_cli_wrong_py_file_exits_1_with_the_verifier_message(tmp_path, cli):
    f = tmp_path / "a1_attempt.py"
    f.write_text(mutate(solution_code("a1"), A1_SEND, A1_SEND.replace("reduce=True", "reduce=False")))
    code, out, _ = cli("grade", f)
    assert code == 1
    assert "FAIL [0/1] correct (sim.verify): n=4: my_ring reduce_scatter (n=4): rank 0 ends with chunk 0" in out
    assert out.strip().splitlines()[-1].startswith("score 4/6")   # "defines" is a gate worth 0; time skipped


def test_cli_timeout_and_bad_files(tmp_path, cli):
    f = tmp_path / "a1_loop.py"
    f.write_text("while True:\n    pass\n")
    code, out, _ = cli("grade", f, "--timeout", "2")
    assert code == 1 and "ran for more than 2 s and was stopped" in out
    code, _, err = cli("grade", tmp_path / "missing.ipynb")
    assert code == 2 and "no such file" in err
    g = tmp_path / "notes.py"
    g.write_text("x = 1\n")
    code, _, err = cli("grade", g)
    assert code == 2 and "cannot tell which assignment" in err
    code, _, err = cli("grade", g, "--assignment", "a9")
    assert code == 2 and "unknown assignment 'a9'" in err


# ---- every failure says, in short, what was expected and what the code did ------------------------------------
def test_every_failure_says_what_was_expected_and_what_the_code_did():
    direct = solution_code("a1") + CELL + """
def ring_reduce_scatter(n):
    src, dst = zip(*[(r, k) for r in range(n) for k in range(n) if r != k])
    return sim.Program.from_ops("reduce_scatter", n, n, src, dst, dst, [0] * len(src), [True] * len(src),
                                algorithm="direct", steps=1)
"""
    cases = [("a1", direct), ("a1", mutate(solution_code("a1"), A1_CHUNK, "chunk=r - s,")),
             ("a3", mutate(solution_code("a3"), "return 2 * (n - 1)", "return 2 * n"))]
    for key, code in cases:
        checks, _ = run(key, code)
        bad = [c for c in checks.values() if not c.ok and not c.skipped]
        assert bad
        for c in bad:
            assert c.expected and c.got and c.expected != c.got, (key, c)
    steps = run("a1", direct)[0]["n-1 steps"]
    assert (steps.expected, steps.got) == ("3 rounds", "1 rounds")   # n=4: a ring reduce-scatter takes n-1 rounds


# ---- a4: NVLS ---------------------------------------------------------------------------------------------------
def step_of(code: str, comment: str) -> str:
    """The `for s in p.steps(1):` loop of the a4 solution whose comment starts with ``comment``, with its body."""
    start = code.index("    for s in p.steps(1):              # " + comment)
    end = code.index("\n    for s in p.steps(1):", start + 1) if comment != "3:" else code.index("\n    return p.program", start)
    return code[start:end + 1]


def test_a4_solution_is_four_steps_in_the_chunk_language():
    code = solution_code("a4")
    assert 'switch = p.switch("switch")' in code and "p.send(r, switch, chunk=k, reduce=True)" in code
    assert "from_ops" not in code and "ops +=" not in code


def test_a4_switch_multicasting_the_sum_itself_breaks_nvls_rules_and_bytes():
    # skip the owner's read and write-back: the switch sends the sum on its own (SHARP can, NVLS cannot);
    # the language moves the multicast up to step 1 by itself
    code = solution_code("a4")
    code = mutate(code, step_of(code, "1:"), "")
    code = mutate(code, step_of(code, "2:"), "")
    code = mutate(code, 'p.program("my_nvls", steps=4)', 'p.program("my_nvls", steps=2)')
    checks, _ = run("a4", code)
    bad = failed(checks)
    assert checks["correct (sim.verify)"].ok                     # it is a correct all-reduce ...
    assert "4 steps" in bad and "NVLS bytes on every link" in bad  # ... but not NVLS: 1.000 S up, not (n+1)/n S
    assert "carries 1.000 S" in bad["NVLS bytes on every link"] and "1.125 S" in bad["NVLS bytes on every link"]


def test_a4_gpu_to_gpu_transfers_and_a_missing_switch_are_named():
    code = solution_code("a4") + CELL + """
def nvls_all_reduce(n):
    return sim.build_program("ring", "all_reduce", n)
"""
    bad = failed(run("a4", code)[0])
    assert 'switches=("switch",)' in bad["returns an all_reduce Program with the switch"]


def test_a4_the_switch_as_a_plain_number_is_a_rank_and_the_message_says_so():
    # agent n written as the number n: the language wraps it around to rank 0, which then sends to itself
    code = mutate(solution_code("a4"), 'switch = p.switch("switch")', "switch = n")
    msg = failed(run("a4", code)[0])["returns an all_reduce Program with the switch"]
    assert "rank 0 sends chunk 0 to itself" in msg and "rank r + 2 is rank r" in msg and "p.switch(...)" in msg


def test_a4_ring_formula_of_a_reduce_scatter_only_is_caught():
    checks, _ = run("a4", mutate(solution_code("a4"), "return 2 * (n - 1) / n * nbytes", "return (n - 1) / n * nbytes"))
    bad = failed(checks)
    assert "`ring_link_bytes(4, 67108864)`" in bad["byte formulas = engine"] and "traffic saving" in bad


# ---- a5: a hung job ---------------------------------------------------------------------------------------------
def test_a5_a_diagnosis_that_only_finds_missing_ranks_fails_the_mismatch_jobs():
    code = solution_code("a5") + CELL + """
def diagnose(dump_dir):
    dumps = {int(re.search(r"(\\d+)", n).group(1)): json.load(open(os.path.join(dump_dir, n))) for n in os.listdir(dump_dir)}
    last = {r: d["pg_status"]["0"]["last_enqueued_collective"] for r, d in dumps.items()}
    r = min(last, key=last.get)
    return {"rank": r, "seq": last[r] + 1, "collective": "all_reduce", "kind": "missing_rank"}
"""
    checks, _ = run("a5", code)
    assert checks["unseen job: skip"].ok
    for kind in ("dtype", "size", "wrong_collective"):
        assert not checks[f"unseen job: {kind}"].ok and "the dumps say" in checks[f"unseen job: {kind}"].message


def test_a5_calling_the_analyzer_is_refused_and_seed_must_be_set():
    code = solution_code("a5") + CELL + """
def diagnose(dump_dir):
    from sim.flight.analyze import analyze
    from sim.flight.loader import load_dir
    d = analyze(load_dir(dump_dir).dumps)
    return {"rank": d["culprits"][0], "seq": d["collective_seq_id"], "collective": "all_reduce", "kind": d["error_type"]}
"""
    checks, _ = run("a5", code)
    assert "may not run the flight-recorder analyzer" in checks["your job: the culprit rank"].message
    checks, _ = run("a5", mutate(solution_code("a5"), "SEED = 12345", "SEED = 'me'"))
    assert "set `SEED = <your student number>`" in failed(checks)["defines diagnose and SEED"]


def test_a5_jobs_are_reproducible_per_seed_and_differ_across_seeds():
    from sim.grade.hung_job import ground_truth, make_job
    assert make_job(3) == make_job(3)
    truths = [ground_truth(s) for s in range(12)]
    assert len({t["kind"] for t in truths}) >= 3 and len({t["rank"] for t in truths}) >= 3


def test_a_gate_worth_no_points_reads_pass_or_fail_in_the_grade_sheet():
    # "defines ring_reduce_scatter" is worth 0 points: its column said 0 next to a PASS in the feedback
    from sim.grade.batch import csv_text
    from sim.grade.checks import Check, GradeReport
    ok = GradeReport("a1", "t", "a.ipynb", (Check("defines f", True, points=0), Check("correct", True, points=2)))
    bad = GradeReport("a1", "t", "b.ipynb", (Check("defines f", False, "no f", points=0),
                                             Check("correct", False, "skipped until `defines f` passes", skipped=True, points=2)))
    rows = [line.split(",") for line in csv_text([ok, bad]).splitlines()]
    assert rows[0][5:] == ["defines f (0 points: pass/fail)", "correct"]
    assert rows[1][5:] == ["pass", "2"] and rows[2][5:] == ["fail", "0"]


def test_a_notebook_graded_as_another_assignment_is_refused(tmp_path):
    # the a1 notebook graded with --assignment a2 scored 0/5 without a word; its metadata says a1
    import shutil

    from sim.errors import CollsimError
    from sim.grade.runner import grade
    nb = tmp_path / "sub.ipynb"
    shutil.copy(os.path.join(os.path.dirname(__file__), "..", "..", "notebooks", "solutions", NOTEBOOKS["a1"]), nb)
    with pytest.raises(CollsimError, match="is the a1 notebook .* but --assignment a2 was given"):
        grade(str(nb), "a2", timeout_s=60)
