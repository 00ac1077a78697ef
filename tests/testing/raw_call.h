#ifndef GPUCMDD_TESTS_TESTING_RAW_CALL_H_
#define GPUCMDD_TESTS_TESTING_RAW_CALL_H_

// Calls any gRPC method with a request body of arbitrary bytes, as a hostile client
// would: no stub, no serialization.

#include <memory>
#include <string>
#include <vector>

#include "grpcpp/grpcpp.h"

namespace gpucmd::testing {

// Sends `body` as the one request message of `method` ("/package.Service/Method") over
// `channel`, half-closes, reads every reply (into `replies`, when given, in order); the
// call's status. Gives up after 20 s.
grpc::Status CallWithRawBody(const std::shared_ptr<grpc::Channel>& channel,
                             const std::string& method, const std::string& body,
                             std::vector<std::string>* replies = nullptr);

// The same with `bodies` as the request messages, in order (a client stream).
grpc::Status CallWithRawBodies(const std::shared_ptr<grpc::Channel>& channel,
                               const std::string& method,
                               const std::vector<std::string>& bodies,
                               std::vector<std::string>* replies = nullptr);

}  // namespace gpucmd::testing

#endif  // GPUCMDD_TESTS_TESTING_RAW_CALL_H_
