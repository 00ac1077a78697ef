#ifndef GPUCMDD_BASE_RANDOM_TOKEN_H_
#define GPUCMDD_BASE_RANDOM_TOKEN_H_

// Unguessable names for things a client must hold to use (sessions, handed-over
// descriptors): 128 bits from the system's random source, as 32 hex digits.
//
// Thread-safety: may be called from any thread.

#include <string>

namespace gpucmd {

std::string RandomToken();

}  // namespace gpucmd

#endif  // GPUCMDD_BASE_RANDOM_TOKEN_H_
