// Exception types of the native core and the check macros that raise them.
//
// Every failure carries where it happened (file:line), the expression that failed, and the
// library's own error name and string, so a Python user sees the real reason in one line.
// Library code never calls std::exit: it would take the user's Python process down with it.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace roofline {

// Base of everything the core throws on purpose; bound to Python as roofline_ext._core.CoreError.
class CoreError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A CUDA runtime call failed. `code` is the cudaError_t value (kept as int so this header does not
// need the CUDA headers and can be used in host-only builds).
class CudaError : public CoreError {
 public:
  CudaError(int code, std::string name, const std::string& what)
      : CoreError(what), code_(code), name_(std::move(name)) {}
  int code() const noexcept { return code_; }
  const std::string& name() const noexcept { return name_; }

 private:
  int code_;
  std::string name_;
};

// An NVML call failed, or the library could not be loaded (code -1 then).
class NvmlError : public CoreError {
 public:
  NvmlError(int code, std::string name, const std::string& what)
      : CoreError(what), code_(code), name_(std::move(name)) {}
  int code() const noexcept { return code_; }
  const std::string& name() const noexcept { return name_; }

 private:
  int code_;
  std::string name_;
};

// A kernel ran but its output was wrong: the measurement it belongs to must not be reported.
class VerificationError : public CoreError {
 public:
  using CoreError::CoreError;
};

inline std::string where(const char* file, int line, const char* expr) {
  std::ostringstream s;
  // Only the file's base name: build paths are noise to a user.
  std::string f(file);
  auto slash = f.find_last_of('/');
  s << (slash == std::string::npos ? f : f.substr(slash + 1)) << ":" << line << ": " << expr;
  return s.str();
}

}  // namespace roofline

// Throws roofline::VerificationError when `cond` is false, with the message streamed after it.
#define ROOFLINE_VERIFY(cond, msg_stream)                                              \
  do {                                                                                 \
    if (!(cond)) {                                                                     \
      std::ostringstream roofline_verify_os_;                                          \
      roofline_verify_os_ << "verification failed: " << msg_stream << " ("            \
                          << ::roofline::where(__FILE__, __LINE__, #cond) << ")";      \
      throw ::roofline::VerificationError(roofline_verify_os_.str());                  \
    }                                                                                  \
  } while (0)
