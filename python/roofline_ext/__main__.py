"""``python -m roofline_ext``: the ``roofline-ext`` command (the same as ``python -m roofline_ext.cli``).

Run through ``runpy`` rather than imported: this module sits at the package root (rank 0 in the
layer order), and the command is the top layer; running the CLI package as a program is what
``python -m roofline_ext.cli`` does too, so both spellings take one path.
"""
import runpy

runpy.run_module("roofline_ext.cli", run_name="__main__", alter_sys=True)
