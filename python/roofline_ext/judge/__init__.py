"""Judging a candidate: is its output the task's, and did the timing see all of its work?

``compare`` (strict and KernelBench comparisons), ``guard`` (what the candidate must not touch),
``streams`` (event time against an all-stream measure) and ``protocol`` (the order that makes
them a defence). Imports torch: only the workers that run candidates import this package.
"""
