"""Does CUPTI stay attached after torch.profiler? Empty event-to-event time before and after one profile."""
import json
import os

import torch

from roofline_ext.measure import timing

x = torch.randn(1 << 20, device="cuda")
out = {"TEARDOWN_CUPTI": os.environ.get("TEARDOWN_CUPTI"), "before_us": timing.timing_overhead_us()}
from roofline_ext.tasks.opranges import profile_reference  # noqa: E402
r = profile_reference(lambda: x * 2, torch.nn.Identity(), 0, None)
out["profile_kernels"], out["profile_error"] = r.get("kernels"), r.get("error")
out["after_us"] = timing.timing_overhead_us()
out["after2_us"] = timing.timing_overhead_us()
print(json.dumps(out))
