// libFuzzer target: any byte stream into FrameParser + decode_message must end
// in frames or a ProtocolError — never a crash, hang, leak or UB (built with
// ASan/UBSan). Decoded messages must re-encode to the same frame bytes.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "lf/common/error.h"
#include "lf/rendezvous/messages.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // First byte picks a chunk size, so split-frame paths are exercised too.
  if (size == 0) return 0;
  size_t chunk = 1 + data[0] % 64;
  std::string_view bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  lf::rdzv::FrameParser parser(1 << 16);
  try {
    for (size_t pos = 0; pos < bytes.size(); pos += chunk) {
      parser.feed(bytes.substr(pos, chunk));
      while (auto frame = parser.next()) {
        lf::rdzv::Message m = lf::rdzv::decode_message(*frame);
        std::string again = lf::rdzv::encode_message(m);
        std::string original = lf::rdzv::encode_frame(frame->type, frame->payload);
        if (again != original) std::abort();  // codec asymmetry
      }
    }
  } catch (const lf::ProtocolError&) {
  }
  return 0;
}
