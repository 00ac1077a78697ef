#ifndef GPUCMDD_SERVER_CORE_METRICS_H_
#define GPUCMDD_SERVER_CORE_METRICS_H_

// The daemon's Prometheus metrics (prometheus-cpp), rendered in the text exposition
// format for GET /metrics.
//
// Thread-safety: every method may be called from any thread; prometheus-cpp metrics are
// atomic and its families lock internally. Metric objects returned by reference live as
// long as the Metrics object.

#include <array>
#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "base/mutex.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"
#include "server/core/client_series.h"

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
  // The device's memory (gpucmd_memory_capacity_bytes{device}).
  prometheus::Gauge& MemoryCapacity(int device) { return *memory_capacity_[device]; }
  // Staged host bytes waiting for their copies (gpucmd_drop_queue_bytes).
  prometheus::Gauge& DropQueueBytes(int device) { return *drop_queue_bytes_[device]; }
  // Launches, device copies and reads queued on the device's streams that have not run
  // yet (gpucmd_stream_queued_commands).
  prometheus::Gauge& StreamQueuedCommands(int device) {
    return *stream_queued_commands_[device];
  }
  // Pages the device's current context evacuated by relocation so far; counted into
  // gpucmd_relocated_pages_total{device} (a new context after a reset starts again at 0).
  void SetRelocatedPages(int device, uint64_t pages);
  // Compile cache outcomes so far, counted into gpucmd_compile_cache_requests_total{result}.
  void SetCompileCacheResults(uint64_t memory_hits, uint64_t disk_hits, uint64_t misses);
  // Time tasks waited in the device's queue (gpucmd_queue_wait_seconds{device}).
  prometheus::Histogram& QueueWait(int device) { return *queue_wait_[device]; }

  enum class Direction { kHostToDevice, kDeviceToHost, kDeviceToDevice };
  // Launches run for `client` on `device`: gpucmd_launches_total{device} and
  // gpucmd_client_launches_total{client} (Note [Per-client metrics]).
  void RecordLaunches(int device, const std::string& client, uint64_t launches);
  // Bytes copied for `client` on `device`: gpucmd_copy_bytes_total{device,direction} and
  // gpucmd_client_bytes_total{client,direction}.
  void RecordCopy(int device, const std::string& client, Direction direction, uint64_t bytes);
  // What RecordLaunches and RecordCopy counted for `device` so far.
  uint64_t Launches(int device) const;
  uint64_t CopiedBytes(int device, Direction direction) const;
  // The sessions open now, each by its client name and the device memory it holds:
  // gpucmd_client_sessions{client} and gpucmd_client_memory_bytes{client}.
  struct OpenSession {
    std::string client;
    uint64_t memory_bytes = 0;
  };
  void SetOpenSessions(const std::vector<OpenSession>& sessions);
  // Shared-memory regions registered and the bytes they map, for all sessions
  // (gpucmd_shared_memory_regions, gpucmd_shared_memory_bytes).
  void SetSharedMemory(uint64_t regions, uint64_t mapped_bytes);
  // Bytes all Submit streams hold (gpucmd_submit_bytes; Note [Memory the Submit streams
  // hold] in server/rpc/submit_reactor.h).
  void SetSubmitBytes(uint64_t bytes) { submit_bytes_->Set(static_cast<double>(bytes)); }
  // Inline payload bytes the writes and reads of all sessions hold (gpucmd_inline_bytes;
  // Note [Inline payload budget] in server/core/inline_budget.h).
  void SetInlineBytes(uint64_t bytes) { inline_bytes_->Set(static_cast<double>(bytes)); }
  // An RPC starts or ends: gpucmd_rpcs_in_flight, and RpcStartsAndEnds.
  void RpcStarted();
  void RpcEnded();
  // RPCs being served now.
  double RpcsInFlight() const { return rpcs_in_flight_->Value(); }
  // RPCs started plus RPCs ended so far: it stays the same only while no call comes or
  // goes (for the drain, Note [Draining] in server/daemon.cc).
  uint64_t RpcStartsAndEnds() const { return rpc_starts_and_ends_.load(); }

  // One RPC method's series of finished calls: its latency histogram, made with it, and
  // its count per status code, each made on first use.
  class RequestSeries {
   public:
    explicit RequestSeries(std::string rpc) : rpc_(std::move(rpc)) {}

   private:
    friend class Metrics;
    const std::string rpc_;
    prometheus::Histogram* duration_ = nullptr;  // set once, before the series is shared
    // By status code, OK (0) to UNAUTHENTICATED (16).
    std::array<std::atomic<prometheus::Counter*>, 17> calls_{};
  };
  // The series of method `rpc` ("package.Service/Method"), made on its first request and
  // kept for the Metrics' life. Every name gets series of its own: callers name only the
  // methods the daemon serves (MetricsInterceptorFactory counts the calls of any other
  // name as "other"), so that no client can make series without end.
  RequestSeries& RequestsOf(absl::string_view rpc);
  // Counts one finished call of `series`' method: gpucmd_requests_total{rpc, code} and its
  // latency in gpucmd_request_duration_seconds{rpc}. Takes no lock once the method has
  // met `code` before.
  void RecordRequest(RequestSeries& series, absl::StatusCode code, double seconds);

  double UptimeSeconds() const;

  // The text exposition of every metric, with gpucmd_uptime_seconds updated.
  std::string Render();

  int device_count() const { return static_cast<int>(queue_depth_.size()); }

  // Per-client series kept by default (Note [Per-client metrics]).
  static constexpr size_t kMaxClientSeries = 20;

 private:
  // The series of one client label.
  struct ClientMetrics {
    prometheus::Counter* launches;
    prometheus::Counter* bytes[3];  // by Direction
    prometheus::Gauge* sessions;
    prometheus::Gauge* memory;
  };
  // The label `client` counts under and its series (made on first use); the series of
  // labels it evicted go (Note [Per-client metrics]).
  std::pair<std::string, ClientMetrics*> SeriesFor(const std::string& client)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);

  const std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::shared_ptr<prometheus::Registry> registry_ = std::make_shared<prometheus::Registry>();
  prometheus::Family<prometheus::Counter>& requests_;
  prometheus::Family<prometheus::Histogram>& request_duration_;
  prometheus::Gauge* uptime_;
  prometheus::Gauge* rpcs_in_flight_;
  std::atomic<uint64_t> rpc_starts_and_ends_{0};
  prometheus::Family<prometheus::Counter>& compile_cache_;
  prometheus::Family<prometheus::Counter>& client_launches_;
  prometheus::Family<prometheus::Counter>& client_bytes_;
  prometheus::Family<prometheus::Gauge>& client_sessions_;
  prometheus::Family<prometheus::Gauge>& client_memory_;
  prometheus::Family<prometheus::Counter>& copy_bytes_;
  prometheus::Gauge* shared_memory_regions_;
  prometheus::Gauge* shared_memory_bytes_;
  prometheus::Gauge* inline_bytes_;
  prometheus::Gauge* submit_bytes_;
  std::vector<prometheus::Gauge*> queue_depth_;
  std::vector<prometheus::Gauge*> commands_in_flight_;
  std::vector<prometheus::Gauge*> device_ready_;
  std::vector<prometheus::Counter*> device_resets_;
  std::vector<prometheus::Gauge*> memory_used_;
  std::vector<prometheus::Gauge*> memory_reserved_;
  std::vector<prometheus::Gauge*> memory_capacity_;
  std::vector<prometheus::Gauge*> drop_queue_bytes_;
  std::vector<prometheus::Gauge*> stream_queued_commands_;
  std::vector<prometheus::Counter*> relocated_pages_;
  std::vector<prometheus::Counter*> launches_;
  std::vector<prometheus::Histogram*> queue_wait_;
  std::vector<std::array<prometheus::Counter*, 3>> device_copy_bytes_;  // by Direction

  ClientSeries client_series_{kMaxClientSeries};
  Mutex mutex_;
  absl::flat_hash_map<std::string, ClientMetrics> clients_ ABSL_GUARDED_BY(mutex_);
  absl::flat_hash_map<std::string, std::unique_ptr<RequestSeries>> request_series_
      ABSL_GUARDED_BY(mutex_);
  // What the Set* counters were last given, to count the difference.
  std::vector<uint64_t> relocated_seen_ ABSL_GUARDED_BY(mutex_);
  uint64_t compile_seen_[3] ABSL_GUARDED_BY(mutex_) = {0, 0, 0};
};

}  // namespace gpucmd

#endif  // GPUCMDD_SERVER_CORE_METRICS_H_
