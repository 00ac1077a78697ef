#ifndef GPUCMDD_SERVER_COMMAND_LINE_H_
#define GPUCMDD_SERVER_COMMAND_LINE_H_

// gpucmdd's command line. Hand-parsed because --listen is repeatable, which absl flags
// cannot express (a repeated absl flag keeps only its last value).

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "gpucmd/v1/config.pb.h"

namespace gpucmd {

struct CommandLine {
  std::vector<std::string> listen;  // --listen, in order given
  std::optional<std::string> http_listen;
  std::optional<std::string> config_path;
  std::optional<std::string> log_level;
  bool version = false;
  bool check_config = false;
  bool help = false;
};

// The usage text printed by --help.
std::string CommandLineUsage();

// Parses argv[1..]. Accepts --flag=value and --flag value. INVALID_ARGUMENT names an
// unknown flag or a flag missing its value.
absl::StatusOr<CommandLine> ParseCommandLine(absl::Span<const char* const> args);

// Flags override the config file: any --listen replaces the file's listen list.
void ApplyCommandLine(const CommandLine& command_line, v1::DaemonConfig* config);

}  // namespace gpucmd

#endif  // GPUCMDD_SERVER_COMMAND_LINE_H_
