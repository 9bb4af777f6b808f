#!/usr/bin/env bash
# Builds and runs the copy-ceiling experiment on GPU 0 and writes its results under
# benchmarks/results/: copy-ceiling-<date>.json (ours), copy-ceiling-torch-<date>.json (the peers
# under the same placement), copy-ceiling-ncu-<date>.txt (DRAM counters, when ncu is there).
#   benchmarks/copy_ceiling/run.sh        (scripts/gpu-check ceiling runs it)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
results=$here/../results
today=$(date -u +%F)
build=$(mktemp -d)
arch=${ROOFLINE_CUDA_ARCHS:-90a}
status=0
mkdir -p "$results"
for prog in copy_ceiling dram_counters; do
  nvcc -O3 -std=c++17 -gencode=arch=compute_$arch,code=sm_$arch -o "$build/$prog" "$here/$prog.cu" || exit 1
done
"$build/copy_ceiling" "$results/copy-ceiling-$today.json" || status=1
python3 "$here/copy_placement_torch.py" "$results/copy-ceiling-torch-$today.json" || status=1
if command -v ncu >/dev/null; then
  # Second round only (the first warms up); DRAM clocks left alone so the figures are the real ones.
  ncu --clock-control none --launch-skip 6 --launch-count 5 --csv --print-units base \
      --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,dram__cycles_active.avg,dram__cycles_active_read.avg,dram__cycles_active_write.avg,dram__cycles_elapsed.avg,dram__throughput.avg.pct_of_peak_sustained_elapsed \
      "$build/dram_counters" > "$results/copy-ceiling-ncu-$today.txt" || status=1
  grep -h "dram_counters:" "$results/copy-ceiling-ncu-$today.txt"
  python3 "$here/summarize.py" "$results/copy-ceiling-$today.json" "$results/copy-ceiling-torch-$today.json" \
      "$results/copy-ceiling-ncu-$today.txt" || status=1
else
  echo "ncu not found: DRAM counters skipped"
  "$build/dram_counters" || status=1
  python3 "$here/summarize.py" "$results/copy-ceiling-$today.json" "$results/copy-ceiling-torch-$today.json" || status=1
fi
rm -rf "$build"
exit $status
