#include "lf/rendezvous/wire.h"

#include <bit>

#include "lf/common/error.h"

namespace lf::rdzv {

namespace {
// A list may not claim more elements than bytes left (each needs >= 4 bytes),
// so a hostile count can't make us allocate gigabytes.
constexpr size_t kMinEncodedStringSize = 4;
}  // namespace

void WireWriter::u16(uint16_t v) {
  for (int i = 0; i < 2; ++i) buf_.push_back(static_cast<char>(v >> (8 * i)));
}
void WireWriter::u32(uint32_t v) {
  for (int i = 0; i < 4; ++i) buf_.push_back(static_cast<char>(v >> (8 * i)));
}
void WireWriter::u64(uint64_t v) {
  for (int i = 0; i < 8; ++i) buf_.push_back(static_cast<char>(v >> (8 * i)));
}
void WireWriter::f64(double v) { u64(std::bit_cast<uint64_t>(v)); }
void WireWriter::str(std::string_view s) {
  u32(static_cast<uint32_t>(s.size()));
  buf_.append(s);
}
void WireWriter::str_list(const std::vector<std::string>& v) {
  u32(static_cast<uint32_t>(v.size()));
  for (const auto& s : v) str(s);
}

void WireReader::need(size_t n) const {
  LF_CHECK(n <= remaining(), ProtocolError, "malformed message: needs {} more bytes, {} left", n,
           remaining());
}

uint8_t WireReader::u8() {
  need(1);
  return static_cast<uint8_t>(data_[pos_++]);
}
uint16_t WireReader::u16() {
  need(2);
  uint16_t v = 0;
  for (int i = 0; i < 2; ++i) v |= static_cast<uint16_t>(static_cast<uint8_t>(data_[pos_++])) << (8 * i);
  return v;
}
uint32_t WireReader::u32() {
  need(4);
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(static_cast<uint8_t>(data_[pos_++])) << (8 * i);
  return v;
}
uint64_t WireReader::u64() {
  need(8);
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(static_cast<uint8_t>(data_[pos_++])) << (8 * i);
  return v;
}
bool WireReader::boolean() {
  uint8_t v = u8();
  LF_CHECK(v <= 1, ProtocolError, "malformed message: boolean byte {}", v);
  return v == 1;
}
double WireReader::f64() { return std::bit_cast<double>(u64()); }
uint32_t WireReader::count(size_t min_bytes_each) {
  uint32_t n = u32();
  LF_CHECK(min_bytes_each > 0 && n <= remaining() / min_bytes_each, ProtocolError,
           "malformed message: list of {} elements in {} bytes", n, remaining());
  return n;
}
std::string WireReader::str() {
  uint32_t n = u32();
  need(n);
  std::string s(data_.substr(pos_, n));
  pos_ += n;
  return s;
}
std::vector<std::string> WireReader::str_list() {
  uint32_t n = u32();
  LF_CHECK(n <= remaining() / kMinEncodedStringSize, ProtocolError,
           "malformed message: list of {} strings in {} bytes", n, remaining());
  std::vector<std::string> v;
  v.reserve(n);
  for (uint32_t i = 0; i < n; ++i) v.push_back(str());
  return v;
}
void WireReader::expect_end() const {
  LF_CHECK(remaining() == 0, ProtocolError, "malformed message: {} trailing bytes", remaining());
}

}  // namespace lf::rdzv
