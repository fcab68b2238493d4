#include "collectives/make_communicator.h"

#include "collectives/ring/ring_communicator.h"
#include "runtime/device_memory.h"
#include "base/error.h"
#include "runtime/suggest.h"
#include "collectives/nccl/nccl_communicator.h"

namespace dp {
namespace {

std::unique_ptr<Communicator> make_nccl(Bootstrap& boot, double timeout_s) {
  if (!built_with_cuda())
    DP_THROW_USER("backend \"nccl\": this dptrain was built without CUDA (and so without NCCL) [{}]; rebuild on a "
                  "machine with the CUDA toolkit, or use backend \"ring\"",
                  identity_string());
  if (cuda_device_count() == 0)
    DP_THROW_USER("backend \"nccl\" needs a GPU and this process sees none [{}] (no GPU, no driver, or "
                  "CUDA_VISIBLE_DEVICES hides them all); use backend \"ring\"",
                  identity_string());
  if (boot.size() == 1) return std::make_unique<SingleProcessCommunicator>();
  return make_nccl_communicator(boot, timeout_s);
}

}  // namespace

CollectiveBackend parse_collective_backend(const std::string& name) {
  if (const auto b = enum_from_name<CollectiveBackend>(name)) return *b;
  DP_THROW_USER("unknown collectives backend \"{}\" (known: {})", name, join(enum_name_list<CollectiveBackend>()));
}

std::unique_ptr<Communicator> make_communicator(CollectiveBackend backend, Bootstrap& boot, double timeout_s,
                                                const std::string& iface) {
  switch (backend) {
    case CollectiveBackend::Nccl: return make_nccl(boot, timeout_s);
    case CollectiveBackend::Ring: {
      if (boot.size() == 1) return std::make_unique<SingleProcessCommunicator>();
      RingOptions options = ring_options_from_env(timeout_s);
      options.iface = iface;
      return make_ring_communicator(boot, options);
    }
  }
  DP_CHECK(false, "collectives backend {} is not handled", static_cast<int>(backend));
  return nullptr;
}

}  // namespace dp
