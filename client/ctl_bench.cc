#include "client/ctl_bench.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "client/ctl_output.h"
#include "client/submit_stream.h"

namespace gpucmd {
namespace {

using Clock = std::chrono::steady_clock;

constexpr char kEmptyKernel[] = R"(extern "C" __global__ void empty(int n) {})";
constexpr int kBatchSize = 64;

// The median time of `call`, repeated for about `seconds`, in microseconds.
absl::StatusOr<double> MedianMicroseconds(std::chrono::duration<double> seconds,
                                          const std::function<absl::Status()>& call) {
  std::vector<double> samples;
  const Clock::time_point end = Clock::now() + std::chrono::duration_cast<Clock::duration>(seconds);
  do {
    const Clock::time_point start = Clock::now();
    RETURN_IF_ERROR(call());
    samples.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
  } while (Clock::now() < end);
  std::nth_element(samples.begin(), samples.begin() + samples.size() / 2, samples.end());
  return samples[samples.size() / 2];
}

// Items per second: `round` (which returns how many items it did) repeated for about
// `seconds`, then `finish` (waiting for what the rounds queued), all timed.
absl::StatusOr<double> Rate(std::chrono::duration<double> seconds,
                            const std::function<absl::StatusOr<double>()>& round,
                            const std::function<absl::Status()>& finish) {
  const Clock::time_point start = Clock::now();
  double items = 0;
  do {
    absl::StatusOr<double> done = round();
    if (!done.ok()) return done.status();
    items += *done;
  } while (Clock::now() - start < seconds);
  RETURN_IF_ERROR(finish());
  return items / std::chrono::duration<double>(Clock::now() - start).count();
}

// `items` when `status` is OK.
absl::StatusOr<double> Did(double items, absl::Status status) {
  if (!status.ok()) return status;
  return items;
}

// Launches the session's kernel once: 1 when queued, 0 when the session's queue was
// full (backpressure: it waits for the queued ones first).
absl::StatusOr<double> LaunchOnce(Session& session, const std::function<absl::Status()>& launch) {
  absl::Status launched = launch();
  if (launched.ok()) return 1;
  if (!absl::IsResourceExhausted(launched)) return launched;
  RETURN_IF_ERROR(session.Synchronize());
  return 0;
}

// Sends one Submit batch of launches on `stream` and waits for its replies: how many were
// queued. A full queue (backpressure) makes it wait for the queued ones.
absl::StatusOr<double> SubmitLaunches(SubmitStream& stream, Session& session,
                                      const SubmitBatch& batch) {
  ASSIGN_OR_RETURN(BatchReplies replies, stream.Run(batch));
  double queued = 0;
  bool full = false;
  for (size_t i = 0; i < replies.size(); ++i) {
    const absl::Status status = replies.status(i);
    if (status.ok()) {
      ++queued;
    } else if (absl::IsResourceExhausted(status)) {
      full = true;
    } else {
      return status;
    }
  }
  if (full) RETURN_IF_ERROR(session.Synchronize());
  return queued;
}

// A rate in GB/s in the largest unit of bytes that keeps it at 1 or more (down to B/s): a
// transfer of a few bytes reads "1.15 kB/s", not "1.15e-06 GB/s". Other units unchanged.
std::pair<double, std::string> Readable(double value, const std::string& unit) {
  if (unit != "GB/s") return {value, unit};
  constexpr std::pair<double, const char*> kScales[] = {
      {1, "GB/s"}, {1e-3, "MB/s"}, {1e-6, "kB/s"}};
  for (const auto& [scale, name] : kScales) {
    if (value >= scale) return {value / scale, name};
  }
  return {value * 1e9, "B/s"};
}

}  // namespace

absl::Status ValidateBenchOptions(const BenchOptions& options) {
  if (options.transfer_bytes == 0) {
    return absl::InvalidArgumentError("the bytes per transfer (--bench_bytes) must be positive");
  }
  if (!(options.seconds.count() > 0) || !std::isfinite(options.seconds.count())) {
    return absl::InvalidArgumentError(
        "the seconds per figure (--bench_seconds) must be positive and finite");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<BenchRow>> RunHostBench(Client& client, const BenchOptions& options) {
  RETURN_IF_ERROR(ValidateBenchOptions(options));
  std::vector<BenchRow> rows;
  const auto seconds = options.seconds;
  auto add = [&](std::string what, const absl::StatusOr<double>& value, std::string unit) {
    BenchRow row{.what = std::move(what), .unit = std::move(unit)};
    if (value.ok()) {
      row.value = *value;
    } else {
      row.not_measured = std::string(value.status().message());
    }
    rows.push_back(std::move(row));
  };
  absl::StatusOr<Session> opened = client.OpenSession(0, "gpucmdctl-bench");
  if (!opened.ok()) return opened.status();
  Session& session = *opened;

  add("ListDevices round trip, median",
      MedianMicroseconds(seconds, [&] { return client.ListDevices().status(); }), "us");
  add("idle Synchronize, median",
      MedianMicroseconds(seconds, [&] { return session.Synchronize(); }), "us");

  const absl::StatusOr<v1::CompileResponse> kernel = session.Compile(kEmptyKernel, "empty");
  const LaunchShape one_thread{MakeDim3(1), MakeDim3(1)};
  const auto synchronize = [&] { return session.Synchronize(); };
  const auto nothing = [] { return absl::OkStatus(); };
  add("empty launches + Synchronize, unary",
      [&]() -> absl::StatusOr<double> {
        if (!kernel.ok()) return kernel.status();
        return Rate(
            seconds,
            [&] {
              return LaunchOnce(session, [&] {
                return session.Launch(kernel->kernel_id(), one_thread, {Int32Argument(0)});
              });
            },
            synchronize);
      }(),
      "launches/s");
  add(absl::StrCat("empty launches + Synchronize, Submit batches of ", kBatchSize),
      [&]() -> absl::StatusOr<double> {
        if (!kernel.ok()) return kernel.status();
        SubmitBatch batch(session);
        for (int i = 0; i < kBatchSize; ++i) {
          batch.Launch(kernel->kernel_id(), one_thread, {Int32Argument(0)});
        }
        absl::StatusOr<SubmitStream> stream = SubmitStream::Open(session);
        if (!stream.ok()) return stream.status();
        absl::StatusOr<double> rate = Rate(
            seconds, [&] { return SubmitLaunches(*stream, session, batch); }, synchronize);
        stream->Close().IgnoreError();  // a failure of the stream is the rate's
        return rate;
      }(),
      "launches/s");

  const uint64_t size = options.transfer_bytes;
  const double gigabytes = static_cast<double>(size) / 1e9;
  const std::string size_text = FormatBytes(size);
  // A transfer's rate once `ready` (there is a buffer, and a region if it needs one).
  auto add_transfer = [&](std::string what, const absl::Status& ready,
                          const std::function<absl::Status()>& transfer) {
    add(absl::StrCat(what, ", ", size_text),
        ready.ok() ? Rate(seconds, [&] { return Did(gigabytes, transfer()); }, nothing)
                   : absl::StatusOr<double>(ready),
        "GB/s");
  };
  absl::StatusOr<Buffer> buffer = session.Allocate(size);
  const std::string data(buffer.ok() ? size : 0, 'w');
  // Answered once its bytes landed: one round trip, as a shared-memory write's below.
  add_transfer("inline write answered once copied", buffer.status(), [&] {
    return session.Write(*buffer, 0, data, 0, std::nullopt, WriteReturns::kWhenCopied);
  });
  // Into memory kept across reads, as the write's bytes are: the client's allocator is
  // not what the row measures.
  std::vector<std::byte> landed(buffer.ok() ? size : 0, std::byte{0});
  add_transfer("inline read", buffer.status(),
               [&] { return session.Read(*buffer, 0, absl::MakeSpan(landed)); });
  absl::StatusOr<SharedMemoryRegion> region =
      buffer.ok() ? SharedMemoryRegion::Create(session, size)
                  : absl::StatusOr<SharedMemoryRegion>(buffer.status());
  if (region.ok()) std::memset(region->data(), 'w', size);
  // A shared-memory write returns once its bytes landed: no Synchronize to add.
  add_transfer("shared-memory write", region.status(),
               [&] { return session.Write(*buffer, 0, RegionSlice{*region, 0, size}); });
  add_transfer("shared-memory read", region.status(),
               [&] { return session.Read(*buffer, 0, RegionSlice{*region, 0, size}); });
  return rows;
}

std::string FormatBench(const std::vector<BenchRow>& rows, bool json) {
  std::string out;
  if (json) {
    out = "[";
    for (size_t i = 0; i < rows.size(); ++i) {
      const BenchRow& row = rows[i];
      absl::StrAppend(&out, i == 0 ? "" : ",", "{\"what\":", JsonString(row.what), ",\"value\":",
                      row.not_measured.empty() ? absl::StrFormat("%.6g", row.value) : "null",
                      ",\"unit\":", JsonString(row.unit));
      if (!row.not_measured.empty()) {
        absl::StrAppend(&out, ",\"not_measured\":", JsonString(row.not_measured));
      }
      absl::StrAppend(&out, "}");
    }
    return out + "]\n";
  }
  for (const BenchRow& row : rows) {
    if (row.not_measured.empty()) {
      const auto [value, unit] = Readable(row.value, row.unit);
      absl::StrAppend(&out, absl::StrFormat("%-46s %12.4g %s\n", row.what, value, unit));
    } else {
      absl::StrAppend(&out, absl::StrFormat("%-46s %12s (%s)\n", row.what, "not measured",
                                            row.not_measured));
    }
  }
  return out;
}

}  // namespace gpucmd
