#ifndef GPUCMDD_SERVER_VERSION_H_
#define GPUCMDD_SERVER_VERSION_H_

namespace gpucmd {

inline constexpr char kVersion[] = "0.1.0";

}  // namespace gpucmd

#endif  // GPUCMDD_SERVER_VERSION_H_
