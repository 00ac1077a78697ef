#ifndef GPUCMDD_CLIENT_CTL_OUTPUT_H_
#define GPUCMDD_CLIENT_CTL_OUTPUT_H_

// gpucmdctl's renderings of daemon answers: human-readable tables, or JSON for scripts.

#include <string>
#include <vector>

#include "gpucmd/v1/gpucmd.pb.h"

namespace gpucmd {

// "1.5 GiB", "512 B": binary units, one decimal.
std::string FormatBytes(uint64_t bytes);

std::string FormatHealth(bool daemon_serving, bool service_serving, bool json);
std::string FormatDevices(const std::vector<v1::DeviceInfo>& devices, bool json);
std::string FormatStats(const v1::GetStatsResponse& stats, bool json);

}  // namespace gpucmd

#endif  // GPUCMDD_CLIENT_CTL_OUTPUT_H_
