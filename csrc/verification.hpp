// What every measurement family (bandwidth, host link, shared memory, compute) reports of its
// verification, and the deliberate faults tests inject to prove that verification fails loudly
// instead of reporting a number. One struct and one fault type for all four families, so a family's
// code, its bindings and the docs describe a check the same way; each family fills the fields its
// method has and leaves the others at their defaults. Faults are never used by measurements.
//
// Host-only on purpose (no CUDA headers): the bindings and host-only tests include it too.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace roofline {

// What a family's check did and found. A failed check throws VerificationError in every family but
// compute's stand-alone verify (compute_verify), which returns the struct with passed = false; so a
// result that comes back from a measurement has passed = true unless it was skipped.
struct Verification {
  // How: "checksum" / "spot-check" / "checksum+spot-check" (bandwidth), "checksum" (host link h2d,
  // on the device) or "compare" (d2h, on the host), "per-thread checksum" (shared memory),
  // "host reference" (compute: every output element against an exact host reference).
  std::string method;
  // How many items were compared: 32-bit words (bandwidth, host link), threads' sums (shared
  // memory), output elements (compute).
  long long checked = 0;
  long long mismatches = 0;      // items outside tolerance (0 in every family that throws)
  std::uint32_t expected = 0;    // checksum methods: the host's sum mod 2^32
  std::uint32_t observed = 0;    // checksum methods: the device's sum mod 2^32
  double max_error = 0;          // compute: max over elements of |got - ref| / bound(element)
  double tolerance = 0;          // compute: what max_error may reach (integer paths: 0, exact)
  long long iterations = 0;      // compute: loop trips of the verification launch
  bool passed = false;
  std::string detail;            // compute: the count and the worst element, for the message
};

// Deliberate faults. Each family accepts only the names of the faults it can inject (fault_names).
enum class Fault {
  None,
  // The work covers less than the host's reference expects, so the uncovered part keeps its poison:
  //   bandwidth: the kernel covers 15/16 of the buffer (streaming) or of the chunks (mix, l2_read);
  //   host link: every copy moves 15/16 of the buffer (h2d fails first);
  //   shared memory: the kernel runs one pass fewer than the host's sums assume.
  Short,
  ShortD2H,  // host link: only the device-to-host copies are short, so the host's comparison fails
  Corrupt,   // compute: one operand changes after the host computed its reference
};

enum class Family { Bandwidth, HostLink, SharedMemory, Compute };

inline const char* family_name(Family f) {
  switch (f) {
    case Family::Bandwidth: return "bandwidth";
    case Family::HostLink: return "host-link";
    case Family::SharedMemory: return "shared-memory";
    case Family::Compute: return "compute";
  }
  return "?";
}

struct FaultName {
  const char* name;
  Fault fault;
};

// The fault names `family` accepts, "none" first.
inline std::vector<FaultName> fault_names(Family family) {
  switch (family) {
    case Family::Bandwidth:
    case Family::SharedMemory: return {{"none", Fault::None}, {"short", Fault::Short}};
    case Family::HostLink: return {{"none", Fault::None}, {"short", Fault::Short}, {"short_d2h", Fault::ShortD2H}};
    case Family::Compute: return {{"none", Fault::None}, {"corrupt", Fault::Corrupt}};
  }
  return {{"none", Fault::None}};
}

inline std::string accepted_fault_names(Family family) {
  std::string s;
  for (const FaultName& n : fault_names(family)) s += (s.empty() ? "" : ", ") + std::string(n.name);
  return s;
}

// The fault `name` stands for in `family` ("" is "none"); std::invalid_argument naming the family
// and the names it accepts for any other name, a fault another family injects included.
inline Fault parse_fault(Family family, const std::string& name) {
  if (name.empty()) return Fault::None;
  for (const FaultName& n : fault_names(family))
    if (name == n.name) return n.fault;
  throw std::invalid_argument("unknown " + std::string(family_name(family)) + " fault '" + name +
                              "' (accepted: " + accepted_fault_names(family) + ")");
}

// Throws std::invalid_argument when `fault` is not one `family` injects: a typed fault from C++
// must not pass silently as "no fault" in a family that does not know it.
inline void require_fault(Family family, Fault fault) {
  for (const FaultName& n : fault_names(family))
    if (n.fault == fault) return;
  throw std::invalid_argument(std::string("the ") + family_name(family) +
                              " family injects no such fault (accepted: " + accepted_fault_names(family) + ")");
}

}  // namespace roofline
