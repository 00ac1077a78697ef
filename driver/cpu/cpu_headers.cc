#include "driver/cpu/cpu_headers.h"

#include "driver/cooperative_groups_headers.h"

namespace gpucmd {
namespace {

// Everything a device-side caller of the runtime headers needs is in the prelude.
constexpr char kRuntimeHeader[] = R"HEADER(#pragma once
// Device-side declarations come with the CPU driver's prelude.
)HEADER";

}  // namespace

const std::vector<std::pair<std::string, std::string>>& CpuKernelHeaders() {
  static const auto* const kHeaders = [] {
    auto* headers = new std::vector<std::pair<std::string, std::string>>{
        {"cuda_runtime.h", kRuntimeHeader},
        {"cuda_runtime_api.h", kRuntimeHeader},
        {"device_launch_parameters.h", kRuntimeHeader},
    };
    for (const auto& header : CooperativeGroupsHeaders()) headers->push_back(header);
    return headers;
  }();
  return *kHeaders;
}

}  // namespace gpucmd
