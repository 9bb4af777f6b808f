"""Device layer: loading the native core, whether this machine can measure (and why not), the GPUs
it has (NVML, no CUDA context), and telemetry sampling.
"""
