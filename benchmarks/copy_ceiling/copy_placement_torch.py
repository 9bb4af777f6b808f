"""The peers under the same placement as copy_ceiling.cu: torch copy_ and the triad
(torch.add(b, c, alpha=s, out=a)) on 4 GiB float32 arrays carved out of one allocation at given byte
offsets, and on torch's own allocations. If placement moved torch's figures but not ours (or the
reverse), a comparison on default allocations would be unfair. Every result is checked against
torch itself.

    python3 copy_placement_torch.py OUT.json
"""
import json
import sys

import torch

ARRAY_BYTES = 4 << 30
SLACK = 256 << 20
N = ARRAY_BYTES // 4
REPS, WARMUP = 30, 3


def timed(fn):
    """Median and best milliseconds over REPS launches, CUDA events around each."""
    for _ in range(WARMUP):
        fn()
    torch.cuda.synchronize()
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(REPS)]
    for start, stop in events:
        start.record()
        fn()
        stop.record()
    torch.cuda.synchronize()
    ms = sorted(start.elapsed_time(stop) for start, stop in events)
    return ms[REPS // 2], ms[0]


def main(out_path):
    pool = torch.empty((3 * ARRAY_BYTES + 3 * SLACK) // 4, dtype=torch.float32, device="cuda")
    pool.uniform_(-1, 1)

    def at(byte_offset):
        return pool[byte_offset // 4: byte_offset // 4 + N]

    rows = []

    def record(what, placement, traffic, median_ms, best_ms):
        row = {"what": what, "placement": placement, "tbps_median": traffic / median_ms / 1e9,
               "tbps_best": traffic / best_ms / 1e9, "reps": REPS}
        rows.append(row)
        print(f"{what:12s} {placement:28s} {row['tbps_median']:.4f} / {row['tbps_best']:.4f} TB/s")

    src = at(0)
    for gap in (0, 1024, 2048, 4096, 8192, 16384, 65536, 3 << 20):
        dst = at(ARRAY_BYTES + gap)
        record("torch copy_", f"dst = src + 4 GiB + {gap}", 2 * ARRAY_BYTES, *timed(lambda: dst.copy_(src)))
        if not torch.equal(dst, src):
            raise SystemExit("copy_: wrong output")
    own_src = torch.empty(N, device="cuda").uniform_(-1, 1)
    own_dst = torch.empty_like(own_src)
    own_c = torch.empty_like(own_src).uniform_(-1, 1)
    record("torch copy_", "own allocations", 2 * ARRAY_BYTES, *timed(lambda: own_dst.copy_(own_src)))
    record("torch triad", "own allocations", 3 * ARRAY_BYTES,
           *timed(lambda: torch.add(own_src, own_c, alpha=1.5, out=own_dst)))
    if not torch.equal(own_dst, torch.add(own_src, own_c, alpha=1.5)):
        raise SystemExit("triad: wrong output")
    del own_src, own_dst, own_c
    for gc, ga in ((0, 0), (2048, 8192), (65536, 0), (3 << 20, 3 << 20)):
        c = at(ARRAY_BYTES + gc)
        a = at(2 * ARRAY_BYTES + SLACK + ga)
        record("torch triad", f"c +{gc}, a +{ga}", 3 * ARRAY_BYTES,
               *timed(lambda: torch.add(src, c, alpha=1.5, out=a)))
    with open(out_path, "w") as f:
        json.dump({"gpu_name": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit("usage: copy_placement_torch.py OUT.json")
    main(sys.argv[1])
