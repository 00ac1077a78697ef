// Random and mutated request bodies for every RPC of the service, against a running
// daemon (CPU driver): each call must end with one of the documented status codes and a
// message, and the daemon must keep serving. Requests are built by reflection from each
// method's request type (so new fields are fuzzed too), with values near the real ones
// (the session's token, a buffer, a compiled kernel) so they get past the first checks;
// half are then mutated byte by byte. Submit gets a test of its own: batches of random
// commands, several per call, each command of which must be answered once, in order.
// FUZZ_ITERATIONS (default 4000) sets how many calls; FUZZ_SEED the seed. Run longer
// with e.g.
//   bazel test //tests/integration:request_fuzz_test --test_timeout=3600
//       --test_env=FUZZ_ITERATIONS=100000 --test_env=FUZZ_SEED=7

#include <chrono>
#include <cstdlib>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "client/client.h"
#include "gmock/gmock.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/dynamic_message.h"
#include "google/protobuf/message.h"
#include "gpucmd/v1/gpucmd.pb.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/testing/daemon_process.h"
#include "tests/testing/raw_call.h"

namespace gpucmd {
namespace {

using ::gpucmd::testing::CallWithRawBodies;
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

  // A message of `type`, serialized, mutated one time in `mutate_one_in`.
  std::string Make(const google::protobuf::Descriptor* type, int mutate_one_in = 2) {
    std::unique_ptr<Message> message(factory_.GetPrototype(type)->New());
    Fill(message.get(), 0);
    std::string body = message->SerializeAsString();
    if (Chance(mutate_one_in)) Mutate(&body);
    return body;
  }

  // A SubmitRequest of 1 to 16 commands, half of them well formed (WellFormed), the
  // others random (some of them mutated), asking for streamed replies half the time; the
  // whole request mutated one time in eight.
  std::string MakeBatch() {
    v1::SubmitRequest request;
    const int commands = 1 + static_cast<int>(random_() % 16);
    std::vector<uint64_t> allocations;  // the sequences of its well-formed Allocates
    for (int i = 0; i < commands; ++i) {
      if (Chance(2)) {
        *request.add_commands() = WellFormed(static_cast<uint64_t>(i), allocations);
        continue;
      }
      std::string command = Make(v1::Command::descriptor(), /*mutate_one_in=*/8);
      if (!request.add_commands()->ParseFromString(command)) {
        request.mutable_commands()->RemoveLast();
      }
    }
    request.set_stream_replies(Chance(2));
    std::string body = request.SerializeAsString();
    if (Chance(8)) Mutate(&body);
    return body;
  }

  bool Chance(int one_in) { return random_() % one_in == 0; }

 private:
  // Command `index` of a batch, its sequence `index`, of a random kind and well formed:
  // it names the session, the kernel, and a buffer: mostly (through `buffer_ref`) one of
  // the batch's earlier `allocations` (to which an Allocate adds itself), else the
  // buffer or any earlier command. Sizes and offsets straddle the buffers' ends; one
  // allocation in eight cannot fit.
  v1::Command WellFormed(uint64_t index, std::vector<uint64_t>& allocations) {
    v1::Command command;
    command.set_sequence(index);
    const uint64_t stream = random_() % 3;
    // A buffer_ref: an earlier Allocate, else any earlier command (or itself, the first).
    auto earlier = [&] {
      if (!allocations.empty() && !Chance(4)) return allocations[random_() % allocations.size()];
      return index > 0 ? random_() % index : 0;
    };
    // Calls set_buffer_ref (earlier()) or, one time in four, set_buffer on `request`.
    auto name_buffer = [&](auto* request, auto set_buffer, auto set_buffer_ref) {
      if (Chance(4)) {
        (request->*set_buffer)(buffer_);
      } else {
        (request->*set_buffer_ref)(earlier());
      }
    };
    // Allocates first more often, so that later commands have buffers to name.
    switch (allocations.empty() && Chance(2) ? 0 : random_() % 8) {
      case 0: {
        v1::AllocateRequest* allocate = command.mutable_allocate();
        allocate->set_session(session_);
        allocate->set_size_bytes(Chance(8) ? uint64_t{1} << 40 : random_() % 8192);
        allocations.push_back(index);
        break;
      }
      case 1: {  // only of the batch's own allocations: the buffer stays for the others
        v1::FreeRequest* free = command.mutable_free();
        free->set_session(session_);
        free->set_buffer_ref(earlier());
        break;
      }
      case 2: {
        v1::WriteRequest* write = command.mutable_write();
        v1::WriteHeader* header = write->mutable_header();
        header->set_session(session_);
        header->set_stream(stream);
        name_buffer(header, &v1::WriteHeader::set_buffer, &v1::WriteHeader::set_buffer_ref);
        header->set_offset_bytes(random_() % 4608);
        write->set_data(std::string(random_() % 640, static_cast<char>(random_())));
        header->set_inline_size_bytes(Chance(8) ? random_() % 640 : write->data().size());
        break;
      }
      case 3: {
        v1::ReadRequest* read = command.mutable_read();
        read->set_session(session_);
        read->set_stream(stream);
        name_buffer(read, &v1::ReadRequest::set_buffer, &v1::ReadRequest::set_buffer_ref);
        read->set_offset_bytes(random_() % 4608);
        read->set_size_bytes(random_() % 640);
        break;
      }
      case 4: {
        v1::CopyRequest* copy = command.mutable_copy();
        copy->set_session(session_);
        copy->set_stream(stream);
        name_buffer(copy, &v1::CopyRequest::set_source_buffer,
                    &v1::CopyRequest::set_source_buffer_ref);
        name_buffer(copy, &v1::CopyRequest::set_target_buffer,
                    &v1::CopyRequest::set_target_buffer_ref);
        copy->set_source_offset_bytes(random_() % 4608);
        copy->set_target_offset_bytes(random_() % 4608);
        if (random_() % 3 == 0) {  // rows, of strides that may be too short or too long
          v1::PitchedCopyRows* rows = copy->mutable_pitched();
          rows->set_width_bytes(random_() % 64);
          rows->set_height(random_() % 80);
          rows->set_source_stride_bytes(random_() % 96);
          rows->set_target_stride_bytes(random_() % 96);
        } else {
          copy->set_size_bytes(random_() % 1024);
        }
        break;
      }
      case 5: {
        v1::LaunchRequest* launch = command.mutable_launch();
        launch->set_session(session_);
        launch->set_stream(stream);
        launch->set_kernel_id(kernel_id_);
        for (v1::Dim3* dim : {launch->mutable_grid(), launch->mutable_block()}) {
          dim->set_x(1 + random_() % 3);
          dim->set_y(1);
          dim->set_z(1);
        }
        v1::BufferArg* arg = launch->add_args()->mutable_buffer();
        name_buffer(arg, &v1::BufferArg::set_buffer, &v1::BufferArg::set_buffer_ref);
        arg->set_access(static_cast<v1::Access>(random_() % 4));
        break;
      }
      case 6: {
        v1::FillRequest* fill = command.mutable_fill();
        fill->set_session(session_);
        fill->set_stream(stream);
        name_buffer(fill, &v1::FillRequest::set_buffer, &v1::FillRequest::set_buffer_ref);
        fill->set_offset_bytes(random_() % 4608);
        fill->set_size_bytes(random_() % 1024);
        fill->set_value(Chance(4) ? random_() : random_() % 256);
        fill->set_element_bytes(random_() % 6);
        break;
      }
      default: {
        v1::SynchronizeRequest* synchronize = command.mutable_synchronize();
        synchronize->set_session(session_);
        if (Chance(2)) synchronize->set_stream(stream);
        break;
      }
    }
    return command;
  }

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

// Prints `what` and how many calls (or replies) ended with each code.
void PrintCodes(const std::string& what, const std::map<int, int>& codes) {
  std::string line = what + ":";
  for (const auto& [code, count] : codes) absl::StrAppend(&line, " ", code, "x", count);
  std::cout << line << "\n";
}

// A daemon with a session, a buffer and a compiled kernel for the requests to name.
class RequestFuzzTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<DaemonProcess> started = DaemonProcess::StartWithConfig(absl::StrCat(
        "cpu { memory_bytes_per_device: ", 64 << 20,
        " kernel_timeout_seconds: 2 executor_workers: 2 }\n"
        "compile { cache_dir: \"{dir}/cache\" }\n"));
    ASSERT_TRUE(started.ok()) << started.status();
    daemon_.emplace(*std::move(started));
    absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(daemon_->grpc_target());
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = *std::move(client);
    absl::StatusOr<Session> session = client_->OpenSession(0, "fuzzed");
    ASSERT_TRUE(session.ok()) << session.status();
    absl::StatusOr<Buffer> buffer = session->Allocate(4096);
    ASSERT_TRUE(buffer.ok()) << buffer.status();
    absl::StatusOr<v1::CompileResponse> kernel =
        session->Compile("extern \"C\" __global__ void k(float* x) {}", "k");
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    buffer_id_ = buffer->id();
    kernel_id_ = kernel->kernel_id();
    maker_.emplace(seed_, session->token(), buffer_id_, kernel_id_);
    session_.emplace(*std::move(session));
    channel_ = grpc::CreateChannel(daemon_->grpc_target(), grpc::InsecureChannelCredentials());
  }

  // The end of the daemon's log, for a failure's message.
  std::string LogTail() const {
    const std::string log = daemon_->StderrText();
    return log.substr(log.size() - std::min<size_t>(log.size(), 4000));
  }

  // Device memory in use once the daemon has no work in flight (frees behind work wait
  // for it); gives up waiting after 20 s.
  uint64_t MemoryUsedOnceIdle() {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (true) {
      absl::StatusOr<v1::GetStatsResponse> stats = client_->GetStats();
      EXPECT_TRUE(stats.ok()) << stats.status();
      if (!stats.ok()) return ~uint64_t{0};
      const v1::DeviceStats& device = stats->devices(0);
      if ((device.memory_used_bytes() == 0 && device.commands_in_flight() == 0) ||
          std::chrono::steady_clock::now() > deadline) {
        return device.memory_used_bytes();
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }

  // Names call `i` in failures.
  std::string Call(uint64_t i) const { return absl::StrCat("(seed ", seed_, ", call ", i, ")"); }

  // After a fuzz: closes the session the requests named and expects every byte of device
  // memory given back (whatever the requests left allocated, up to the whole device, goes
  // with their session) and the daemon serving.
  void ExpectEverythingGivenBack() {
    ASSERT_TRUE(session_->Close().ok());
    EXPECT_EQ(MemoryUsedOnceIdle(), 0u);
    ExpectServing();
  }

  // The daemon still serves: a fresh session writes and reads back.
  void ExpectServing() {
    EXPECT_TRUE(client_->ListDevices().ok()) << "the daemon stopped serving";
    absl::StatusOr<Session> after = client_->OpenSession(0, "after");
    ASSERT_TRUE(after.ok()) << after.status();
    absl::StatusOr<Buffer> fresh = after->Allocate(16);
    ASSERT_TRUE(fresh.ok()) << fresh.status();
    ASSERT_TRUE(after->Write(*fresh, 0, "sixteen bytes!!!").ok());
    EXPECT_EQ(after->Read(*fresh, 0, 16).value_or(""), "sixteen bytes!!!");
  }

  const uint64_t iterations_ = EnvOr("FUZZ_ITERATIONS", 4000);
  const uint32_t seed_ = static_cast<uint32_t>(EnvOr("FUZZ_SEED", 1));
  std::optional<DaemonProcess> daemon_;
  std::unique_ptr<Client> client_;
  std::optional<Session> session_;
  uint64_t buffer_id_ = 0;
  std::string kernel_id_;
  std::optional<RequestMaker> maker_;
  std::shared_ptr<grpc::Channel> channel_;
};

TEST_F(RequestFuzzTest, EveryRpcAnswersDocumentedCodesAndTheDaemonServesOn) {
  const google::protobuf::ServiceDescriptor* service =
      google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(
          "gpucmd.v1.GpuCommand");
  ASSERT_NE(service, nullptr);
  std::mt19937 pick(seed_);
  std::map<std::string, std::map<int, int>> outcomes;  // method -> code -> calls
  for (uint64_t i = 0; i < iterations_; ++i) {
    const auto* method = service->method(static_cast<int>(pick() % service->method_count()));
    if (method->name() == "CloseSession") continue;  // the session the others use
    const std::string body = maker_->Make(method->input_type());
    std::vector<std::string> replies;
    grpc::Status status =
        CallWithRawBody(channel_, "/gpucmd.v1.GpuCommand/" + method->name(), body, &replies);
    ++outcomes[method->name()][status.error_code()];
    if (method->name() == "OpenSession" && status.ok()) {
      // Closed at once: a long run would otherwise reach the per-client session limit.
      v1::OpenSessionResponse opened;
      ASSERT_TRUE(replies.size() == 1 && opened.ParseFromString(replies[0])) << Call(i);
      v1::CloseSessionRequest close;
      close.set_session(opened.session());
      grpc::Status closed = CallWithRawBody(channel_, "/gpucmd.v1.GpuCommand/CloseSession",
                                            close.SerializeAsString());
      EXPECT_TRUE(closed.ok()) << closed.error_message() << " " << Call(i);
    }
    ASSERT_TRUE(DocumentedCodes().contains(status.error_code()))
        << method->name() << " answered " << status.error_code() << ": "
        << status.error_message() << " (seed " << seed_ << ", call " << i
        << "); the daemon's log ends:\n"
        << LogTail();
    if (!status.ok()) {
      EXPECT_FALSE(status.error_message().empty())
          << method->name() << " answered " << status.error_code() << " with no message";
    }
  }
  for (const auto& [method, codes] : outcomes) PrintCodes(method, codes);
  ExpectEverythingGivenBack();
}

// Checks the answers to a Submit call that sent `batches`: a batch that parses is
// answered, in the batches' order, by `responses` whose replies name its commands'
// sequences once each, in order, each with a documented code (and a message when it
// failed); the call ends OK, or INVALID_ARGUMENT after the batches before the first one
// that does not parse. Counts the replies' codes into `reply_codes`; `call` names the
// call in failures.
void CheckSubmitAnswers(const std::vector<std::string>& batches,
                        const std::vector<std::string>& responses, const grpc::Status& status,
                        const std::string& call, std::map<int, int>& reply_codes) {
  size_t response = 0;
  bool all_parsed = true;
  for (const std::string& body : batches) {
    v1::SubmitRequest request;
    if (!request.ParseFromString(body)) {
      all_parsed = false;
      break;
    }
    bool done = false;
    int replied = 0;
    while (!done && response < responses.size()) {
      v1::SubmitResponse answer;
      ASSERT_TRUE(answer.ParseFromString(responses[response++])) << call;
      done = answer.batch_done();
      for (const v1::CommandReply& reply : answer.replies()) {
        ASSERT_LT(replied, request.commands_size()) << "an extra reply " << call;
        EXPECT_EQ(reply.sequence(), request.commands(replied).sequence())
            << "reply " << replied << " " << call;
        const int code = reply.status().code();
        ++reply_codes[code];
        EXPECT_TRUE(DocumentedCodes().contains(static_cast<grpc::StatusCode>(code)))
            << "command " << replied << " answered " << code << ": "
            << reply.status().message() << " " << call;
        if (code != 0) {
          EXPECT_FALSE(reply.status().message().empty()) << call;
        }
        ++replied;
      }
    }
    ASSERT_TRUE(done) << "a batch was not answered to its end " << call << ": "
                      << status.error_code() << " " << status.error_message();
    EXPECT_EQ(replied, request.commands_size()) << call;
  }
  EXPECT_EQ(response, responses.size()) << "responses past the batches " << call;
  EXPECT_EQ(status.error_code(),
            all_parsed ? grpc::StatusCode::OK : grpc::StatusCode::INVALID_ARGUMENT)
      << status.error_message() << " " << call;
}

// Calls of one to three Submit batches of random commands, answered as
// CheckSubmitAnswers says. Closing the session frees all it allocated.
TEST_F(RequestFuzzTest, EverySubmittedCommandIsAnsweredOnceInOrderWithADocumentedCode) {
  std::map<int, int> reply_codes;  // code -> replies
  for (uint64_t i = 0; i < iterations_ / 4; ++i) {
    std::vector<std::string> batches(1 + maker_->Chance(2) + maker_->Chance(2));
    for (std::string& batch : batches) batch = maker_->MakeBatch();
    std::vector<std::string> responses;
    const grpc::Status status =
        CallWithRawBodies(channel_, "/gpucmd.v1.GpuCommand/Submit", batches, &responses);
    CheckSubmitAnswers(batches, responses, status, Call(i), reply_codes);
    ASSERT_FALSE(HasFailure()) << "the daemon's log ends:\n" << LogTail();
  }
  PrintCodes("Submit replies", reply_codes);
  ExpectEverythingGivenBack();
}

// Sessions closed by another thread while their batches run: every batch is still
// answered in full as CheckSubmitAnswers says (the commands the close overtook fail),
// and once every session is closed and its work ended, nothing stays allocated.
TEST_F(RequestFuzzTest, SessionsClosedWhileTheirBatchesRunLeaveNothingBehind) {
  std::map<int, int> reply_codes;  // code -> replies
  std::mt19937 pick(seed_);
  for (uint64_t i = 0; i < iterations_ / 40; ++i) {
    absl::StatusOr<Session> session = client_->OpenSession(0, "closed-midway");
    ASSERT_TRUE(session.ok()) << session.status();
    RequestMaker maker(seed_ + static_cast<uint32_t>(i), session->token(), buffer_id_,
                       kernel_id_);
    std::vector<std::string> batches(4);
    for (std::string& batch : batches) batch = maker.MakeBatch();
    std::vector<std::string> responses;
    grpc::Status status;
    std::thread submit([&] {
      status = CallWithRawBodies(channel_, "/gpucmd.v1.GpuCommand/Submit", batches, &responses);
    });
    std::this_thread::sleep_for(std::chrono::microseconds(pick() % 4000));
    const absl::Status closed = session->Close();
    submit.join();
    ASSERT_TRUE(closed.ok()) << closed;
    CheckSubmitAnswers(batches, responses, status, Call(i), reply_codes);
    ASSERT_FALSE(HasFailure()) << "the daemon's log ends:\n" << LogTail();
  }
  PrintCodes("Submit replies", reply_codes);
  ExpectEverythingGivenBack();
}

}  // namespace
}  // namespace gpucmd
