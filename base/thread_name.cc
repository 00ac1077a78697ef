#include "base/thread_name.h"

#include <pthread.h>

#include <algorithm>

namespace gpucmd {

void NameThisThread(std::string_view name) {
  const std::string kept(name.substr(0, std::min(name.size(), kMaxThreadNameBytes)));
  (void)pthread_setname_np(pthread_self(), kept.c_str());
}

std::string NameOfThisThread() {
  char name[kMaxThreadNameBytes + 1] = {};
  if (pthread_getname_np(pthread_self(), name, sizeof(name)) != 0) return "";
  return name;
}

}  // namespace gpucmd
