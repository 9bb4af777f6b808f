"""Prints what the copy-ceiling run says and writes it as markdown beside the JSON:
per group the best and worst configuration, the peers under the same placements, and, from
Nsight Compute, the DRAM bytes and the share of DRAM cycles the data bus was busy per kernel.

    python3 summarize.py OURS.json TORCH.json [NCU.txt]
"""
import csv
import json
import sys
from collections import defaultdict
from pathlib import Path


def groups_table(ours):
    by_group = defaultdict(list)
    for r in ours["results"]:
        by_group[r["group"]].append(r)
    lines = ["| group | configurations | best median TB/s (config) | worst median TB/s (config) |", "|---|---|---|---|"]
    for group, rows in by_group.items():
        ok = [r for r in rows if not r["mismatches"]]
        bad = len(rows) - len(ok)
        if not ok:
            lines.append(f"| {group} | {len(rows)} | all wrote wrong output | |")
            continue
        best = max(ok, key=lambda r: r["tbps_median"])
        worst = min(ok, key=lambda r: r["tbps_median"])
        extra = f" ({bad} wrong)" if bad else ""
        lines.append(f"| {group} | {len(rows)}{extra} | {best['tbps_median']:.3f} ({best['name']}) | "
                     f"{worst['tbps_median']:.3f} ({worst['name']}) |")
    return lines


def torch_table(peers):
    lines = ["| peer | placement | median / best TB/s |", "|---|---|---|"]
    for r in peers["rows"]:
        lines.append(f"| {r['what']} | {r['placement']} | {r['tbps_median']:.3f} / {r['tbps_best']:.3f} |")
    return lines


def ncu_table(path):
    metrics = defaultdict(dict)
    order = []
    with open(path, newline="") as f:
        rows = [line for line in f if line.startswith('"')]
    for row in csv.DictReader(rows):
        key = (row["ID"], row["Kernel Name"].split("(")[0])
        if key not in metrics:
            order.append(key)
        metrics[key][row["Metric Name"]] = float(row["Metric Value"].replace(",", ""))
    lines = ["| kernel | time (µs) | DRAM read GB | DRAM write GB | TB/s | bus busy (% of DRAM cycles) | reads / writes share of busy |",
             "|---|---|---|---|---|---|---|"]
    for key in order:
        m = metrics[key]
        t_ns = m["gpu__time_duration.sum"]
        rd, wr = m["dram__bytes_read.sum"], m["dram__bytes_write.sum"]
        busy = m["dram__cycles_active.avg"] / m["dram__cycles_elapsed.avg"]
        act = m["dram__cycles_active.avg"] or 1.0
        lines.append(f"| {key[1]} | {t_ns / 1e3:.0f} | {rd / 1e9:.2f} | {wr / 1e9:.2f} | {(rd + wr) / t_ns / 1e3:.3f} | "
                     f"{100 * busy:.1f} | {100 * m['dram__cycles_active_read.avg'] / act:.0f}% / "
                     f"{100 * m['dram__cycles_active_write.avg'] / act:.0f}% |")
    return lines


def main(argv):
    if len(argv) not in (3, 4):
        raise SystemExit("usage: summarize.py OURS.json TORCH.json [NCU.txt]")
    ours = json.loads(Path(argv[1]).read_text())
    peers = json.loads(Path(argv[2]).read_text())
    out = [f"# Copy ceiling on {ours['gpu_name']} ({ours['uuid']})", "",
           f"4 GiB arrays; every output checked on the device; {ours['wrong_outputs']} configurations wrote wrong output.", ""]
    out += groups_table(ours) + [""] + torch_table(peers) + [""]
    if len(argv) == 4:
        out += ["DRAM counters (Nsight Compute, one launch each, clocks not locked):", ""] + ncu_table(argv[3]) + [""]
    text = "\n".join(out)
    print(text)
    Path(argv[1]).with_suffix(".md").write_text(text)


if __name__ == "__main__":
    main(sys.argv)
