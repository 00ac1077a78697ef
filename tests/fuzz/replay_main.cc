// Runs a fuzz harness (Note [Fuzzing] in tests/fuzz/fuzz_input.h) over every file of the
// directories given as arguments: the seed corpus, replayed as a test.

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "tests/fuzz/fuzz_input.h"

int main(int argc, char** argv) {
  int inputs = 0;
  for (int i = 1; i < argc; ++i) {
    for (const auto& entry : std::filesystem::directory_iterator(argv[i])) {
      std::ifstream file(entry.path(), std::ios::binary);
      std::stringstream contents;
      contents << file.rdbuf();
      const std::string input = contents.str();
      LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(input.data()), input.size());
      ++inputs;
    }
  }
  std::printf("replayed %d input(s)\n", inputs);
  return inputs > 0 ? 0 : 1;
}
