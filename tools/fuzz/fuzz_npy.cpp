// defines: the libFuzzer target of the .npy reader (runtime/data/npy.h), the one data format whose
// header is a text dict: the input is a whole file. Reading it and opening it as both the samples
// and the labels of a data set may throw UserError (one line naming the file), never crash,
// allocate what the file does not hold, or read past it; whatever opens is read back completely.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/error.h"
#include "runtime/data/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const int fd = ::memfd_create("fuzz-npy", MFD_CLOEXEC);
  if (fd < 0 || ::ftruncate(fd, 0) != 0 || ::pwrite(fd, data, size, 0) != static_cast<ssize_t>(size)) return 0;
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  try {
    (void)dp::data::read_npy(path);
    auto ds = dp::data::open_npy(path, path);
    // With no samples the file does not bound the shape (up to dp::data::kMaxSampleValues).
    std::vector<float> sample(ds->size() > 0 ? static_cast<size_t>(dp::shape_numel(ds->sample_shape())) : 0);
    for (int64_t i = 0; i < ds->size(); ++i) (void)ds->get(i, sample.data());
  } catch (const dp::UserError&) {
  }
  return 0;
}
