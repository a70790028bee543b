#include "lf/rendezvous/frame.h"

#include "lf/common/error.h"
#include "lf/rendezvous/wire.h"

namespace lf::rdzv {

std::string encode_frame(uint16_t type, std::string_view payload) {
  WireWriter w;
  w.u32(kFrameMagic);
  w.u16(kProtocolVersion);
  w.u16(type);
  w.u32(static_cast<uint32_t>(payload.size()));
  std::string out = w.take();
  out.append(payload);
  return out;
}

std::optional<Frame> FrameParser::next() {
  if (buffered() < kFrameHeaderSize) return std::nullopt;
  WireReader header(std::string_view(buffer_).substr(consumed_, kFrameHeaderSize));
  uint32_t magic = header.u32();
  uint16_t version = header.u16();
  uint16_t type = header.u16();
  uint32_t length = header.u32();
  LF_CHECK(magic == kFrameMagic, ProtocolError,
           "peer is not speaking the lf-train rendezvous protocol (magic {:#010x}, expected {:#010x}); "
           "check that MASTER_ADDR:MASTER_PORT points at an lf-train rendezvous server",
           magic, kFrameMagic);
  LF_CHECK(version == kProtocolVersion, ProtocolError,
           "peer speaks rendezvous protocol version {}, this lf-train speaks {}: run the same lf-train "
           "version on every node",
           version, kProtocolVersion);
  LF_CHECK(length <= max_payload_, ProtocolError, "frame of {} bytes exceeds the limit of {} bytes",
           length, max_payload_);
  if (buffered() < kFrameHeaderSize + length) return std::nullopt;
  Frame f;
  f.type = type;
  f.payload.assign(buffer_, consumed_ + kFrameHeaderSize, length);
  consumed_ += kFrameHeaderSize + length;
  // Compact once the consumed prefix dominates, so the buffer stays O(frame).
  if (consumed_ > 4096 && consumed_ * 2 > buffer_.size()) {
    buffer_.erase(0, consumed_);
    consumed_ = 0;
  }
  return f;
}

}  // namespace lf::rdzv
