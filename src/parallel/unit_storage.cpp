#include "unit_storage.h"

#include <c10/core/ScalarType.h>

#include <algorithm>
#include <iterator>

#include "lf/common/error.h"

namespace lf::parallel {

namespace {

// The formats a unit's frozen parameters may be stored in, tried in order: one line each.
constexpr UnitStorageFormat kFormats[] = {
    {"dense", dense_stores, make_dense_storage},
    {"bnb4", bnb4_stores, make_bnb4_storage},
};

}  // namespace

int64_t UnitStorage::shard_bytes() const {
  int64_t n = 0;
  for (const auto& t : tensors()) n += static_cast<int64_t>(t.shard.nbytes());
  return n;
}

int64_t UnitStorage::gathered_bytes() const {
  int64_t n = 0;
  for (const auto& t : tensors())
    if (!t.group.empty()) n += t.group.padded * static_cast<int64_t>(t.group.flat.element_size());
  return n;
}

int64_t UnitStorage::numel() const {
  int64_t n = 0;
  for (const auto& t : tensors()) n += t.group.numel;
  return n;
}

std::unique_ptr<UnitStorage> make_unit_storage(std::vector<model::NamedParam> params, int64_t rank, int64_t world) {
  for (const auto& f : kFormats)
    if (std::all_of(params.begin(), params.end(), [&](const model::NamedParam& p) { return f.stores(*p.tensor); }))
      return f.make(std::move(params), rank, world);
  const auto odd = std::find_if(params.begin(), params.end(), [](const model::NamedParam& p) {
    return std::none_of(std::begin(kFormats), std::end(kFormats), [&](const auto& f) { return f.stores(*p.tensor); });
  });
  LF_THROW(ConfigError,
           "ZeRO-3 cannot shard the frozen parameter {} ({}): no unit storage format stores it (formats: dense "
           "floating point, bitsandbytes 4-bit); use zero_stage 2 or lower, which leaves frozen parameters whole",
           odd == params.end() ? std::string("?") : odd->name,
           odd == params.end() ? std::string("?") : std::string(c10::toString(odd->tensor->scalar_type())));
}

}  // namespace lf::parallel
