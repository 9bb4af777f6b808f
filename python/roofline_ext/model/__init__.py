"""The roofline model: which GPU an analysis is for, the floors t_min = max(FLOPs/peak,
bytes/bandwidth) on every roof, and typed results.
"""
