// defines: the TensorBoard Event message (scalars only), hand-encoded in the protobuf wire format.
//
// The subset of tensorflow/core/util/event.proto and summary.proto that scalar logging needs:
//   message Event   { double wall_time = 1; int64 step = 2; string file_version = 3; Summary summary = 5; }
//   message Summary { repeated Value value = 1; }
//   message Value   { string tag = 1; float simple_value = 2; }
// Wire format (protobuf encoding guide): each field is a varint key (field << 3 | wire type),
// then a varint (type 0), 8 little-endian bytes (type 1), a varint length + bytes (type 2) or
// 4 little-endian bytes (type 5). The decoder skips fields it does not know, as protobuf does,
// so it also reads files written by TensorFlow/PyTorch (which carry other summary kinds).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dp::metrics {

struct ScalarValue {
  std::string tag;    // "train/loss"
  float value = 0;    // TensorBoard stores scalars as float32 (simple_value)
};

struct Event {
  double wall_time = 0;          // seconds since the Unix epoch
  int64_t step = 0;
  std::string file_version;      // only in a file's first event: "brain.Event:2"
  std::vector<ScalarValue> scalars;
};

// The protobuf bytes of `e` (fields in number order; a default step or an empty
// file_version/summary is left out, as protobuf does).
std::string encode_event(const Event& e);
// Values that are not scalars (images, histograms, tensors) are skipped. Throws DpError (naming
// `what`) on malformed protobuf: a truncated field or a wire type that does not match the field.
Event decode_event(std::string_view bytes, const std::string& what);

}  // namespace dp::metrics
