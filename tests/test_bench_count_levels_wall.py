"""benchmarks/count_levels_wall.py: the result it writes, with a stand-in for the command."""
from __future__ import annotations

import json
import os
import sys

from fakes.benchmark_loader import load_benchmark


FAKE_PYTHON = """#!{python}
import json, sys
args = sys.argv[1:]
assert args[:3] == ["-m", "roofline_ext.cli", "analyze"], args
out = args[args.index("--json") + 1]
rows = [{{"task": "level1/a", "status": "ok"}}, {{"task": "level3/b", "status": "error"}}]
json.dump({{"isolation": "pool", "tasks": rows}}, open(out, "w"))
sys.exit(1)
"""


def test_writes_walls_median_peak_and_commit(tmp_path):
    kb = tmp_path / "kb"
    for level in ("level1", "level2", "level3"):
        (kb / level).mkdir(parents=True)
    fake = tmp_path / "python"
    fake.write_text(FAKE_PYTHON.format(python=sys.executable))
    os.chmod(fake, 0o755)
    out = tmp_path / "result.json"
    rc = load_benchmark("count_levels_wall.py").main([str(out), "--kernelbench", str(kb), "--repeat", "2", "--python", str(fake)])
    assert rc == 0  # the command's 1 (a task failed) is still a measured run
    result = json.loads(out.read_text())
    assert len(result["walls_s"]) == 2 and result["median_wall_s"] > 0
    assert result["machine"]["cores"] == os.cpu_count()
    assert result["peak_rss_gib"] > 0 and "RUSAGE_CHILDREN" in result["peak_rss_is"]
    assert all(run["tasks"] == 2 and run["failed"] == ["level3/b"] for run in result["runs"])
    assert "date" in result and "git_commit" in result
