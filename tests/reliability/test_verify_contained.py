"""`collsim verify FILE.py` runs the user's file under bubblewrap where it works: the facts are printed by
the file from inside (to stderr, where the user's prints go) and asserted here."""
import json

import pytest
from conftest import refused

from sim.io.containment import available

PROBE = '''import json, os, sys
from sim.program import Program
print("FACTS " + json.dumps({"uid": os.getuid(), "ppid": os.getppid(), "sibling": os.path.exists(%r),
                             "cwd_files": os.listdir(".")}), file=sys.stderr)
def build(collective, nranks):
    return None
'''


@pytest.mark.skipif(not available(), reason="bubblewrap or user/PID namespaces unavailable here")
def test_verify_runs_the_file_contained(user, tmp_path):
    sibling = tmp_path / "secret.txt"
    sibling.write_text("x")
    (tmp_path / "algo.py").write_text(PROBE % str(sibling))
    rc, out, err = user("verify", "algo.py", "--ranks", "4")
    facts = json.loads(next(l for l in err.splitlines() if l.startswith("FACTS "))[6:])
    assert rc == 1 and "not a sim.Program" in out
    assert facts == {"uid": 65534, "ppid": 1, "sibling": False, "cwd_files": []}


def test_verify_without_bwrap_says_what_is_not_contained(user, tmp_path):
    (tmp_path / "algo.py").write_text("def build(c, n):\n    return None\n")
    rc, _, err = user("verify", "algo.py", "--ranks", "4", env={"COLLSIM_NO_BWRAP": "1"})
    assert rc == 1 and sum(l.startswith("not contained:") for l in err.splitlines()) == 1


def test_verify_syntax_error_names_the_users_file(user, tmp_path):
    (tmp_path / "bad.py").write_text("x = (\n")
    refused(user("verify", "bad.py"), "bad.py failed to import", "SyntaxError")
