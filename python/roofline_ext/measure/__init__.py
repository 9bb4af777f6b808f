"""Measurement layer: HBM/L2 bandwidth and compute throughput from the native core's verified
kernels, and the one CUDA-event timing loop.
"""
