#include "fp8_cast_reuse.h"

#include <array>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

namespace lf::quant {

namespace {

struct Entry {
  at::Tensor source;  // a detached alias: keeps the storage (and so its address) alive
  int64_t version = -1;
  Fp8Scaling scaling;
  bool columns = false;
  at::Tensor factors;  // the column factors' source (a stored weight's scales), a detached alias; or undefined
  int64_t factors_version = -1;
  Fp8Tensor cast;
};

bool same_scaling(const Fp8Scaling& a, const Fp8Scaling& b) {
  return a.dtype == b.dtype && a.rowwise == b.rowwise && a.pow2 == b.pow2 && a.axis == b.axis;
}

bool same_view(const at::Tensor& a, const at::Tensor& b) {
  return a.storage().unsafeGetStorageImpl() == b.storage().unsafeGetStorageImpl() &&
         a.storage_offset() == b.storage_offset() && a.sizes() == b.sizes() && a.strides() == b.strides() &&
         a.scalar_type() == b.scalar_type();
}

struct Slots {
  std::array<Entry, kFp8CastReuseSlots> entries;
  int next = 0;  // the oldest entry, replaced next
};

thread_local Slots slots;

bool keepable(const at::Tensor& x) { return !x.is_inference() && x.has_storage(); }

// Both undefined, or the same view unwritten since.
bool same_factors(const Entry& e, const at::Tensor& factors) {
  if (e.factors.defined() != factors.defined()) return false;
  return !factors.defined() || (e.factors_version == factors._version() && same_view(e.factors, factors));
}

Entry* find(const at::Tensor& x, const Fp8Scaling& s, bool columns, const at::Tensor& factors) {
  const int64_t version = x._version();
  for (auto& e : slots.entries)
    if (e.source.defined() && e.version == version && e.columns == columns && same_scaling(e.scaling, s) &&
        same_view(e.source, x) && same_factors(e, factors))
      return &e;
  return nullptr;
}

// In the oldest slot.
const Entry& keep(const at::Tensor& x, const Fp8Scaling& s, bool columns, Fp8Tensor cast,
                  const at::Tensor& factors = at::Tensor()) {
  auto& e = slots.entries[static_cast<size_t>(slots.next)];
  slots.next = (slots.next + 1) % kFp8CastReuseSlots;
  e = Entry{x.detach(), x._version(), s, columns, factors.defined() ? factors.detach() : at::Tensor(),
            factors.defined() ? factors._version() : -1, std::move(cast)};
  return e;
}

}  // namespace

Fp8Tensor fp8_reused_cast(const at::Tensor& x, const Fp8Scaling& s, bool columns,
                          const std::function<Fp8Tensor(const at::Tensor&)>& cast) {
  // Inference tensors carry no version counter to tell a rewrite by.
  if (!keepable(x)) return cast(x);
  if (const auto* e = find(x, s, columns, at::Tensor())) return e->cast;
  return keep(x, s, columns, cast(x)).cast;
}

void fp8_seed_cast(const at::Tensor& x, const Fp8Scaling& s, bool columns, const Fp8Tensor& cast,
                   const at::Tensor& factors) {
  if (!keepable(x) || (factors.defined() && !keepable(factors))) return;
  if (auto* e = find(x, s, columns, factors)) {
    e->cast = cast;
    return;
  }
  keep(x, s, columns, cast, factors);
}

std::optional<Fp8Tensor> fp8_take_seeded_cast(const at::Tensor& x, const Fp8Scaling& s, const at::Tensor& factors) {
  if (!keepable(x)) return std::nullopt;
  auto* e = find(x, s, /*columns=*/false, factors);
  if (!e) return std::nullopt;
  auto cast = std::move(e->cast);
  *e = Entry{};  // released: x's storage and the cast go with their last other user
  return cast;
}

}  // namespace lf::quant
