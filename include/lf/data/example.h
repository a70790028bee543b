#pragma once
// A training example in LLaMA-Factory's aligned form (converter output):
// prompt messages (odd count: user/assistant/.../user), one response,
// optional system prompt. `origin` is "file:line" for error messages.
#include <cstdint>
#include <string>
#include <vector>

namespace lf {

enum class Role { kUser, kAssistant, kObservation, kFunction, kSystem };

struct Message {
  Role role;
  std::string content;
};

struct Example {
  std::vector<Message> prompt;
  std::vector<Message> response;
  std::string system;
  std::string tools;
  std::string origin;
  // Why no training example can be made of the record ("'output' is null"); "": none known
  // (drop_report.h).
  std::string invalid;
};

}  // namespace lf
