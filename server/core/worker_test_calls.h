#ifndef GPUCMDD_SERVER_CORE_WORKER_TEST_CALLS_H_
#define GPUCMDD_SERVER_CORE_WORKER_TEST_CALLS_H_

// For tests: blocking calls through a DeviceWorker, each run as one task on its device
// thread while the calling thread waits for the result.

#include <functional>
#include <future>
#include <optional>
#include <string>

#include "base/status_macros.h"
#include "gtest/gtest.h"
#include "server/core/device_worker.h"

namespace gpucmd {

// Runs `work` on the device thread and waits for its result.
template <typename Result>
Result OnDevice(DeviceWorker& worker, SessionId session,
                std::function<Result(CommandInterface&)> work) {
  std::promise<Result> promise;
  absl::Status submitted = worker.Submit(session, [&](CommandInterface& command) {
    promise.set_value(work(command));
  });
  EXPECT_TRUE(submitted.ok()) << submitted;
  return promise.get_future().get();
}

// Allocates a buffer of data.size() bytes and writes `data` to it.
inline absl::StatusOr<BufferId> AllocateAndWrite(DeviceWorker& worker, SessionId session,
                                                 const std::string& data) {
  return OnDevice<absl::StatusOr<BufferId>>(
      worker, session, [&](CommandInterface& command) -> absl::StatusOr<BufferId> {
        ASSIGN_OR_RETURN(BufferId id, command.Allocate(session, data.size()));
        RETURN_IF_ERROR(command.Write(session, 0, id, CopyLayout::Contiguous(0, data.size()),
                                      data));
        return id;
      });
}

// Reads the first `size` bytes of the buffer; waits for the copy on the calling thread.
inline absl::StatusOr<std::string> ReadBack(DeviceWorker& worker, SessionId session,
                                            BufferId id, uint64_t size) {
  return OnDevice<absl::StatusOr<std::string>>(
      worker, session, [&](CommandInterface& command) -> absl::StatusOr<std::string> {
        ASSIGN_OR_RETURN(PendingRead read,
                         command.Read(session, 0, id, CopyLayout::Contiguous(0, size)));
        RETURN_IF_ERROR(read.wait());
        return read.bytes.ToString();
      });
}

inline absl::Status SynchronizeAll(DeviceWorker& worker, SessionId session) {
  return OnDevice<absl::Status>(worker, session, [&](CommandInterface& command) {
    return WaitFor(command.Synchronize(session, std::nullopt));
  });
}

}  // namespace gpucmd

#endif  // GPUCMDD_SERVER_CORE_WORKER_TEST_CALLS_H_
