#include "server/command_line.h"

#include "absl/strings/string_view.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace gpucmd {

std::string CommandLineUsage() {
  return R"(usage: gpucmdd [flags]
  --listen=unix:PATH|tcp:HOST:PORT   gRPC listener (repeatable)
  --http_listen=HOST:PORT            health and metrics endpoint (port 0: any free port)
  --config=FILE                      text-format gpucmd.v1.DaemonConfig
  --log_level=LEVEL                  trace, debug, info, warn, error, critical, off
  --check_config                     validate the configuration and exit (0 valid, 2 not)
  --version                          print the version and exit
  --help                             print this text and exit
)";
}

absl::StatusOr<CommandLine> ParseCommandLine(absl::Span<const char* const> args) {
  CommandLine result;
  for (size_t i = 1; i < args.size(); ++i) {
    absl::string_view arg = args[i];
    if (arg == "--version") {
      result.version = true;
      continue;
    }
    if (arg == "--check_config") {
      result.check_config = true;
      continue;
    }
    if (arg == "--help" || arg == "-h") {
      result.help = true;
      continue;
    }
    absl::string_view name = arg;
    std::optional<std::string> value;
    if (size_t equals = arg.find('='); equals != absl::string_view::npos) {
      name = arg.substr(0, equals);
      value = std::string(arg.substr(equals + 1));
    }
    std::optional<std::string>* target = nullptr;
    if (name == "--http_listen") {
      target = &result.http_listen;
    } else if (name == "--config") {
      target = &result.config_path;
    } else if (name == "--log_level") {
      target = &result.log_level;
    } else if (name != "--listen") {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag \"", arg, "\""));
    }
    if (!value) {
      if (i + 1 >= args.size() || absl::StartsWith(args[i + 1], "--")) {
        return absl::InvalidArgumentError(absl::StrCat("flag ", name, " needs a value"));
      }
      value = args[++i];
    }
    if (target == nullptr) {
      result.listen.push_back(*std::move(value));
    } else {
      *target = std::move(value);
    }
  }
  return result;
}

void ApplyCommandLine(const CommandLine& command_line, v1::DaemonConfig* config) {
  if (!command_line.listen.empty()) {
    config->clear_listen();
    for (const std::string& listen : command_line.listen) config->add_listen(listen);
  }
  if (command_line.http_listen) config->set_http_listen(*command_line.http_listen);
  if (command_line.log_level) config->set_log_level(*command_line.log_level);
}

}  // namespace gpucmd
