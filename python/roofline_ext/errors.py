"""Exceptions the package raises on purpose.

Every error a user can cause (bad arguments, a broken task file, no GPU) is a ``RooflineError``
with a one-line message; the CLI prints that line and exits with the error's ``exit_code`` instead
of a traceback. Anything else escaping is a bug and keeps its traceback.
"""
from __future__ import annotations


class RooflineError(Exception):
    """Base class: a failure with a one-line, user-facing reason."""

    exit_code = 2


class UserError(RooflineError):
    """Bad input: an argument, a file, a name the user gave."""

    exit_code = 2


class GpuUnavailableError(RooflineError):
    """A measurement was asked for but no usable GPU is there; carries the availability reason."""

    exit_code = 3

    def __init__(self, availability):
        self.availability = availability
        super().__init__(availability.message)
