#ifndef GPUCMDD_SERVER_CORE_METRICS_H_
#define GPUCMDD_SERVER_CORE_METRICS_H_

// The daemon's Prometheus metrics (prometheus-cpp), rendered in the text exposition
// format for GET /metrics.
//
// Thread-safety: every method may be called from any thread; prometheus-cpp metrics are
// atomic and its families lock internally. Metric objects returned by reference live as
// long as the Metrics object.

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/string_view.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace gpucmd {

class Metrics {
 public:
  explicit Metrics(int device_count);
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  // Commands waiting in device `device`'s queue (gpucmd_queue_depth{device}).
  prometheus::Gauge& QueueDepth(int device) { return *queue_depth_[device]; }
  // Commands the device thread has taken but not completed (gpucmd_commands_in_flight).
  prometheus::Gauge& CommandsInFlight(int device) { return *commands_in_flight_[device]; }
  // 1 once the device is initialised (gpucmd_device_ready{device}).
  prometheus::Gauge& DeviceReady(int device) { return *device_ready_[device]; }
  // Contexts recreated after a device error (gpucmd_device_resets_total{device}).
  prometheus::Counter& DeviceResets(int device) { return *device_resets_[device]; }
  // Device memory handed to buffers / held in pages (gpucmd_memory_{used,reserved}_bytes).
  prometheus::Gauge& MemoryUsed(int device) { return *memory_used_[device]; }
  prometheus::Gauge& MemoryReserved(int device) { return *memory_reserved_[device]; }
  // Staged host bytes waiting for their copies (gpucmd_drop_queue_bytes).
  prometheus::Gauge& DropQueueBytes(int device) { return *drop_queue_bytes_[device]; }
  // Pages evacuated by relocation so far (gpucmd_relocated_pages).
  prometheus::Gauge& RelocatedPages(int device) { return *relocated_pages_[device]; }
  // Compile cache outcomes so far (gpucmd_compile_cache_results{result}).
  void SetCompileCacheResults(uint64_t memory_hits, uint64_t disk_hits, uint64_t misses);
  // Shared-memory regions registered and the bytes they map, for all sessions
  // (gpucmd_shared_memory_regions, gpucmd_shared_memory_bytes).
  void SetSharedMemory(uint64_t regions, uint64_t mapped_bytes);
  // RPCs currently being served (gpucmd_rpcs_in_flight).
  prometheus::Gauge& RpcsInFlight() { return *rpcs_in_flight_; }

  // Counts one finished RPC: gpucmd_requests_total{rpc, code} and its latency in
  // gpucmd_request_duration_seconds{rpc}. `rpc` is the method's short name.
  void RecordRequest(absl::string_view rpc, absl::string_view code, double seconds);

  double UptimeSeconds() const;

  // The text exposition of every metric, with gpucmd_uptime_seconds updated.
  std::string Render();

  int device_count() const { return static_cast<int>(queue_depth_.size()); }

 private:
  const std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::shared_ptr<prometheus::Registry> registry_ = std::make_shared<prometheus::Registry>();
  prometheus::Family<prometheus::Counter>& requests_;
  prometheus::Family<prometheus::Histogram>& request_duration_;
  prometheus::Gauge* uptime_;
  prometheus::Gauge* rpcs_in_flight_;
  prometheus::Family<prometheus::Gauge>& compile_cache_;
  prometheus::Gauge* shared_memory_regions_;
  prometheus::Gauge* shared_memory_bytes_;
  std::vector<prometheus::Gauge*> queue_depth_;
  std::vector<prometheus::Gauge*> commands_in_flight_;
  std::vector<prometheus::Gauge*> device_ready_;
  std::vector<prometheus::Counter*> device_resets_;
  std::vector<prometheus::Gauge*> memory_used_;
  std::vector<prometheus::Gauge*> memory_reserved_;
  std::vector<prometheus::Gauge*> drop_queue_bytes_;
  std::vector<prometheus::Gauge*> relocated_pages_;
};

}  // namespace gpucmd

#endif  // GPUCMDD_SERVER_CORE_METRICS_H_
