#pragma once
// `lf-train preview`: decoded training samples with untrained (label -100)
// spans marked, so a user sees exactly what the loss is computed on.
#include <filesystem>
#include <iosfwd>
#include <string>
#include <utility>
#include <vector>

#include "lf/data/supervised.h"
#include "lf/tokenizer/tokenizer.h"

#include "lf/data/data_args.h"

namespace lf {

// One sample as runs of text, each masked (label -100) or trained, in order.
std::vector<std::pair<std::string, bool>> masked_segments(const Tokenizer& tok, const EncodedExample& ex);

// Text of one sample; masked spans wrapped in `mask_open`/`mask_close`.
std::string render_masked(const Tokenizer& tok, const EncodedExample& ex, const std::string& mask_open,
                          const std::string& mask_close);

// The first n samples of the plan's data section as the model sees them, masked spans marked.
void run_preview(const DataArgs& args, int n, std::ostream& out, bool color);

}  // namespace lf
