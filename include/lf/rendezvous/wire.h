#pragma once
// Bounds-checked little-endian encoding of message fields. WireReader never
// reads past its buffer: any short or inconsistent input is a ProtocolError,
// which is what lets the frame/message parser survive arbitrary bytes.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace lf::rdzv {

class WireWriter {
 public:
  void u8(uint8_t v) { buf_.push_back(static_cast<char>(v)); }
  void u16(uint16_t v);
  void u32(uint32_t v);
  void u64(uint64_t v);
  void i64(int64_t v) { u64(static_cast<uint64_t>(v)); }
  void boolean(bool v) { u8(v ? 1 : 0); }
  void f64(double v);  // IEEE 754 bits, little-endian
  // A list's element count (the elements follow, written by the caller).
  void count(size_t n) { u32(static_cast<uint32_t>(n)); }
  void str(std::string_view s);
  void str_list(const std::vector<std::string>& v);
  std::string take() { return std::move(buf_); }
  const std::string& data() const { return buf_; }

 private:
  std::string buf_;
};

class WireReader {
 public:
  explicit WireReader(std::string_view data) : data_(data) {}
  uint8_t u8();
  uint16_t u16();
  uint32_t u32();
  uint64_t u64();
  int64_t i64() { return static_cast<int64_t>(u64()); }
  bool boolean();
  double f64();
  // A list's element count; each element takes at least min_bytes_each, so a hostile count
  // larger than the bytes left can hold is an error before anything is allocated.
  uint32_t count(size_t min_bytes_each);
  std::string str();
  std::vector<std::string> str_list();
  // Throws unless every byte was consumed: trailing garbage is an error too.
  void expect_end() const;
  size_t remaining() const { return data_.size() - pos_; }

 private:
  void need(size_t n) const;
  std::string_view data_;
  size_t pos_ = 0;
};

}  // namespace lf::rdzv
