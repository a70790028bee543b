#pragma once
// A JSON answer computed once, on a thread of its own, started by the first get() (the data
// preview loads a tokenizer and reads the dataset: time the io thread, which heartbeats to every
// node, must not spend; a job nobody watches never computes it). Until it is ready:
// {"state": "rendering"}; an exception becomes {"state": "error", "error": ...}. The destructor
// waits for a computation under way. Threading: get() from any thread.
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace lf::ui {

class BackgroundJson {
 public:
  // An empty function: get() answers {"state": "none", "why": why_none}.
  BackgroundJson(std::function<std::string()> make, std::string why_none);
  ~BackgroundJson();
  std::string get();

 private:
  std::function<std::string()> make_;
  std::mutex mu_;
  std::string result_;
  std::thread thread_;
};

}  // namespace lf::ui
