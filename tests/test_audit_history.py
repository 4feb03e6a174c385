"""The audit history under stress, with real processes: a full disk (a file-size limit), two
writers at once, and SIGKILL in the middle of writing. Earlier records always survive and the
file stays intact."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from judge_eval.audit.history import History, HistoryError

ROOT = Path(__file__).resolve().parent.parent

#: builds a fake audit (document and frames) of `n_questions` x 2 runs x 3 metrics; shared with
#: the writer subprocesses below
MAKE = textwrap.dedent('''
    import numpy as np, pandas as pd

    def make(audit_id, n_questions=10, started="2025-01-01T00:00:00Z"):
        runs, metrics = ["a", "b"], ["m1", "m2", "m3"]
        rng = np.random.default_rng(abs(hash(audit_id)) % 2**32)
        pq = pd.DataFrame([{"run": r, "question_id": f"q{i}", **{m: float(rng.random()) for m in metrics}}
                           for r in runs for i in range(n_questions)])
        summary = pd.DataFrame([{"run": r, "measure": m, "mean": float(pq[pq.run == r][m].mean()), "ci_low": 0.0,
                                 "ci_high": 1.0, "n": n_questions} for r in runs for m in metrics])
        doc = {"id": audit_id, "started": started, "finished": started, "verdict": "pass", "exit_code": 0,
               "config": {"hash": "sha256:x"}, "dataset": {"fingerprint": "f", "questions_fingerprint": "qf"},
               "judge": {"identity": "j"}, "prompts": {"p": "p@1"}, "settings": {}, "package_version": "0",
               "baseline": None, "checks": []}
        return doc, pq, summary
''')
namespace: dict = {}
exec(MAKE, namespace)
make = namespace["make"]


def complete(history: History) -> dict[str, int]:
    """audit id -> its per-question rows; every recorded audit must have all of them."""
    import sqlite3

    db = sqlite3.connect(history.path)
    try:
        return dict(db.execute("SELECT a.id, (SELECT count(*) FROM question_values q WHERE q.audit_id = a.id) "
                               "FROM audits a").fetchall())
    finally:
        db.close()


def test_record_and_read_back(tmp_path: Path) -> None:
    h = History(tmp_path / "h.sqlite", create=True)
    doc, pq, summary = make("A", started="2025-01-01T00:00:00Z")
    h.record(doc, pq, summary, [{"question_id": "q0", "chunk_id": "c", "human_grade": 2, "judge_grade": 1,
                                 "error": None}])
    doc2, pq2, summary2 = make("B", started="2025-01-02T00:00:00Z")
    h.record(doc2, pq2, summary2)
    assert [a["id"] for a in h.audits()] == ["B", "A"]
    assert h.document("A") == doc and h.resolve("B") == "B"
    values = h.question_values(["A"], ["m2"]).sort_values(["run", "question_id"])
    want = pq[["run", "question_id", "m2"]].sort_values(["run", "question_id"])
    assert np.allclose(values["value"].to_numpy(), want["m2"].to_numpy())
    trend = h.trend("m1", run="a")
    assert list(trend["audit_id"]) == ["A", "B"]
    assert trend["value"].tolist() == pytest.approx([pq[pq.run == "a"]["m1"].mean(), pq2[pq2.run == "a"]["m1"].mean()])
    assert h.last_canary() == ("A", [{"question_id": "q0", "chunk_id": "c", "human_grade": 2, "judge_grade": 1,
                                      "error": None}])
    with pytest.raises(HistoryError, match="no audit 'C'"):
        h.document("C")
    with pytest.raises(HistoryError):  # the same id twice: refused, and the first one is kept
        h.record(doc, pq, summary)
    assert complete(h) == {"A": 60, "B": 60}
    with pytest.raises(HistoryError, match="no such file"):
        History(tmp_path / "missing.sqlite").audits()
    assert not (tmp_path / "missing.sqlite").exists()


def test_an_sqlite_file_of_something_else_is_refused_and_kept(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "other.sqlite"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE t(x)")
    db.commit()
    db.close()
    before = path.read_bytes()
    with pytest.raises(HistoryError, match="not a judge-eval audit history"):
        History(path, create=True).check()
    assert path.read_bytes() == before


def run_python(code: str, *args: str, **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", MAKE + textwrap.dedent(code), *args], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def test_a_full_disk_leaves_the_history_as_it_was(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite"
    h = History(path, create=True)
    h.record(*make("before"))
    size = path.stat().st_size + sum(p.stat().st_size for p in tmp_path.glob("h.sqlite-*"))
    # a child process whose files may not grow past 64 KiB: SQLite meets EFBIG exactly as on a full disk
    proc = run_python(f'''
        import resource, signal, sys
        from judge_eval.audit.history import History, HistoryError
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, ({size + 65536}, {size + 65536}))
        try:
            History(sys.argv[1]).record(*make("big", n_questions=20000))
        except HistoryError as exc:
            print(exc)
            sys.exit(2)
    ''', str(path))
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 2, (out, err)
    assert "Nothing was recorded and earlier audits are untouched" in out
    assert f"history {path}: cannot write" in out
    assert h.integrity() == "ok"
    assert [a["id"] for a in h.audits()] == ["before"] and complete(h) == {"before": 60}
    h.record(*make("after"))  # and the file is still writable
    assert complete(h) == {"before": 60, "after": 60}


def test_two_writers_at_once_lose_nothing(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite"
    History(path, create=True).record(*make("earlier"))
    go = tmp_path / "go"
    code = '''
        import sys, time
        from pathlib import Path
        from judge_eval.audit.history import History
        while not Path(sys.argv[2]).exists():
            time.sleep(0.005)
        h = History(sys.argv[1], timeout=60)
        for i in range(15):
            h.record(*make(f"{sys.argv[3]}-{i}", n_questions=200))
    '''
    procs = [run_python(code, str(path), str(go), name) for name in ("x", "y")]
    go.touch()  # both start writing together
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    h = History(path)
    rows = complete(h)
    assert len(rows) == 31 and rows["earlier"] == 60
    assert all(n == 2 * 3 * 200 for k, n in rows.items() if k != "earlier")
    assert h.integrity() == "ok"


def test_sigkill_while_writing_leaves_only_whole_audits(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite"
    History(path, create=True).record(*make("earlier"))
    proc = run_python('''
        import sys
        from judge_eval.audit.history import History
        h = History(sys.argv[1])
        i = 0
        while True:  # big transactions, one after the other, until killed
            h.record(*make(f"w{i}", n_questions=3000))
            i += 1
    ''', str(path))
    h = History(path)
    deadline = time.monotonic() + 120
    while len(complete(h)) < 3 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert proc.poll() is None, proc.communicate()
    os.kill(proc.pid, signal.SIGKILL)  # most likely inside a transaction: writing is all it does
    proc.wait()
    rows = complete(h)
    assert rows["earlier"] == 60
    assert len(rows) >= 3 and all(n == 2 * 3 * 3000 for k, n in rows.items() if k != "earlier")
    assert h.integrity() == "ok"
    h.record(*make("next"))  # the next audit completes
    assert complete(h)["next"] == 60


def test_waiting_for_a_lock_then_giving_up_names_the_file(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "h.sqlite"
    h = History(path, create=True, timeout=0.1)
    h.record(*make("earlier"))
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(HistoryError) as err:
            h.record(*make("blocked"))
        assert h.audits()[0]["id"] == "earlier"  # readers are not blocked by a writer (WAL)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert str(err.value).startswith(f"history {path}: locked by another process")
    assert [a["id"] for a in h.audits()] == ["earlier"]
    h.record(*make("later"))
    assert sorted(a["id"] for a in h.audits()) == ["earlier", "later"]


def test_newest_means_recorded_last_even_within_the_same_second(tmp_path: Path) -> None:
    h = History(tmp_path / "h.sqlite", create=True)
    for audit_id in ("Z", "A"):  # same start time; an order by id would put Z first
        h.record(*make(audit_id, started="2025-01-01T00:00:00Z"))
    assert [a["id"] for a in h.audits()] == ["A", "Z"]
    assert list(dict.fromkeys(h.trend("m1")["audit_id"])) == ["Z", "A"]  # oldest first
