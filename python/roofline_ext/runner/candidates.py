"""Which candidate files of ``--new DIR`` belong to which task.

A candidate matches a task in one of two ways:

* the same file name: ``DIR/19_ReLU.py`` is a candidate for ``level1/19_ReLU.py``;
* KernelBench's run naming, ``level_{L}_problem_{N}_sample_{S}_kernel.py``: problem ``N`` is the
  task whose file name starts with ``N_``, and each sample ``S`` is a candidate of its own. The
  level ``L`` must be the task folder's (``.../level1`` is level 1); a folder without a level in
  its name takes candidates of one level only, since problem numbers repeat across levels.

Files that match no task are returned apart, so the caller can say so rather than drop them.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from ..errors import UserError

KERNELBENCH_NAME = re.compile(r"^level_(\d+)_problem_(\d+)_sample_(\d+)_kernel\.py$")
_FOLDER_LEVEL = re.compile(r"level_?(\d+)$", re.IGNORECASE)
_PROBLEM = re.compile(r"^(\d+)_")


@dataclass(frozen=True)
class Candidate:
    """A file defining ``ModelNew`` for a task; ``path`` None means the task file's own ``ModelNew``."""

    path: Path | None
    sample: int | None = None

    @property
    def label(self) -> str:
        if self.path is None:
            return "ModelNew in task"
        return f"sample {self.sample}" if self.sample is not None else self.path.name


def folder_level(folder: Path) -> int | None:
    m = _FOLDER_LEVEL.search(folder.name)
    return int(m.group(1)) if m else None


def match_candidates(tasks: Sequence[Path], folder: Path) -> tuple[dict[Path, list[Candidate]], list[Path]]:
    """``(task -> its candidates, sorted by sample; candidate files that match no task)``."""
    files = sorted(p for p in Path(folder).iterdir() if p.is_file() and p.suffix == ".py"
                   and not p.name.startswith((".", "_")))
    by_name = {t.name: t for t in tasks}
    by_problem: dict[int, Path] = {}
    for t in tasks:
        m = _PROBLEM.match(t.name)
        if m:
            by_problem.setdefault(int(m.group(1)), t)
    level = _task_level(tasks, files)
    matched: dict[Path, list[Candidate]] = {}
    unmatched: list[Path] = []
    for f in files:
        task, sample = _match(f, by_name, by_problem, level)
        if task is None:
            unmatched.append(f)
        else:
            matched.setdefault(task, []).append(Candidate(f, sample))
    for cands in matched.values():
        cands.sort(key=_sample_order)
    return matched, unmatched


def _sample_order(c: Candidate) -> tuple[bool, int, str]:
    # Candidates matched from files always have a path; None is only ever the task's own ModelNew.
    assert c.path is not None
    return c.sample is None, c.sample or 0, c.path.name


def _task_level(tasks: Sequence[Path], files: Sequence[Path]) -> int | None:
    levels = {folder_level(t.parent) for t in tasks} - {None}
    if len(levels) == 1:
        return levels.pop()
    named = {int(m.group(1)) for f in files if (m := KERNELBENCH_NAME.match(f.name))}
    if len(named) > 1:
        raise UserError(f"the candidates are for levels {', '.join(map(str, sorted(named)))} and the task "
                        "folder's name gives no level (levelN): give one level's candidates at a time")
    return named.pop() if named else None


def _match(f: Path, by_name, by_problem, level: int | None) -> tuple[Path | None, int | None]:
    if f.name in by_name:
        return by_name[f.name], None
    m = KERNELBENCH_NAME.match(f.name)
    if m is None or (level is not None and int(m.group(1)) != level):
        return None, None
    return by_problem.get(int(m.group(2))), int(m.group(3))
