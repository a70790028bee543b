#pragma once
// Frames on the rendezvous TCP connection:
//   [magic u32 'LFRV'][protocol version u16][message type u16][payload length u32][payload]
// little-endian, payload at most a configured limit. FrameParser is incremental
// (feed any chunking of the stream) and rejects bad magic, a foreign protocol
// version and oversized frames before buffering their payload.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace lf::rdzv {

constexpr uint32_t kFrameMagic = 0x5652464c;  // "LFRV" read little-endian
// 2: Join carries the config items, Failure/Abort an exit code for every node, Waiting.
// 3: Layout carries the elastic job's base world size.
// 4: NodeStatus (each node's ranks, GPUs, rank 0's steps and output lines, for node 0's live
//    page); Layout says how often to send it. A peer of another version is refused, both
//    versions named (FrameParser::next).
constexpr uint16_t kProtocolVersion = 4;
constexpr size_t kFrameHeaderSize = 12;
constexpr uint32_t kDefaultMaxPayload = 4u << 20;

struct Frame {
  uint16_t type = 0;
  std::string payload;
};

std::string encode_frame(uint16_t type, std::string_view payload);

class FrameParser {
 public:
  explicit FrameParser(uint32_t max_payload = kDefaultMaxPayload) : max_payload_(max_payload) {}
  void feed(std::string_view bytes) { buffer_.append(bytes); }
  // The next complete frame, or nullopt when more bytes are needed.
  // Throws ProtocolError on a bad header; the connection must then be closed.
  std::optional<Frame> next();
  size_t buffered() const { return buffer_.size() - consumed_; }

 private:
  uint32_t max_payload_;
  std::string buffer_;
  size_t consumed_ = 0;
};

}  // namespace lf::rdzv
