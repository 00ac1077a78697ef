#ifndef GPUCMDD_CLIENT_CTL_TOP_H_
#define GPUCMDD_CLIENT_CTL_TOP_H_

// `gpucmdctl top`: a live view of the daemon's devices and sessions, like
// `nvidia-smi dmon` or `htop`. Each frame comes from two samples (GetStats,
// ListDevices, ListSessions) a known time apart: levels (ready, queue depth, commands in
// flight, memory used and reserved with a bar, drop-queue bytes; per session its
// memory and queued commands) from the second, rates (launches/s, bytes/s in, out and
// on the device; launches/s per session) from the difference. The sessions are those
// the caller may see: every client's for an administrator, its own otherwise.

#include <string>
#include <vector>

#include "gpucmd/v1/gpucmd.pb.h"

namespace gpucmd {

struct TopSample {
  v1::GetStatsResponse stats;
  std::vector<v1::DeviceInfo> devices;  // for `ready`
  v1::ListSessionsResponse sessions;
};

// A terminal frame lists at most this many sessions, the busiest first.
inline constexpr int kTopSessionRows = 20;

// One frame: a table for a terminal, or one JSON object on one line.
std::string FormatTopFrame(const TopSample& before, const TopSample& now, double seconds,
                           bool json);

// "12.3 k", "4.5 M": a rate with a metric prefix.
std::string FormatRate(double per_second);

}  // namespace gpucmd

#endif  // GPUCMDD_CLIENT_CTL_TOP_H_
