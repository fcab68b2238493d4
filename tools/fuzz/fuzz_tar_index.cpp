// defines: the libFuzzer target of the tar shard indexer (runtime/data/tar_index.h): the input is
// a whole shard. Indexing may throw UserError (one line naming the shard), never crash, hang or
// read past the file; whatever indexes round-trips through the cached index format.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "base/error.h"
#include "runtime/data/tar_index.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const int fd = ::memfd_create("fuzz-tar", MFD_CLOEXEC);
  // The cached index goes to $TMPDIR (tools/ci/fuzz.sh gives each target a scratch folder).
  static const std::string cache = std::string(std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp") +
                                   "/dptrain-fuzz-tar-index-" + std::to_string(::getpid()) + ".idx";
  if (fd < 0 || ::ftruncate(fd, 0) != 0 || ::pwrite(fd, data, size, 0) != static_cast<ssize_t>(size)) return 0;
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  try {
    const dp::data::RawFile shard(path);
    const dp::data::TarShardIndex index = dp::data::index_tar_shard(shard);
    dp::data::save_tar_index(cache, shard, index);
    dp::data::TarShardIndex back;
    if (!dp::data::load_tar_index(cache, shard, back) || back.samples.size() != index.samples.size()) std::abort();
  } catch (const dp::UserError&) {
  }
  return 0;
}
