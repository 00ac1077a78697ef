#include "server/restart_request.h"

#include <unistd.h>

#include <ctime>

#include "gtest/gtest.h"

namespace gpucmd {
namespace {

// The next SIGTERM, taken as main takes it (the caller blocked it).
siginfo_t NextTerm() {
  sigset_t term;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  siginfo_t info{};
  const timespec limit{.tv_sec = 10, .tv_nsec = 0};
  EXPECT_EQ(sigtimedwait(&term, &info, &limit), SIGTERM);
  return info;
}

TEST(RestartRequestTest, TheDaemonsOwnRequestIsToldFromAnOperatorsSigterm) {
  sigset_t term;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  ASSERT_EQ(pthread_sigmask(SIG_BLOCK, &term, nullptr), 0);

  RequestRestart();
  EXPECT_TRUE(IsRestartRequest(NextTerm()));

  kill(getpid(), SIGTERM);
  EXPECT_FALSE(IsRestartRequest(NextTerm()));

  sigval other{};
  other.sival_int = 1;
  sigqueue(getpid(), SIGTERM, other);
  EXPECT_FALSE(IsRestartRequest(NextTerm())) << "a queued SIGTERM with another value";
}

}  // namespace
}  // namespace gpucmd
