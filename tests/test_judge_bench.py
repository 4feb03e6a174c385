"""bench/bench_client.py runs, at a tiny size: a smoke test only (no timing is asserted; the figures
live in bench/README.md)."""

from __future__ import annotations

import runpy
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent / "bench"


def test_bench_client_tiny(capsys) -> None:
    main = runpy.run_path(str(BENCH / "bench_client.py"), run_name="bench_smoke")["main"]
    main(["--questions", "2", "--chunks", "3", "--runs", "2", "--latency", "0", "--concurrency", "4",
          "--listwise", "1,2", "--repeat", "1", "--prompt-cache"])
    out = capsys.readouterr().out
    assert "## cost: 2 questions x 2 runs x 3 chunks" in out and "## throughput" in out, out
    rows = [line.split("|") for line in out.splitlines() if line.startswith("| 1 | 1 run | cold")]
    assert rows and rows[0][4].strip() == rows[0][5].strip() == "8", out  # calls == floor: 2 x (1 + 3)
    assert "| 2 | 1 run | cold | 6 | 6 |" in out, out  # 2 x (1 + ceil(3 / 2))
    assert "python bench/bench_client.py" in (BENCH / "bench_client.py").read_text()
    assert "`python bench/bench_client.py" in (BENCH / "README.md").read_text()
