// The daemon's config file: parse, default, validate (Note [Fuzzing]).

#include "server/config.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::StatusOr<gpucmd::v1::DaemonConfig> config =
      gpucmd::ParseConfigText(gpucmd::fuzzing::AsString(data, size), "fuzzed config");
  if (!config.ok()) return 0;
  gpucmd::ApplyConfigDefaults(&*config);
  gpucmd::ValidateConfig(*config).IgnoreError();
  return 0;
}
