"""A fork server for tests/test_repo_bad_input.py: the CLI in a process of its own, without paying for
the torch import each time.

Started once (``python tests/fakes/cli_zygote.py``), it imports torch and the CLI, then reads one JSON
request per line on stdin: ``{"args", "cwd", "env", "stdout", "stderr"}``. For each it forks a
child that points descriptors 0/1/2 at /dev/null and the two files, runs the CLI's ``main`` as
``python -m roofline_ext.cli`` would, and exits with its code; the server waits and answers one
JSON line ``{"code": N}``. A child is a real process: its descriptors, its exit code, what it
writes and what it leaves on disk are its own, as with a fresh interpreter, only torch is already
imported. Cases that must prove torch is *not* needed run in fresh interpreters instead.

The server runs no thread and no torch operation before forking, so each child starts from a
single-threaded process.

``--no-torch``: torch made unimportable (``sys.modules["torch"] = None``) before anything is
imported, and only the CLI and the chart modules warmed: the children are the "cheap errors come
before torch" cases, which would otherwise each start a fresh interpreter (0.4 s) to prove it.
"""
from __future__ import annotations

import json
import os
import sys
import traceback


def _warm_without_torch() -> None:
    sys.modules["torch"] = None  # type: ignore[assignment]
    from roofline_ext.cli.app import build_parser

    build_parser()  # every command module imported, as each run does
    _warm_matplotlib()


def _warm_matplotlib() -> None:
    """What a run with ``--plot`` (or ``calibrate --show --plot``) imports before its first check:
    report/charts.py's ``load_matplotlib`` (1-1.5 s of every such child otherwise; 17 no-torch cases).
    The same modules, no backend chosen and no figure made: each child still does all of that."""
    from roofline_ext.report.charts import load_matplotlib

    load_matplotlib()


def _warm() -> None:
    import torch  # noqa: F401
    import torch._dynamo  # noqa: F401  (imported by the first count: 0.7 s of every fresh run)
    from torch._subclasses.fake_tensor import FakeTensorMode  # noqa: F401
    from torch.utils.flop_counter import FlopCounterMode  # noqa: F401

    import roofline_ext.cli.app  # noqa: F401
    import roofline_ext.runner.analyze  # noqa: F401

    _warm_matplotlib()


def _child(req: dict) -> None:
    code = 1
    try:
        os.chdir(req["cwd"])
        os.environ.clear()
        os.environ.update(req["env"])
        for fd, path, flags in ((0, os.devnull, os.O_RDONLY),
                                (1, req["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
                                (2, req["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)):
            new = os.open(path, flags, 0o644)
            os.dup2(new, fd)
            os.close(new)
        if req.get("close_stdout"):  # as `... >&-` starts a process: no descriptor 1, sys.stdout None
            os.close(1)
            sys.stdout = None  # type: ignore[assignment]
        sys.argv = ["roofline-ext", *req["args"]]
        from roofline_ext.cli.app import main

        code = main(req["args"])
    except SystemExit as exc:  # argparse
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:  # what the interpreter would print and exit 1 for
        traceback.print_exc()
        code = 1
    for stream in (sys.stdout, sys.stderr):
        if stream is None:
            continue
        try:
            stream.flush()
        except Exception as exc:  # as the interpreter does at exit: exit 120
            print(f"Exception ignored on flushing sys.stdout: {exc!r}", file=sys.stderr)
            code = 120
    os._exit(code)


def main() -> int:
    if "--no-torch" in sys.argv[1:]:
        _warm_without_torch()
    else:
        _warm()
    for line in sys.stdin:
        req = json.loads(line)
        sys.stdout.flush()
        pid = os.fork()
        if pid == 0:
            _child(req)
        _, status = os.waitpid(pid, 0)
        code = os.waitstatus_to_exitcode(status)
        sys.stdout.write(json.dumps({"code": code}) + "\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
