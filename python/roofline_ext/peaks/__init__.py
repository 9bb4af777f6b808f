"""Peak sources: the registry of units and dtypes, the datasheet table, clock-derived peaks, the
measured-peaks type and the calibration cache.
"""
