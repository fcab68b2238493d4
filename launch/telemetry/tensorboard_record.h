// defines: the TFRecord framing of TensorBoard event files (write one record, read them all back).
//
// A record is (all little-endian):
//   uint64 length | uint32 masked_crc32c(length's 8 bytes) | data[length] | uint32 masked_crc32c(data)
// masked_crc32c(x) = ((c >> 15) | (c << 17)) + 0xa282ead8 with c = crc32c(x): TensorFlow's
// tensorflow/core/lib/hash/crc32c.h "Mask", which keeps a CRC of data holding CRCs from
// looking like a CRC. The framing is TensorFlow's record_writer.cc / TensorBoard's
// tensorboard/summary/writer/record_writer.py.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dp::metrics {

uint32_t masked_crc32c(const void* data, size_t n);

// The framed bytes of one record holding `data`.
std::string frame_record(std::string_view data);

// Every record's data, in order. Checks both CRCs of every record and that the bytes end at a
// record boundary; throws DpError naming `what` (the file), the record index and byte offset:
//   <what>: record 3 at byte 120: data CRC mismatch (stored 0x..., computed 0x...): the file is corrupt
std::vector<std::string> read_records(std::string_view bytes, const std::string& what);

}  // namespace dp::metrics
