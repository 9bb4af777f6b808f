"""``python -m roofline_ext.cli``: the same as the ``roofline-ext`` command."""
import sys

from .app import main

sys.exit(main())
