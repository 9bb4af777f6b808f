"""The ``roofline-ext`` command: argument parsing and printing only; one module per sub-command
under ``commands``.
"""
from __future__ import annotations

from .app import main

__all__ = ["main"]
