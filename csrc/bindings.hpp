// Each measurement family binds its own functions into the module; module.cpp only calls these.
// Declared here so module.cpp stays bindings-only and each family keeps its code in its own files.
#pragma once

#include <pybind11/pybind11.h>

namespace roofline {
void bind_identity(pybind11::module_& m);   // nvml.cpp / device.cu identity   (module.cpp)
void bind_telemetry(pybind11::module_& m);  // telemetry.cpp sampler           (module.cpp)
void bind_health(pybind11::module_& m);     // health_bindings.cpp (NVML health, host-only too)
#if ROOFLINE_HAVE_CUDA
void bind_bandwidth(pybind11::module_& m);  // bandwidth_bindings.cpp
void bind_compute(pybind11::module_& m);    // compute_bindings.cpp
void bind_smem(pybind11::module_& m);       // smem_bindings.cpp
void bind_hostlink(pybind11::module_& m);   // hostlink_bindings.cpp
#endif
}  // namespace roofline
