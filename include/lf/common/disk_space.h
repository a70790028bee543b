#pragma once
// The one space rule for saves, shared by the launcher's preflight (before the job) and the
// worker (before each checkpoint), so they never disagree on whether a disk is big enough.
#include <cstdint>
#include <string>

namespace lf {

// Bytes one save of `trainable` parameters writes: fp32 weights (4 B) and, with the optimizer
// state, AdamW's two fp32 moments (8 B more), 5% for headers and side files, plus a 2 MiB
// reserve (trainer state, RNG state, tokenizer files).
uint64_t save_bytes_needed(uint64_t trainable, bool with_optimizer_state);

// "1.25 GiB", "3.40 MiB", "812 KiB", "12 B": small sizes in the unit that shows them.
std::string size_text(double bytes);

}  // namespace lf
