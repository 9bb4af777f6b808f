"""The copy-ceiling summarizer (benchmarks/copy_ceiling/summarize.py) on small made-up inputs:
best/worst per group, wrong outputs never ranked, Nsight Compute's CSV rows read among the other
lines ncu prints."""
import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def load_summarize():
    spec = importlib.util.spec_from_file_location("copy_ceiling_summarize", ROOT / "benchmarks/copy_ceiling/summarize.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def row(group, name, tbps, mismatches=0):
    return {"group": group, "name": name, "tbps_median": tbps, "tbps_best": tbps, "cv": 0.001, "mismatches": mismatches}


NCU = """==PROF== Connected to process 1
dram_counters: every output verified
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"
"0","1","dc","h","k_copy(const uint4 *, uint4 *, unsigned long)","1","7","(256, 1, 1)","(1048576, 1, 1)","0","9.0","Command line profiler metrics","dram__bytes_read.sum","byte","4,294,967,296"
"0","1","dc","h","k_copy(const uint4 *, uint4 *, unsigned long)","1","7","(256, 1, 1)","(1048576, 1, 1)","0","9.0","Command line profiler metrics","dram__bytes_write.sum","byte","4,294,967,296"
"0","1","dc","h","k_copy(const uint4 *, uint4 *, unsigned long)","1","7","(256, 1, 1)","(1048576, 1, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","nsecond","2,000,000"
"0","1","dc","h","k_copy(const uint4 *, uint4 *, unsigned long)","1","7","(256, 1, 1)","(1048576, 1, 1)","0","9.0","Command line profiler metrics","dram__cycles_active.avg","cycle","870"
"0","1","dc","h","k_copy(const uint4 *, uint4 *, unsigned long)","1","7","(256, 1, 1)","(1048576, 1, 1)","0","9.0","Command line profiler metrics","dram__cycles_active_read.avg","cycle","435"
"0","1","dc","h","k_copy(const uint4 *, uint4 *, unsigned long)","1","7","(256, 1, 1)","(1048576, 1, 1)","0","9.0","Command line profiler metrics","dram__cycles_active_write.avg","cycle","435"
"0","1","dc","h","k_copy(const uint4 *, uint4 *, unsigned long)","1","7","(256, 1, 1)","(1048576, 1, 1)","0","9.0","Command line profiler metrics","dram__cycles_elapsed.avg","cycle","1,000"
"""


def test_summary_ranks_groups_skips_wrong_outputs_and_reads_ncu(tmp_path, capsys):
    summarize = load_summarize()
    ours = {"gpu_name": "GPU X", "uuid": "GPU-1", "wrong_outputs": 1,
            "results": [row("placement", "gap 0", 4.30), row("placement", "gap 1024", 4.32),
                        row("placement", "gap 2048", 9.99, mismatches=5), row("order", "2 windows", 4.10)]}
    peers = {"rows": [{"what": "torch copy_", "placement": "own allocations", "tbps_median": 4.29, "tbps_best": 4.30}]}
    (tmp_path / "ours.json").write_text(json.dumps(ours))
    (tmp_path / "torch.json").write_text(json.dumps(peers))
    (tmp_path / "ncu.txt").write_text(NCU)
    summarize.main(["summarize.py", str(tmp_path / "ours.json"), str(tmp_path / "torch.json"), str(tmp_path / "ncu.txt")])
    text = (tmp_path / "ours.md").read_text()
    assert text.strip() == capsys.readouterr().out.strip()
    placement = next(line for line in text.splitlines() if line.startswith("| placement"))
    assert "4.320 (gap 1024)" in placement and "4.300 (gap 0)" in placement
    assert "9.99" not in text and "(1 wrong)" in placement
    copy = next(line for line in text.splitlines() if line.startswith("| k_copy"))
    # 8.59 GB in 2 ms = 4.295 TB/s; the bus busy 870 of 1000 cycles.
    assert "| 4.295 |" in copy and "| 87.0 |" in copy and "50% / 50%" in copy
    assert "| torch copy_ | own allocations | 4.290 / 4.300 |" in text
