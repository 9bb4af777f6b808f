// The judge's audit log in the native core (host code; every build has it): a CPython audit hook
// written in C, installed once per process, that records
//   * every write or delete of a Python function's __code__, __defaults__ or __kwdefaults__
//     ("object.__setattr__" / "object.__delattr__" on a function), on any thread, by any route;
//   * every call that reads the harness instead of computing (gc.get_objects, gc.get_referrers,
//     gc.get_referents, sys._current_frames) and every audit hook added after it (sys.addaudithook).
// Why native: the Python hook it replaces kept its log in module-level lists, which a candidate
// written against this judge could clear, and it could not be removed but its globals could be
// rebound. Hooks added with PySys_AddAuditHook cannot be removed, run before any Python hook, and
// this log is append-only: Python can read it and nothing else. The hook costs no Python call per
// audited event (reading any function's __code__ is one).
#include <pybind11/pybind11.h>

#include <cstring>
#include <string>
#include <vector>

namespace py = pybind11;

namespace roofline {
namespace {

struct AuditEntry {
  std::string event;   // the audit event
  std::uintptr_t id;   // the function written (its id()); 0 for the other events
  std::string name;    // module.qualname of that function
  std::string attr;    // __code__, __defaults__ or __kwdefaults__
};

std::vector<AuditEntry>& audit_log() {
  static std::vector<AuditEntry> log;  // the GIL guards it: hooks run, and Python reads, holding it
  return log;
}

bool audit_installed = false;

const char* const kInspection[] = {"gc.get_objects", "gc.get_referrers", "gc.get_referents", "sys._current_frames",
                                   "sys.addaudithook"};
const char* const kSlots[] = {"__code__", "__defaults__", "__kwdefaults__"};

std::string utf8_or_empty(PyObject* s) {
  if (s == nullptr || !PyUnicode_Check(s)) return {};
  const char* c = PyUnicode_AsUTF8(s);
  if (c == nullptr) {
    PyErr_Clear();
    return {};
  }
  return c;
}

void record_function_write(const char* event, PyObject* args) {
  if (!PyTuple_Check(args) || PyTuple_GET_SIZE(args) < 2) return;
  PyObject* obj = PyTuple_GET_ITEM(args, 0);
  PyObject* attr = PyTuple_GET_ITEM(args, 1);
  if (!PyFunction_Check(obj) || !PyUnicode_Check(attr)) return;
  const std::string a = utf8_or_empty(attr);
  for (const char* slot : kSlots) {
    if (a == slot) {
      auto* f = reinterpret_cast<PyFunctionObject*>(obj);
      std::string name = utf8_or_empty(f->func_module);
      name += (name.empty() ? "" : ".") + utf8_or_empty(f->func_qualname);
      audit_log().push_back({event, reinterpret_cast<std::uintptr_t>(obj), name, a});
      return;
    }
  }
}

int judge_audit_hook(const char* event, PyObject* args, void*) {
  if (std::strcmp(event, "object.__setattr__") == 0 || std::strcmp(event, "object.__delattr__") == 0) {
    record_function_write(event, args);
    return 0;
  }
  for (const char* e : kInspection) {
    if (std::strcmp(event, e) == 0) {
      audit_log().push_back({event, 0, {}, {}});
      return 0;
    }
  }
  return 0;
}

}  // namespace

void bind_judge_audit(py::module_& m) {
  m.def(
      "judge_audit_install",
      []() {
        if (!audit_installed) {
          if (PySys_AddAuditHook(judge_audit_hook, nullptr) != 0) throw py::error_already_set();
          audit_installed = true;
        }
        return audit_installed;
      },
      "Install the judge's native audit hook (once per process; it cannot be removed). True once in.");
  m.def("judge_audit_size", []() { return audit_log().size(); }, "Entries in the judge's audit log so far.");
  m.def(
      "judge_audit_since",
      [](std::size_t start) {
        py::list out;
        const auto& log = audit_log();
        for (std::size_t i = start; i < log.size(); ++i) {
          const AuditEntry& e = log[i];
          out.append(py::make_tuple(e.event, e.id, e.name, e.attr));
        }
        return out;
      },
      py::arg("start"),
      "The entries from `start` on, as (event, function id or 0, module.qualname, attribute) tuples.");
}

}  // namespace roofline
