// The timing worker's state check in the native core (host code; every build has it). After every
// task the worker asks whether any loaded module's code changed (python/roofline_ext/runner/
// fingerprint.py): some 220,000 namespace entries and 46,000 functions' code, defaults and
// attribute dicts, compared by identity with what was taken before the first task. In Python
// (map(operator.is_, ...) over chained dict views, attrgetter per function) that took 0.24 s a task
// on the H200's host in a batch of KernelBench, half the wall of the 250 reference timings
// (2026-12-02). Here each container is walked with the C API (PyDict_Next, the list's items) and
// each function's fields are read directly: pointer comparisons only, never a call into Python
// code, so nothing a task defined can run during the check.
//
// The caller keeps every object it compares against referenced (the fingerprint's tuples), so no
// address can be reused by a new object while it is compared. The GIL is held throughout: no other
// thread changes a container while it is walked.
#include <pybind11/pybind11.h>

namespace py = pybind11;

namespace roofline {
namespace {

// Whether `iterable` yields exactly `n` objects, the same ones in the same order as tuple[at, at+n).
// The iteration protocol: for a container of another type (a dict subclass such as OrderedDict,
// whose order is its own; a set), as Python iterates it.
bool same_iterated(PyObject* iterable, Py_ssize_t n, PyObject* tuple, Py_ssize_t at) {
  PyObject* it = PyObject_GetIter(iterable);
  if (it == nullptr) {
    PyErr_Clear();
    return false;
  }
  bool same = true;
  Py_ssize_t i = at;
  for (PyObject* item; same && (item = PyIter_Next(it)) != nullptr; ++i) {
    same = i < at + n && item == PyTuple_GET_ITEM(tuple, i);
    Py_DECREF(item);
  }
  Py_DECREF(it);
  if (PyErr_Occurred()) {  // changed while iterated, or an iterator that raised
    PyErr_Clear();
    return false;
  }
  return same && i == at + n;
}

// Whether a space still holds exactly `n` entries, the same key and value objects in the same
// order, as keys[at, at+n) and values[at, at+n). An exact dict by PyDict_Next (insertion order, as
// Python iterates it), an exact list by position (its keys are its items, as Python's chain of
// them has it); anything else through the iteration protocol: its keys from `live`, its values
// from `view` (the values() view the Python comparison reads).
bool same_space(PyObject* live, PyObject* view, Py_ssize_t n, PyObject* keys, PyObject* values, Py_ssize_t at) {
  if (PyDict_CheckExact(live)) {
    if (PyDict_GET_SIZE(live) != n) return false;
    Py_ssize_t pos = 0, i = at;
    PyObject *key, *value;
    while (PyDict_Next(live, &pos, &key, &value)) {
      if (key != PyTuple_GET_ITEM(keys, i) || value != PyTuple_GET_ITEM(values, i)) return false;
      ++i;
    }
    return i == at + n;
  }
  if (PyList_CheckExact(live)) {
    if (PyList_GET_SIZE(live) != n) return false;
    for (Py_ssize_t i = 0; i < n; ++i) {
      PyObject* item = PyList_GET_ITEM(live, i);
      if (item != PyTuple_GET_ITEM(values, at + i) || item != PyTuple_GET_ITEM(keys, at + i)) return false;
    }
    return true;
  }
  return same_iterated(live, n, keys, at) && same_iterated(view, n, values, at);
}

// One module's chunk: (containers, views, lens, keys, values) as fingerprint._Chunk packs them.
// A chunk that does not add up (a container that changed while it was taken) is a changed one: the
// caller then looks at it name by name and takes it again.
bool same_chunk(PyObject* chunk) {
  if (!PyTuple_Check(chunk) || PyTuple_GET_SIZE(chunk) != 5) {
    throw py::type_error("state_changed_chunks: each chunk is a (containers, views, lens, keys, values) tuple");
  }
  PyObject* lives = PyTuple_GET_ITEM(chunk, 0);
  PyObject* views = PyTuple_GET_ITEM(chunk, 1);
  PyObject* lens = PyTuple_GET_ITEM(chunk, 2);
  PyObject* keys = PyTuple_GET_ITEM(chunk, 3);
  PyObject* values = PyTuple_GET_ITEM(chunk, 4);
  if (!PyList_Check(lives) || !PyList_Check(views) || !PyList_Check(lens) || !PyTuple_Check(keys) ||
      !PyTuple_Check(values)) {
    throw py::type_error("state_changed_chunks: containers, views and lens are lists, keys and values tuples");
  }
  const Py_ssize_t spaces = PyList_GET_SIZE(lives);
  const Py_ssize_t total = PyTuple_GET_SIZE(values);
  if (PyList_GET_SIZE(views) != spaces || PyList_GET_SIZE(lens) != spaces || PyTuple_GET_SIZE(keys) != total) {
    return false;
  }
  Py_ssize_t at = 0;
  for (Py_ssize_t s = 0; s < spaces; ++s) {
    const Py_ssize_t n = PyLong_AsSsize_t(PyList_GET_ITEM(lens, s));
    if (n < 0 || at + n > total) {
      PyErr_Clear();
      return false;
    }
    if (!same_space(PyList_GET_ITEM(lives, s), PyList_GET_ITEM(views, s), n, keys, values, at)) return false;
    at += n;
  }
  return at == total;
}

// A function's field as Python's attribute would give it (None for a NULL one).
PyObject* or_none(PyObject* p) { return p != nullptr ? p : Py_None; }

}  // namespace

void bind_state_fingerprint(py::module_& m) {
  m.def(
      "state_changed_chunks",
      [](py::list chunks) {
        py::list out;
        for (Py_ssize_t c = 0; c < PyList_GET_SIZE(chunks.ptr()); ++c) {
          if (!same_chunk(PyList_GET_ITEM(chunks.ptr(), c))) out.append(c);
        }
        return out;
      },
      py::arg("chunks"),
      "The indexes of the (containers, views, lens, keys, values) chunks whose containers no longer "
      "hold the same key and value objects, in the same order and number, as taken.");
  m.def(
      "state_same_functions",
      [](py::list functions, py::list code, py::list defaults, py::list kwdefaults, py::list dicts) {
        const Py_ssize_t n = PyList_GET_SIZE(functions.ptr());
        PyObject* lists[4] = {code.ptr(), defaults.ptr(), kwdefaults.ptr(), dicts.ptr()};
        for (PyObject* l : lists) {
          if (PyList_GET_SIZE(l) != n) throw py::value_error("state_same_functions: lists of different lengths");
        }
        for (Py_ssize_t i = 0; i < n; ++i) {
          PyObject* f = PyList_GET_ITEM(functions.ptr(), i);
          if (!PyFunction_Check(f)) return false;
          auto* fn = reinterpret_cast<PyFunctionObject*>(f);
          if (or_none(fn->func_code) != PyList_GET_ITEM(lists[0], i) ||
              or_none(fn->func_defaults) != PyList_GET_ITEM(lists[1], i) ||
              or_none(fn->func_kwdefaults) != PyList_GET_ITEM(lists[2], i) ||
              fn->func_dict != PyList_GET_ITEM(lists[3], i)) {
            return false;
          }
        }
        return true;
      },
      py::arg("functions"), py::arg("code"), py::arg("defaults"), py::arg("kwdefaults"), py::arg("dicts"),
      "Whether every function still has the code, defaults, keyword defaults and attribute dict "
      "objects taken (the four lists, by position).");
}

}  // namespace roofline
