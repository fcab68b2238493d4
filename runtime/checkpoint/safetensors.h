// defines: write_safetensors (atomic writer) and SafetensorsFile (checked reader) for the
// safetensors format, the on-disk form of checkpoints (../shared/DESIGN.md, "Checkpoint").
//
// Layout (https://github.com/huggingface/safetensors, "Format"):
//   [8 bytes]  N, the header length, unsigned little-endian
//   [N bytes]  JSON header: {"__metadata__": {str: str}, name: {"dtype": "F32", "shape": [..],
//              "data_offsets": [begin, end]}, ...}, padded with spaces to a multiple of 8 so the
//              data area starts 8-byte aligned
//   [rest]     the data area: raw little-endian tensors; offsets are relative to its start
//
// The writer lays tensors out contiguously in the order given (the reference reader rejects
// gaps). PyTorch's zero-copy loader needs each tensor aligned to its element size, so give
// wider dtypes first (f64/i64, then f32/i32, then f16/bf16, then u8) when that matters.
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "runtime/tensor.h"

namespace dp {

// One tensor of a file being written: its name, dtype and shape.
struct SafetensorsSpec {
  std::string name;
  DType dtype = DType::F32;
  Shape shape;
};

// A safetensors file written out of order, atomically: the layout (`specs`, laid out contiguously
// in that order) is fixed first, then the tensors' bytes arrive in pieces in any order (write),
// and commit writes the header, which may depend on those bytes (a checkpoint's CRCs) but must
// have the length of `metadata`'s, the one given here (the same keys, values of the same
// lengths), then fsync -> rename -> fsync the directory. Destroyed before commit (an error, a
// fault), it removes the temporary file: a partial file never appears under `path`.
class SafetensorsWriter {
 public:
  SafetensorsWriter(std::string path, std::vector<SafetensorsSpec> specs,
                    const std::map<std::string, std::string>& metadata);
  ~SafetensorsWriter();
  SafetensorsWriter(const SafetensorsWriter&) = delete;
  SafetensorsWriter& operator=(const SafetensorsWriter&) = delete;

  const std::string& tmp_path() const { return tmp_; }
  // Bytes [offset, offset + n) of tensor i.
  void write(size_t i, size_t offset, const void* data, size_t n);
  void commit(const std::map<std::string, std::string>& metadata);

 private:
  std::string path_, tmp_;
  std::vector<SafetensorsSpec> specs_;
  std::vector<size_t> ends_;  // each tensor's end offset in the data area
  size_t header_bytes_ = 0, data_start_ = 0;
  int fd_ = -1;
  bool committed_ = false;
};

// Writes `tensors` (any device; copied to host as needed) and `metadata` to `path` atomically:
// path + ".tmp" -> fsync -> rename -> fsync the directory, so a crash never leaves a partial
// file under `path`. Names must be unique, non-empty and not "__metadata__".
// after_tensor(i, n), when given, is called after the data of tensor i of n is in the temporary
// file (a fault injected there, for tests, meets a half-written file: DPTRAIN_FAULT_*_CKPT_*).
void write_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata = {},
                       const std::function<void(size_t, size_t)>& after_tensor = {});

// A safetensors file whose header has been read and fully validated by open(); tensors are read
// from the open file on demand by get(). Copies share the open file.
class SafetensorsFile {
 public:
  static SafetensorsFile open(const std::string& path);

  const std::string& path() const { return path_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  std::vector<std::string> names() const;  // in file order (by data offset)
  bool has(const std::string& name) const;

  struct Info {
    DType dtype;
    Shape shape;
    size_t begin, end;  // byte offsets relative to the start of the data area
  };
  const Info& info(const std::string& name) const;
  // The tensor's contents as a CPU tensor with its own storage.
  Tensor get(const std::string& name) const;

 private:
  struct Fd;
  std::string path_;
  std::shared_ptr<Fd> fd_;
  size_t data_start_ = 0;  // absolute file offset of the data area
  std::map<std::string, std::string> metadata_;
  std::map<std::string, Info> infos_;
  std::vector<std::string> order_;  // names sorted by data offset
};

}  // namespace dp
