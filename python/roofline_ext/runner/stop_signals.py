"""SIGTERM and SIGHUP stop a batch as Ctrl-C does.

Without a handler either signal ends the process on the spot: the results written so far stay
(each is written as it comes), but nothing says so, and the pool's workers are left to notice
that the runner is gone. :func:`stop_on_signals` turns them into :class:`Stopped`, a
``KeyboardInterrupt``, so the batch takes the Ctrl-C path: the pool closes, every result finished
stays in the outputs, and the batch says in one line what was kept.
"""
from __future__ import annotations

import contextlib
import signal
import threading
from typing import Any, Iterator

_SIGNALS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name))


class Stopped(KeyboardInterrupt):
    """The run was stopped by a signal; ``name`` is the signal's (``SIGTERM``)."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


@contextlib.contextmanager
def stop_on_signals() -> Iterator[None]:
    """While inside, SIGTERM and SIGHUP raise :class:`Stopped` in the main thread (the first one:
    a second, while the pool shuts down, is ignored). Elsewhere than the main thread: nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, _frame: Any) -> None:
        for sig in _SIGNALS:
            signal.signal(sig, signal.SIG_IGN)
        raise Stopped(signal.Signals(signum).name)

    saved = {sig: signal.signal(sig, stop) for sig in _SIGNALS}
    try:
        yield
    finally:
        for sig, old in saved.items():
            signal.signal(sig, old)


def stopped_line(exc: BaseException, finished: int, total: int) -> str:
    """What a stopped batch kept, in one line."""
    how = f"stopped by {exc.name}" if isinstance(exc, Stopped) else "interrupted"
    return (f"roofline-ext: {how}: {finished} of {total} task(s) finished; their results are in the "
            f"outputs (complete: false)")
