// ThreadSanitizer suppressions for tests that run gRPC in-process (linked into them with
// alwayslink, read by TSan at start-up through __tsan_default_suppressions).
//
// Why they are needed: Debian's libgrpc, libgrpc++, libgpr and abseil are not built with
// ThreadSanitizer. The completion queues, combiners and absl::Mutex through which gRPC
// hands a call from one of its threads to another are invisible to TSan, so every access
// to call state on either side of such a hand-off (gRPC's own header templates compiled
// into our binaries, the request and response messages it fills, the reactor it deletes
// in OnDone) looks unsynchronised. Each entry names the frames of those libraries only:
//   - race_top: the racing access itself is in gRPC, abseil or protobuf code;
//   - called_from_lib: memory interceptors (memcpy, free, ...) called from inside the
//     uninstrumented libraries.
// Our own code is not listed: a race whose top frame is ours is still reported, and the
// hand-offs between our threads (device queue, completions) use std::mutex, which TSan
// sees.

extern "C" const char* __tsan_default_suppressions() {
  return "race_top:grpc::\n"
         "race_top:grpc_core::\n"
         "race_top:grpc_event_engine::\n"
         "race_top:^grpc_\n"
         "race_top:absl::\n"
         "race_top:google::protobuf::\n"
         // Request and response messages: gRPC parses, fills and destroys them on its
         // threads around the reactor callbacks that use them.
         "race:gpucmd::v1::\n"
         "race:google::protobuf::\n"
         // The call state of the streams served raw (KeepAlive, Write, Read, Submit:
         // gRPC's handler templates over ByteBuffer), which gRPC finishes and frees on
         // its threads.
         "race:grpc::internal::CallbackClientStreamingHandler\n"
         "race:grpc::internal::CallbackServerStreamingHandler\n"
         "race:grpc::internal::CallbackBidiHandler\n"
         // The closure gRPC starts each call with, run and destroyed on its threads.
         "race:grpc::Server::CallbackRequest\n"
         // A reactor deletes itself in OnDone, which gRPC runs after the call's last
         // callback, possibly on another of its threads.
         "race:gpucmd::SubmitReactor::OnDone\n"
         "race:gpucmd::ReadReactor::OnDone\n"
         "race:gpucmd::WriteReactor::OnDone\n"
         "race:gpucmd::KeepAliveReactor::OnDone\n"
         "called_from_lib:libgrpc.so\n"
         "called_from_lib:libgrpc++.so\n"
         "called_from_lib:libgpr.so\n"
         "called_from_lib:libabsl_synchronization.so\n"
         // absl::Status payloads gRPC converts and frees on its threads.
         "called_from_lib:libabsl_status.so\n"
         "called_from_lib:libabsl_graphcycles_internal.so\n"
         "called_from_lib:libprotobuf.so\n";
}
