"""Loading task files: every way a file can be bad gives a one-line TaskError naming the file (and the
line, where there is one); good files load as modules of their own and leave nothing behind."""
from __future__ import annotations

import sys
import textwrap

import pytest
import torch  # noqa: F401  (tasks import it; CI has it: no silent skip)

from roofline_ext.tasks.counting import count_task
from roofline_ext.errors import UserError
from roofline_ext.tasks.loading import Task, TaskError, find_task_files, load_task

GOOD = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return x * 2

def get_inputs():
    return [torch.randn(16)]

def get_init_inputs():
    return []
"""


def write(tmp_path, name, body):
    p = tmp_path / name
    p.write_text(textwrap.dedent(body))
    return p


def one_line(exc: BaseException) -> str:
    text = str(exc)
    assert "\n" not in text, text
    assert "Traceback" not in text
    return text


def test_good_task_loads(tmp_path):
    p = write(tmp_path, "good.py", GOOD)
    task = load_task(p)
    assert isinstance(task, Task)
    assert task.name == "good"
    assert task.model_cls.__name__ == "Model"
    assert not task.has_model_new
    assert task.module.__name__ in sys.modules  # while in use, inspect/dataclasses can find it
    assert len(task.inputs()) == 1 and task.init_inputs() == []
    task.unload()
    assert task.module.__name__ not in sys.modules


def test_task_error_is_a_user_error():
    assert issubclass(TaskError, UserError)


def test_same_stem_twice_gives_two_modules(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    p1 = write(tmp_path / "a", "task.py", GOOD)
    p2 = write(tmp_path / "b", "task.py", GOOD.replace("x * 2", "x * 3"))
    t1, t2 = load_task(p1), load_task(p2)
    assert t1.module.__name__ != t2.module.__name__
    assert t1.model_cls is not t2.model_cls


def test_sys_path_restored_and_sibling_helper_forgotten(tmp_path):
    write(tmp_path, "helper_for_task.py", "SCALE = 3\n")
    p = write(tmp_path, "uses_helper.py", GOOD.replace("import torch.nn as nn",
                                                       "import torch.nn as nn\nimport helper_for_task"))
    before = list(sys.path)
    task = load_task(p)
    assert sys.path == before
    assert "helper_for_task" in sys.modules
    task.unload()
    assert "helper_for_task" not in sys.modules


def test_one_job_process_does_not_track_helpers(tmp_path):
    # forget_helpers=False (a counting worker that exits after its one job): the task loads the
    # same, and unload forgets only the task's own module (the process ends with it anyway)
    write(tmp_path, "helper_kept.py", "SCALE = 3\n")
    p = write(tmp_path, "uses_kept.py", GOOD.replace("import torch.nn as nn", "import torch.nn as nn\nimport helper_kept"))
    task = load_task(p, forget_helpers=False)
    try:
        assert task.model_cls is not None and task._owned_modules == []
        task.unload()
        assert task.module.__name__ not in sys.modules and "helper_kept" in sys.modules
    finally:
        sys.modules.pop("helper_kept", None)


def test_once_worker_sets_the_one_job_flag(monkeypatch):
    import socket

    from roofline_ext.runner import jobs, worker

    monkeypatch.setattr(jobs, "PROCESS_ENDS_WITH_JOB", False)
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    b.close()  # no job comes: serve_once returns at the channel's end, the flag set
    try:
        worker.serve_once(a)
    finally:
        a.close()
    assert jobs.PROCESS_ENDS_WITH_JOB is True


def test_model_new_detected(tmp_path):
    p = write(tmp_path, "cand.py", GOOD + "\nclass ModelNew(Model):\n    pass\n")
    assert load_task(p).has_model_new


def test_missing_get_init_inputs_means_no_arguments(tmp_path):
    p = write(tmp_path, "noinit.py", GOOD.replace("def get_init_inputs():\n    return []\n", ""))
    task = load_task(p)
    assert task.init_inputs() == []
    assert count_task(task).notes  # says so


# --- every bad-file case ---------------------------------------------------------------------------------

def test_missing_file(tmp_path):
    with pytest.raises(TaskError, match="no such file") as e:
        load_task(tmp_path / "nope.py")
    assert e.value.kind == "missing"
    one_line(e.value)


def test_directory_is_not_a_task(tmp_path):
    with pytest.raises(TaskError, match="is a directory") as e:
        load_task(tmp_path)
    assert e.value.kind == "missing"


def test_syntax_error_names_the_line(tmp_path):
    p = write(tmp_path, "syn.py", "import torch\n\nclass Model(torch.nn.Module)\n    pass\n")
    with pytest.raises(TaskError) as e:
        load_task(p)
    assert e.value.kind == "syntax"
    msg = one_line(e.value)
    assert f"{p}:3: syntax error" in msg


def test_exception_at_import_names_type_message_and_line(tmp_path):
    p = write(tmp_path, "imp.py", "import torch\nx = 1\nraise ValueError('bad constant')\n")
    with pytest.raises(TaskError) as e:
        load_task(p)
    assert e.value.kind == "import"
    assert one_line(e.value) == f"{p}:3: loading failed: ValueError: bad constant"


def test_missing_module_import(tmp_path):
    # one line naming the module and the command that installs it (issue 14), not the exception
    p = write(tmp_path, "mod.py", "import torch\nimport no_such_module_here_xyz.layers\n")
    with pytest.raises(TaskError) as e:
        load_task(p)
    assert str(e.value) == (f"{p}:2: needs the Python module `no_such_module_here_xyz`, which is not "
                            "installed: pip install no_such_module_here_xyz")
    assert e.value.kind == "import"
    one_line(e.value)


def test_missing_module_with_another_pip_name(tmp_path, monkeypatch):
    # as for `import cv2` (pip install opencv-python), with a module that is surely not installed
    import roofline_ext.tasks.loading as loading

    monkeypatch.setitem(loading._PIP_NAMES, "no_such_cv_xyz", "no-such-cv-python")
    p = write(tmp_path, "cv.py", GOOD.replace("return x * 2", "import no_such_cv_xyz; return x"))
    with pytest.raises(TaskError, match=r"Model.forward\(\) failed: needs the Python module `no_such_cv_xyz`, "
                                        r"which is not installed: pip install no-such-cv-python"):
        count_task(p)


def test_sys_exit_at_import_is_caught(tmp_path):
    p = write(tmp_path, "exit.py", "import sys\nsys.exit(3)\n")
    with pytest.raises(TaskError, match=r"called sys.exit\(3\)") as e:
        load_task(p)
    assert e.value.kind == "exit"


def test_no_model(tmp_path):
    p = write(tmp_path, "nomodel.py", GOOD.replace("class Model(", "class Other("))
    with pytest.raises(TaskError, match="defines no `Model`") as e:
        load_task(p)
    assert e.value.kind == "no-model"
    one_line(e.value)


def test_model_not_a_module(tmp_path):
    p = write(tmp_path, "notmod.py", GOOD + "\nModel = 42\n")
    with pytest.raises(TaskError, match="must be a torch.nn.Module subclass") as e:
        load_task(p)
    assert e.value.kind == "bad-model"


def test_no_get_inputs(tmp_path):
    p = write(tmp_path, "noinputs.py", GOOD.replace("def get_inputs", "def other_inputs"))
    with pytest.raises(TaskError, match="defines no `get_inputs") as e:
        load_task(p)
    assert e.value.kind == "no-get-inputs"


def test_failed_load_leaves_no_module(tmp_path):
    p = write(tmp_path, "nomodel2.py", GOOD.replace("class Model(", "class Other("))
    before = set(sys.modules)
    with pytest.raises(TaskError):
        load_task(p)
    assert not [m for m in set(sys.modules) - before if m.startswith("_roofline_task_")]


def test_get_inputs_raising_names_type_message_and_line(tmp_path):
    p = write(tmp_path, "raises.py", GOOD.replace(
        "    return [torch.randn(16)]", "    raise RuntimeError('no data today')"))
    with pytest.raises(TaskError) as e:
        count_task(p)
    assert e.value.kind == "get_inputs"
    assert one_line(e.value) == f"{p}:10: get_inputs() failed: RuntimeError: no data today"


def test_get_inputs_wrong_type(tmp_path):
    p = write(tmp_path, "tensor.py", GOOD.replace("return [torch.randn(16)]", "return torch.randn(16)"))
    with pytest.raises(TaskError, match=r"get_inputs\(\) must return a list or tuple, got a Tensor"):
        count_task(p)


def test_get_init_inputs_raising(tmp_path):
    p = write(tmp_path, "initraise.py", GOOD.replace("    return []", "    return [1 / 0]"))
    with pytest.raises(TaskError, match="get_init_inputs.* ZeroDivisionError: division by zero") as e:
        count_task(p)
    assert e.value.kind == "get_init_inputs"


def test_constructor_raising(tmp_path):
    p = write(tmp_path, "ctor.py", GOOD.replace(
        "class Model(nn.Module):", "class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        raise KeyError('width')\n"))
    with pytest.raises(TaskError, match=r"ctor.py:8: Model\(\*get_init_inputs\(\)\) failed: KeyError") as e:
        count_task(p)
    assert e.value.kind == "init"


def test_forward_raising(tmp_path):
    p = write(tmp_path, "fwd.py", GOOD.replace("return x * 2", "return x @ torch.randn(3, 3)"))
    with pytest.raises(TaskError, match=r"fwd.py:7: Model.forward\(\) failed: RuntimeError") as e:
        count_task(p)
    assert e.value.kind == "forward"
    one_line(e.value)


def test_sys_exit_in_forward_is_a_task_error(tmp_path):
    p = write(tmp_path, "fwdexit.py", GOOD.replace("return x * 2", "import sys; sys.exit('bye')"))
    with pytest.raises(TaskError, match=r"called sys.exit\('bye'\)"):
        count_task(p)


def test_data_dependent_op_is_unsupported(tmp_path):
    p = write(tmp_path, "nonzero.py", GOOD.replace("return x * 2", "return torch.nonzero(x)"))
    with pytest.raises(TaskError, match=r"nonzero.py:7: op `aten.nonzero.default` cannot be counted without "
                                        r"running it: its output shape depends on tensor values") as e:
        count_task(p)
    assert e.value.kind == "unsupported-op"


def test_value_dependent_branch_is_unsupported(tmp_path):
    p = write(tmp_path, "branch.py", GOOD.replace("return x * 2", "return x if x.sum() > 0 else -x"))
    with pytest.raises(TaskError, match="its result depends on tensor values") as e:
        count_task(p)
    assert e.value.kind == "unsupported-op"


def test_op_without_fake_implementation_is_unsupported(tmp_path):
    # a custom op with a CPU kernel only: running it on fake tensors is impossible, and running the
    # real kernel would need real (possibly huge) inputs
    p = write(tmp_path, "custom.py", GOOD.replace("import torch.nn as nn", """import torch.nn as nn

@torch.library.custom_op("roofline_ext_test::twice", mutates_args=())
def twice(x: torch.Tensor) -> torch.Tensor:
    return x * 2
""").replace("return x * 2\n\ndef get_inputs", "return twice(x)\n\ndef get_inputs"))
    with pytest.raises(TaskError, match="cannot be counted without running it.*no fake impl") as e:
        count_task(p)
    assert e.value.kind == "unsupported-op"
    one_line(e.value)


def test_find_task_files_natural_order(tmp_path):
    for name in ("10_b.py", "2_a.py", "1_c.py", "__init__.py", "_private.py", "notes.txt"):
        (tmp_path / name).write_text("")
    (tmp_path / "sub").mkdir()
    assert [p.name for p in find_task_files(tmp_path)] == ["1_c.py", "2_a.py", "10_b.py"]


def test_find_task_files_in_a_folder_of_folders(tmp_path):
    # KernelBench's KernelBench/ with level1/ ... inside; hidden folders, caches and venvs are skipped
    for rel in ("level1/10_b.py", "level1/1_a.py", "level10/1_z.py", "level2/2_c.py", "top.py",
                ".git/hook.py", "__pycache__/cached.py", "venv/lib/site.py", "level2/_helper.py"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(GOOD)
    (tmp_path / "venv" / "pyvenv.cfg").write_text("")
    found = [p.relative_to(tmp_path).as_posix() for p in find_task_files(tmp_path)]
    assert found == ["level1/1_a.py", "level1/10_b.py", "level2/2_c.py", "level10/1_z.py", "top.py"]


def test_batch_results_are_named_by_relative_path(tmp_path):
    from roofline_ext.runner.analyze import analyze_batch
    from roofline_ext.tasks.loading import task_names

    for rel in ("level1/1_a.py", "level2/1_a.py"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(GOOD)
    (tmp_path / "level2" / "2_bad.py").write_text("raise ValueError('no')\n")
    paths = find_task_files(tmp_path)
    results = analyze_batch(paths, "H100", measured=False)
    assert [r["task"] for r in results] == ["level1/1_a", "level2/1_a", "level2/2_bad"]
    assert [r["status"] for r in results] == ["ok", "ok", "error"]
    # files of one folder keep their stems
    assert task_names([tmp_path / "level1" / "1_a.py", tmp_path / "level1" / "x.py"]) == ["1_a", "x"]
