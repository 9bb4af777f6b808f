"""Sub-commands of ``roofline-ext``: one module each, each with ``register(subparsers)``.

A module's ``register`` adds its parser and sets ``func`` to a handler ``run(args) -> int``
(the exit code). Handlers raise ``RooflineError`` for anything the user caused.
"""
