#include "server/core/metrics.h"

#include "absl/container/flat_hash_set.h"
#include "absl/strings/string_view.h"
#include "prometheus/text_serializer.h"

namespace gpucmd {
namespace {

// One metric of `family` per device, labelled with its ordinal.
template <typename Metric>
std::vector<Metric*> PerDevice(prometheus::Family<Metric>& family, int device_count) {
  std::vector<Metric*> metrics;
  for (int device = 0; device < device_count; ++device) {
    metrics.push_back(&family.Add({{"device", std::to_string(device)}}));
  }
  return metrics;
}

const char* DirectionName(Metrics::Direction direction) {
  switch (direction) {
    case Metrics::Direction::kHostToDevice:
      return "host_to_device";
    case Metrics::Direction::kDeviceToHost:
      return "device_to_host";
    case Metrics::Direction::kDeviceToDevice:
      return "device_to_device";
  }
  return "unknown";
}

// Adds to `counter` what `total` grew by since `seen`; a smaller total (a counter that
// started again) counts whole.
void CountUpTo(prometheus::Counter& counter, uint64_t total, uint64_t& seen) {
  counter.Increment(static_cast<double>(total >= seen ? total - seen : total));
  seen = total;
}

std::vector<prometheus::Gauge*> GaugePerDevice(prometheus::Registry& registry,
                                               const std::string& name,
                                               const std::string& help, int device_count) {
  return PerDevice(prometheus::BuildGauge().Name(name).Help(help).Register(registry),
                   device_count);
}

}  // namespace

Metrics::Metrics(int device_count)
    : requests_(prometheus::BuildCounter()
                    .Name("gpucmd_requests_total")
                    .Help("RPCs finished, by method and gRPC status code.")
                    .Register(*registry_)),
      request_duration_(prometheus::BuildHistogram()
                            .Name("gpucmd_request_duration_seconds")
                            .Help("RPC latency from arrival to status, by method.")
                            .Register(*registry_)),
      uptime_(&prometheus::BuildGauge()
                   .Name("gpucmd_uptime_seconds")
                   .Help("Seconds since the daemon started.")
                   .Register(*registry_)
                   .Add({})),
      rpcs_in_flight_(&prometheus::BuildGauge()
                           .Name("gpucmd_rpcs_in_flight")
                           .Help("RPCs being served right now.")
                           .Register(*registry_)
                           .Add({})),
      compile_cache_(prometheus::BuildCounter()
                         .Name("gpucmd_compile_cache_requests_total")
                         .Help("Compile requests by outcome: memory_hit, disk_hit, miss.")
                         .Register(*registry_)),
      client_launches_(prometheus::BuildCounter()
                           .Name("gpucmd_client_launches_total")
                           .Help("Kernel launches run, by client name (the most recently "
                                 "active ones; the rest as client=\"other\").")
                           .Register(*registry_)),
      client_bytes_(prometheus::BuildCounter()
                        .Name("gpucmd_client_bytes_total")
                        .Help("Bytes copied, by client name and direction.")
                        .Register(*registry_)),
      client_sessions_(prometheus::BuildGauge()
                           .Name("gpucmd_client_sessions")
                           .Help("Sessions open, by client name.")
                           .Register(*registry_)),
      client_memory_(prometheus::BuildGauge()
                         .Name("gpucmd_client_memory_bytes")
                         .Help("Device memory held by sessions, by client name.")
                         .Register(*registry_)),
      copy_bytes_(prometheus::BuildCounter()
                      .Name("gpucmd_copy_bytes_total")
                      .Help("Bytes copied, by device and direction.")
                      .Register(*registry_)),
      shared_memory_regions_(&prometheus::BuildGauge()
                                  .Name("gpucmd_shared_memory_regions")
                                  .Help("Shared-memory regions registered by sessions.")
                                  .Register(*registry_)
                                  .Add({})),
      shared_memory_bytes_(&prometheus::BuildGauge()
                                .Name("gpucmd_shared_memory_bytes")
                                .Help("Bytes of clients' shared memory the daemon maps.")
                                .Register(*registry_)
                                .Add({})),
      inline_bytes_(&prometheus::BuildGauge()
                         .Name("gpucmd_inline_bytes")
                         .Help("Inline payload bytes the writes and reads of all sessions "
                               "hold (limits.max_inline_bytes).")
                         .Register(*registry_)
                         .Add({})),
      submit_bytes_(&prometheus::BuildGauge()
                         .Name("gpucmd_submit_bytes")
                         .Help("Bytes Submit streams hold: batches read and not yet "
                               "answered, answers not yet sent (limits.max_submit_bytes).")
                         .Register(*registry_)
                         .Add({})),
      queue_depth_(GaugePerDevice(*registry_, "gpucmd_queue_depth",
                                  "Commands waiting in the device's queue.", device_count)),
      commands_in_flight_(GaugePerDevice(*registry_, "gpucmd_commands_in_flight",
                                         "Commands the device thread is executing.",
                                         device_count)),
      device_ready_(GaugePerDevice(*registry_, "gpucmd_device_ready",
                                   "1 once the device is initialised and serving.",
                                   device_count)),
      device_resets_(PerDevice(prometheus::BuildCounter()
                                   .Name("gpucmd_device_resets_total")
                                   .Help("Device contexts recreated after a device error.")
                                   .Register(*registry_),
                               device_count)),
      memory_used_(GaugePerDevice(*registry_, "gpucmd_memory_used_bytes",
                                  "Device memory handed to buffers.", device_count)),
      memory_reserved_(GaugePerDevice(*registry_, "gpucmd_memory_reserved_bytes",
                                      "Device memory held in pages (used plus free slices).",
                                      device_count)),
      memory_capacity_(GaugePerDevice(*registry_, "gpucmd_memory_capacity_bytes",
                                      "Device memory in all.", device_count)),
      drop_queue_bytes_(GaugePerDevice(*registry_, "gpucmd_drop_queue_bytes",
                                       "Staged host bytes kept until their copies complete.",
                                       device_count)),
      stream_queued_commands_(GaugePerDevice(
          *registry_, "gpucmd_stream_queued_commands",
          "Launches, device copies and reads queued on the device's streams, not yet run.",
          device_count)),
      relocated_pages_(PerDevice(prometheus::BuildCounter()
                                     .Name("gpucmd_relocated_pages_total")
                                     .Help("Pages evacuated by relocation.")
                                     .Register(*registry_),
                                 device_count)),
      launches_(PerDevice(prometheus::BuildCounter()
                              .Name("gpucmd_launches_total")
                              .Help("Kernel launches run, by device.")
                              .Register(*registry_),
                          device_count)),
      relocated_seen_(device_count, 0) {
  auto& queue_wait = prometheus::BuildHistogram()
                         .Name("gpucmd_queue_wait_seconds")
                         .Help("Time commands waited in the device's queue before running.")
                         .Register(*registry_);
  static const prometheus::Histogram::BucketBoundaries kWaitBuckets = {
      0.00001, 0.0001, 0.001, 0.01, 0.1, 1, 10};
  for (int device = 0; device < device_count; ++device) {
    queue_wait_.push_back(&queue_wait.Add({{"device", std::to_string(device)}}, kWaitBuckets));
    std::array<prometheus::Counter*, 3> copies;
    for (Direction direction :
         {Direction::kHostToDevice, Direction::kDeviceToHost, Direction::kDeviceToDevice}) {
      copies[static_cast<int>(direction)] = &copy_bytes_.Add(
          {{"device", std::to_string(device)}, {"direction", DirectionName(direction)}});
    }
    device_copy_bytes_.push_back(copies);
  }
}

Metrics::RequestSeries& Metrics::RequestsOf(absl::string_view rpc) {
  // Latency buckets from 50 us to 10 s.
  static const prometheus::Histogram::BucketBoundaries kBuckets = {
      0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
      0.025,   0.05,   0.1,     0.25,   0.5,   1,      2.5,   10};
  MutexLock lock(&mutex_);
  std::unique_ptr<RequestSeries>& series = request_series_[rpc];
  if (series == nullptr) {
    series = std::make_unique<RequestSeries>(std::string(rpc));
    series->duration_ = &request_duration_.Add({{"rpc", series->rpc_}}, kBuckets);
  }
  return *series;
}

void Metrics::RecordRequest(RequestSeries& series, absl::StatusCode code, double seconds) {
  size_t index = static_cast<size_t>(code);
  if (index >= series.calls_.size()) {
    code = absl::StatusCode::kUnknown;
    index = static_cast<size_t>(code);
  }
  prometheus::Counter* calls = series.calls_[index].load(std::memory_order_acquire);
  if (calls == nullptr) {
    // Family::Add gives every caller the same series for the same labels.
    calls = &requests_.Add({{"rpc", series.rpc_}, {"code", absl::StatusCodeToString(code)}});
    series.calls_[index].store(calls, std::memory_order_release);
  }
  calls->Increment();
  series.duration_->Observe(seconds);
}

void Metrics::SetCompileCacheResults(uint64_t memory_hits, uint64_t disk_hits,
                                     uint64_t misses) {
  MutexLock lock(&mutex_);
  CountUpTo(compile_cache_.Add({{"result", "memory_hit"}}), memory_hits, compile_seen_[0]);
  CountUpTo(compile_cache_.Add({{"result", "disk_hit"}}), disk_hits, compile_seen_[1]);
  CountUpTo(compile_cache_.Add({{"result", "miss"}}), misses, compile_seen_[2]);
}

void Metrics::SetRelocatedPages(int device, uint64_t pages) {
  MutexLock lock(&mutex_);
  CountUpTo(*relocated_pages_[device], pages, relocated_seen_[device]);
}

std::pair<std::string, Metrics::ClientMetrics*> Metrics::SeriesFor(const std::string& client) {
  std::vector<std::string> evicted;
  const std::string label = client_series_.LabelFor(client, &evicted);
  for (const std::string& gone : evicted) {
    auto it = clients_.find(gone);
    if (it == clients_.end()) continue;
    client_launches_.Remove(it->second.launches);
    for (prometheus::Counter* bytes : it->second.bytes) client_bytes_.Remove(bytes);
    client_sessions_.Remove(it->second.sessions);
    client_memory_.Remove(it->second.memory);
    clients_.erase(it);
  }
  auto [it, added] = clients_.try_emplace(label);
  if (added) {
    it->second.launches = &client_launches_.Add({{"client", label}});
    for (Direction direction :
         {Direction::kHostToDevice, Direction::kDeviceToHost, Direction::kDeviceToDevice}) {
      it->second.bytes[static_cast<int>(direction)] =
          &client_bytes_.Add({{"client", label}, {"direction", DirectionName(direction)}});
    }
    it->second.sessions = &client_sessions_.Add({{"client", label}});
    it->second.memory = &client_memory_.Add({{"client", label}});
  }
  return {label, &it->second};
}

void Metrics::RecordLaunches(int device, const std::string& client, uint64_t launches) {
  launches_[device]->Increment(static_cast<double>(launches));
  MutexLock lock(&mutex_);
  SeriesFor(client).second->launches->Increment(static_cast<double>(launches));
}

void Metrics::RecordCopy(int device, const std::string& client, Direction direction,
                         uint64_t bytes) {
  const int index = static_cast<int>(direction);
  device_copy_bytes_[device][index]->Increment(static_cast<double>(bytes));
  MutexLock lock(&mutex_);
  SeriesFor(client).second->bytes[index]->Increment(static_cast<double>(bytes));
}

uint64_t Metrics::Launches(int device) const {
  return static_cast<uint64_t>(launches_[device]->Value());
}

uint64_t Metrics::CopiedBytes(int device, Direction direction) const {
  return static_cast<uint64_t>(device_copy_bytes_[device][static_cast<int>(direction)]->Value());
}

void Metrics::SetOpenSessions(const std::vector<OpenSession>& sessions) {
  absl::flat_hash_set<std::string> open;
  for (const OpenSession& session : sessions) open.insert(session.client);
  client_series_.SetOpenClients(open);
  MutexLock lock(&mutex_);
  absl::flat_hash_map<std::string, std::pair<double, double>> totals;  // sessions, memory
  for (const OpenSession& session : sessions) {
    auto& [count, memory] = totals[SeriesFor(session.client).first];
    count += 1;
    memory += static_cast<double>(session.memory_bytes);
  }
  for (auto& [label, series] : clients_) {
    auto it = totals.find(label);
    series.sessions->Set(it == totals.end() ? 0 : it->second.first);
    series.memory->Set(it == totals.end() ? 0 : it->second.second);
  }
}

void Metrics::SetSharedMemory(uint64_t regions, uint64_t mapped_bytes) {
  shared_memory_regions_->Set(static_cast<double>(regions));
  shared_memory_bytes_->Set(static_cast<double>(mapped_bytes));
}

void Metrics::RpcStarted() {
  rpcs_in_flight_->Increment();
  ++rpc_starts_and_ends_;
}

void Metrics::RpcEnded() {
  rpcs_in_flight_->Decrement();
  ++rpc_starts_and_ends_;
}

double Metrics::UptimeSeconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

std::string Metrics::Render() {
  uptime_->Set(UptimeSeconds());
  return prometheus::TextSerializer().Serialize(registry_->Collect());
}

}  // namespace gpucmd
