"""Calibration: plans and runs the burst and sustained measurements of one GPU (through an
injectable backend), and says why a figure may not be trusted.
"""
