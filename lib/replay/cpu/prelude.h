// prelude.h — the in-memory headers device modules are compiled with for the CPU: the forced
// prelude (CUDA built-ins for the host, on runtime.h's functions) and stand-ins for the
// headers TVM's source includes. Text only; compiling is jit.cpp's.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace kdflow::cpu {

/// The forced prelude's name in the in-memory include directory.
inline constexpr const char* kPreludeName = "kdflow_cpu_prelude.h";

/// (name relative to the include directory, text) of every in-memory header.
const std::vector<std::pair<std::string, std::string>>& prelude_headers();

}  // namespace kdflow::cpu
