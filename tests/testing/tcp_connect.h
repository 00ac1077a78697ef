#ifndef GPUCMDD_TESTS_TESTING_TCP_CONNECT_H_
#define GPUCMDD_TESTS_TESTING_TCP_CONNECT_H_

#include <chrono>
#include <string>

#include "absl/status/statusor.h"

namespace gpucmd::testing {

// A TCP connection to `host` (an IPv4 address) and `port`, the caller's to close, whose
// reads give up after `patience`: an answer that never comes fails a test instead of
// hanging it. UNAVAILABLE when it cannot connect.
absl::StatusOr<int> ConnectTcp(const std::string& host, int port,
                               std::chrono::seconds patience = std::chrono::seconds(10));

}  // namespace gpucmd::testing

#endif  // GPUCMDD_TESTS_TESTING_TCP_CONNECT_H_
