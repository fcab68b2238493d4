// defines: the libFuzzer target of the safetensors reader (runtime/checkpoint/safetensors.h) and
// the checkpoint checks on top of it (runtime/checkpoint/checkpoint.h): the input is a whole file
// (8-byte header length, JSON header, data). Opening may throw UserError, never crash; whatever
// opens is read back completely (every tensor, the metadata, the CRCs).
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "base/error.h"
#include "runtime/checkpoint/checkpoint.h"
#include "runtime/checkpoint/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const int fd = ::memfd_create("fuzz-safetensors", MFD_CLOEXEC);
  if (fd < 0 || ::ftruncate(fd, 0) != 0 || ::pwrite(fd, data, size, 0) != static_cast<ssize_t>(size)) return 0;
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  try {
    dp::SafetensorsFile f = dp::SafetensorsFile::open(path);
    for (const auto& name : f.names()) (void)f.get(name);
    try {
      (void)dp::read_checkpoint_meta(f);
      (void)dp::check_crcs(f);
    } catch (const dp::UserError&) {
    }
  } catch (const dp::UserError&) {
  }
  return 0;
}
