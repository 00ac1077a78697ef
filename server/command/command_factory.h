#ifndef GPUCMDD_SERVER_COMMAND_COMMAND_FACTORY_H_
#define GPUCMDD_SERVER_COMMAND_COMMAND_FACTORY_H_

// Builds a device's Command<D> together with the backend it drives, for a device thread
// (server/core/device_worker.h) to run on its own thread. The returned CommandInterface
// keeps the backend alive and is destroyed before it.

#include <memory>
#include <optional>

#include "absl/functional/any_invocable.h"
#include "base/status_macros.h"
#include "server/command/command.h"

namespace gpucmd {

template <Driver D>
CommandFactory MakeCommandFactory(
    absl::AnyInvocable<absl::StatusOr<std::unique_ptr<typename D::Backend>>()> make_backend,
    CommandOptions options) {
  return [make_backend = std::move(make_backend),
          options]() mutable -> absl::StatusOr<std::shared_ptr<CommandInterface>> {
    struct State {
      std::unique_ptr<typename D::Backend> backend;
      std::optional<Command<D>> command;  // declared last: destroyed first
    };
    auto state = std::make_shared<State>();
    ASSIGN_OR_RETURN(state->backend, make_backend());
    state->command.emplace(*state->backend, options);
    return std::shared_ptr<CommandInterface>(state, &*state->command);
  };
}

}  // namespace gpucmd

#endif  // GPUCMDD_SERVER_COMMAND_COMMAND_FACTORY_H_
