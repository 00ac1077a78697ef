// Random and mutated request bodies for every RPC of the service, against a running
// daemon (CPU driver): each call must end with one of the documented status codes and a
// message, and the daemon must keep serving. Requests are built by reflection from each
// method's request type (so new fields are fuzzed too), with values near the real ones
// (the session's token, a buffer, a compiled kernel) so they get past the first checks;
// half are then mutated byte by byte. FUZZ_ITERATIONS (default 4000) sets how many
// calls; FUZZ_SEED the seed. Run longer with e.g.
//   bazel test //tests/integration:request_fuzz_test --test_timeout=3600
//       --test_env=FUZZ_ITERATIONS=100000 --test_env=FUZZ_SEED=7

#include <cstdlib>
#include <map>
#include <random>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "client/client.h"
#include "gmock/gmock.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/dynamic_message.h"
#include "google/protobuf/message.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/testing/daemon_process.h"
#include "tests/testing/raw_call.h"

namespace gpucmd {
namespace {

using ::gpucmd::testing::CallWithRawBody;
using ::gpucmd::testing::DaemonProcess;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

uint64_t EnvOr(const char* name, uint64_t fallback) {
  uint64_t value = fallback;
  const char* text = std::getenv(name);
  return text != nullptr && absl::SimpleAtoi(text, &value) ? value : fallback;
}

// What a request may be answered: the error table of the README. INTERNAL, UNKNOWN,
// DATA_LOSS and UNAVAILABLE (the daemon is healthy) are bugs.
const std::set<grpc::StatusCode>& DocumentedCodes() {
  static const auto* const kCodes = new std::set<grpc::StatusCode>{
      grpc::StatusCode::OK,
      grpc::StatusCode::INVALID_ARGUMENT,
      grpc::StatusCode::NOT_FOUND,
      grpc::StatusCode::RESOURCE_EXHAUSTED,
      grpc::StatusCode::FAILED_PRECONDITION,
      grpc::StatusCode::ABORTED,
      grpc::StatusCode::OUT_OF_RANGE,
      grpc::StatusCode::DEADLINE_EXCEEDED,
      grpc::StatusCode::UNIMPLEMENTED};
  return *kCodes;
}

// Fills messages with values near the daemon's real ones.
class RequestMaker {
 public:
  RequestMaker(uint32_t seed, std::string session, uint64_t buffer, std::string kernel_id)
      : random_(seed),
        session_(std::move(session)),
        buffer_(buffer),
        kernel_id_(std::move(kernel_id)) {}

  std::string Make(const google::protobuf::Descriptor* type) {
    std::unique_ptr<Message> message(factory_.GetPrototype(type)->New());
    Fill(message.get(), 0);
    std::string body = message->SerializeAsString();
    if (Chance(2)) Mutate(&body);
    return body;
  }

 private:
  bool Chance(int one_in) { return random_() % one_in == 0; }

  uint64_t Number(const FieldDescriptor* field) {
    if (Chance(50)) return random_() | (uint64_t{random_()} << 32);  // anything at all
    const std::string& name = field->name();
    if (name == "buffer" || name == "source_buffer" || name == "target_buffer") {
      return Chance(4) ? random_() % 8 : buffer_;
    }
    if (name == "x" || name == "y" || name == "z") return random_() % 4;  // small launches
    if (absl::StrContains(name, "bytes") || name == "offset") return random_() % 8192;
    return random_() % 8;
  }

  std::string Text(const FieldDescriptor* field) {
    if (field->name() == "session") return Chance(8) ? "" : session_;
    if (field->name() == "kernel_id") return Chance(4) ? std::string(64, 'a') : kernel_id_;
    if (field->name() == "entry_point") return "k";
    if (field->name() == "source") return "extern \"C\" __global__ void k(float* x) {}";
    std::string text(random_() % 16, '\0');
    for (char& c : text) c = static_cast<char>(random_());
    return text;
  }

  void SetOne(Message* message, const FieldDescriptor* field, int depth) {
    const Reflection* reflection = message->GetReflection();
    const bool repeated = field->is_repeated();
    switch (field->cpp_type()) {
      case FieldDescriptor::CPPTYPE_MESSAGE:
        if (depth < 4) {
          Fill(repeated ? reflection->AddMessage(message, field, &factory_)
                        : reflection->MutableMessage(message, field, &factory_),
               depth + 1);
        }
        break;
      case FieldDescriptor::CPPTYPE_STRING:
        repeated ? reflection->AddString(message, field, Text(field))
                 : reflection->SetString(message, field, Text(field));
        break;
      case FieldDescriptor::CPPTYPE_UINT64:
        repeated ? reflection->AddUInt64(message, field, Number(field))
                 : reflection->SetUInt64(message, field, Number(field));
        break;
      case FieldDescriptor::CPPTYPE_UINT32:
        repeated ? reflection->AddUInt32(message, field, static_cast<uint32_t>(Number(field)))
                 : reflection->SetUInt32(message, field, static_cast<uint32_t>(Number(field)));
        break;
      case FieldDescriptor::CPPTYPE_INT64:
        repeated ? reflection->AddInt64(message, field, static_cast<int64_t>(Number(field)))
                 : reflection->SetInt64(message, field, static_cast<int64_t>(Number(field)));
        break;
      case FieldDescriptor::CPPTYPE_INT32:
        repeated ? reflection->AddInt32(message, field, static_cast<int32_t>(Number(field)))
                 : reflection->SetInt32(message, field, static_cast<int32_t>(Number(field)));
        break;
      case FieldDescriptor::CPPTYPE_BOOL:
        repeated ? reflection->AddBool(message, field, Chance(2))
                 : reflection->SetBool(message, field, Chance(2));
        break;
      case FieldDescriptor::CPPTYPE_FLOAT:
      case FieldDescriptor::CPPTYPE_DOUBLE:
        break;  // scalars of launches: any value is fine
      case FieldDescriptor::CPPTYPE_ENUM: {
        const auto* values = field->enum_type();
        const auto* value = values->value(static_cast<int>(random_() % values->value_count()));
        repeated ? reflection->AddEnum(message, field, value)
                 : reflection->SetEnum(message, field, value);
        break;
      }
    }
  }

  void Fill(Message* message, int depth) {
    const google::protobuf::Descriptor* type = message->GetDescriptor();
    for (int i = 0; i < type->field_count(); ++i) {
      const FieldDescriptor* field = type->field(i);
      if (!Chance(3) && field->containing_oneof() == nullptr) continue;
      if (field->containing_oneof() != nullptr && !Chance(2)) continue;
      const int count = field->is_repeated() ? static_cast<int>(random_() % 4) : 1;
      for (int n = 0; n < count; ++n) SetOne(message, field, depth);
    }
  }

  void Mutate(std::string* body) {
    for (int edits = 1 + static_cast<int>(random_() % 4); edits > 0; --edits) {
      const size_t at = body->empty() ? 0 : random_() % body->size();
      switch (random_() % 4) {
        case 0:
          if (!body->empty()) (*body)[at] = static_cast<char>((*body)[at] ^ (1 << (random_() % 8)));
          break;
        case 1:
          body->insert(body->begin() + static_cast<std::ptrdiff_t>(at),
                       static_cast<char>(random_()));
          break;
        case 2:
          if (!body->empty()) body->erase(at, 1);
          break;
        case 3:
          body->resize(at);  // truncated
          break;
      }
    }
  }

  std::mt19937 random_;
  const std::string session_;
  const uint64_t buffer_;
  const std::string kernel_id_;
  google::protobuf::DynamicMessageFactory factory_;
};

TEST(RequestFuzzTest, EveryRpcAnswersDocumentedCodesAndTheDaemonServesOn) {
  absl::StatusOr<DaemonProcess> daemon = DaemonProcess::StartWithConfig(absl::StrCat(
      "cpu { memory_bytes_per_device: ", 64 << 20,
      " kernel_timeout_seconds: 2 executor_workers: 2 }\n"
      "compile { cache_dir: \"{dir}/cache\" }\n"));
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(daemon->grpc_target());
  ASSERT_TRUE(client.ok()) << client.status();
  absl::StatusOr<Session> session = (*client)->OpenSession(0, "fuzzed");
  ASSERT_TRUE(session.ok()) << session.status();
  absl::StatusOr<Buffer> buffer = session->Allocate(4096);
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  absl::StatusOr<v1::CompileResponse> kernel =
      session->Compile("extern \"C\" __global__ void k(float* x) {}", "k");
  ASSERT_TRUE(kernel.ok()) << kernel.status();

  const google::protobuf::ServiceDescriptor* service =
      google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(
          "gpucmd.v1.GpuCommand");
  ASSERT_NE(service, nullptr);
  const uint64_t iterations = EnvOr("FUZZ_ITERATIONS", 4000);
  const uint32_t seed = static_cast<uint32_t>(EnvOr("FUZZ_SEED", 1));
  RequestMaker maker(seed, session->token(), buffer->id(), kernel->kernel_id());
  std::mt19937 pick(seed);
  auto channel = grpc::CreateChannel(daemon->grpc_target(), grpc::InsecureChannelCredentials());
  std::map<std::string, std::map<int, int>> outcomes;  // method -> code -> calls
  for (uint64_t i = 0; i < iterations; ++i) {
    const auto* method = service->method(static_cast<int>(pick() % service->method_count()));
    if (method->name() == "CloseSession") continue;  // the session the others use
    const std::string body = maker.Make(method->input_type());
    grpc::Status status =
        CallWithRawBody(channel, "/gpucmd.v1.GpuCommand/" + method->name(), body);
    ++outcomes[method->name()][status.error_code()];
    ASSERT_TRUE(DocumentedCodes().contains(status.error_code()))
        << method->name() << " answered " << status.error_code() << ": "
        << status.error_message() << " (seed " << seed << ", call " << i
        << "); the daemon's log ends:\n"
        << daemon->StderrText().substr(
               daemon->StderrText().size() - std::min<size_t>(daemon->StderrText().size(), 4000));
    if (!status.ok()) {
      EXPECT_FALSE(status.error_message().empty())
          << method->name() << " answered " << status.error_code() << " with no message";
    }
  }
  for (const auto& [method, codes] : outcomes) {
    std::string line = method + ":";
    for (const auto& [code, calls] : codes) absl::StrAppend(&line, " ", code, "x", calls);
    std::cout << line << "\n";
  }
  EXPECT_TRUE((*client)->ListDevices().ok()) << "the daemon stopped serving";
  absl::StatusOr<Session> after = (*client)->OpenSession(0, "after");
  ASSERT_TRUE(after.ok()) << after.status();
  absl::StatusOr<Buffer> fresh = after->Allocate(16);
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  ASSERT_TRUE(after->Write(*fresh, 0, "sixteen bytes!!!").ok());
  EXPECT_EQ(after->Read(*fresh, 0, 16).value_or(""), "sixteen bytes!!!");
}

}  // namespace
}  // namespace gpucmd
