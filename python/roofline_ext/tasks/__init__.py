"""Tasks: loading a KernelBench-style task file and counting its FLOPs and compulsory bytes without
running it on a GPU.
"""
