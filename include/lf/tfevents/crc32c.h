#pragma once
// CRC-32C (Castagnoli), as TFRecord framing uses it, and TensorFlow's masking of it (a CRC
// of data that contains CRCs is weak; the mask rotates and offsets it). Torch-free.
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace lf::tfevents {

uint32_t crc32c(std::string_view data);
// ((crc >> 15) | (crc << 17)) + 0xa282ead8
uint32_t masked_crc32c(std::string_view data);

}  // namespace lf::tfevents
