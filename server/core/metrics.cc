#include "server/core/metrics.h"

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
      compile_cache_(prometheus::BuildGauge()
                         .Name("gpucmd_compile_cache_results")
                         .Help("Compile requests by outcome: memory_hit, disk_hit, miss.")
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
      drop_queue_bytes_(GaugePerDevice(*registry_, "gpucmd_drop_queue_bytes",
                                       "Staged host bytes kept until their copies complete.",
                                       device_count)),
      relocated_pages_(GaugePerDevice(*registry_, "gpucmd_relocated_pages",
                                      "Pages evacuated by relocation since start.",
                                      device_count)) {}

void Metrics::RecordRequest(absl::string_view rpc, absl::string_view code, double seconds) {
  // Latency buckets from 50 us to 10 s.
  static const prometheus::Histogram::BucketBoundaries kBuckets = {
      0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
      0.025,   0.05,   0.1,     0.25,   0.5,   1,      2.5,   10};
  requests_.Add({{"rpc", std::string(rpc)}, {"code", std::string(code)}}).Increment();
  request_duration_.Add({{"rpc", std::string(rpc)}}, kBuckets).Observe(seconds);
}

void Metrics::SetCompileCacheResults(uint64_t memory_hits, uint64_t disk_hits,
                                     uint64_t misses) {
  compile_cache_.Add({{"result", "memory_hit"}}).Set(static_cast<double>(memory_hits));
  compile_cache_.Add({{"result", "disk_hit"}}).Set(static_cast<double>(disk_hits));
  compile_cache_.Add({{"result", "miss"}}).Set(static_cast<double>(misses));
}

void Metrics::SetSharedMemory(uint64_t regions, uint64_t mapped_bytes) {
  shared_memory_regions_->Set(static_cast<double>(regions));
  shared_memory_bytes_->Set(static_cast<double>(mapped_bytes));
}

double Metrics::UptimeSeconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

std::string Metrics::Render() {
  uptime_->Set(UptimeSeconds());
  return prometheus::TextSerializer().Serialize(registry_->Collect());
}

}  // namespace gpucmd
