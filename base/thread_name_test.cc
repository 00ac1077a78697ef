#include "base/thread_name.h"

#include <string>
#include <thread>

#include "gtest/gtest.h"

namespace gpucmd {
namespace {

TEST(ThreadNameTest, NamesTheCallingThreadOnly) {
  const std::string before = NameOfThisThread();
  std::string seen_inside;
  std::thread named([&] {
    NameThisThread("gpucmd-test");
    seen_inside = NameOfThisThread();
  });
  named.join();
  EXPECT_EQ(seen_inside, "gpucmd-test");
  EXPECT_EQ(NameOfThisThread(), before);
}

TEST(ThreadNameTest, LongNamesAreCutToWhatLinuxKeeps) {
  std::string seen;
  std::thread named([&] {
    NameThisThread("gpucmd-completion-thread-17");
    seen = NameOfThisThread();
  });
  named.join();
  EXPECT_EQ(seen, std::string("gpucmd-completion-thread-17").substr(0, kMaxThreadNameBytes));
}

}  // namespace
}  // namespace gpucmd
