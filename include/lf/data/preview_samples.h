#pragma once
// The data preview as data (node 0's live page shows it; `lf-train preview` prints the same
// examples as text): the first n examples of the job's datasets through its template, each as
// segments of text, masked (label -100: the loss never sees them) or trained, as LLaMA-Factory's
// WebUI preview shows them. Reads only those examples (not the whole dataset). Torch-free.
#include <cstdint>
#include <string>
#include <vector>

#include "lf/data/data_args.h"

namespace lf {

struct PreviewSegment {
  std::string text;
  bool masked = false;
};

struct PreviewSample {
  std::string origin;  // "alpaca_en_demo.json:3"; dpo / rm: "... (chosen)", "... (rejected)"; kto: "... (desirable)"
  int64_t tokens = 0, trained = 0;
  bool truncated = false;  // cut at cutoff_len
  bool dropped = false;    // not an example its stage trains on (a prompt/response pair, a ranked pair)
  std::vector<PreviewSegment> segments;
};

// Throws ConfigError as training would (a dataset or template that cannot be read).
std::vector<PreviewSample> preview_samples(const DataArgs& args, int n, std::string* template_name = nullptr);

// {"state": "ready", "template", "cutoff_len", "datasets", "train_on_prompt", "samples": [{"origin",
// "tokens", "trained", "truncated", "dropped", "segments": [{"text", "masked"}]}]}
std::string preview_samples_json(const DataArgs& args, int n);

}  // namespace lf
