// The PMIx bootstrap (srun --mpi=pmix, mpirun/prterun): libpmix is opened at run time, so the
// binary runs where PMIx is absent. Identity from PMIx_Init and the job's PMIx keys (job size,
// local rank and size, node id); allgather #s = PMIx_Put(GLOBAL, "dptrain.bs.<s>", blob),
// PMIx_Commit, PMIx_Fence(all, collect data, timeout), PMIx_Get of every rank's key: a fresh key
// per exchange, so nothing is overwritten and no value is read from an earlier round.
//
// A PMIx fence cannot say which ranks did not arrive: the timeout message says so.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "collectives/bootstrap/pmix.h"
#include "collectives/bootstrap/common.h"
#include "collectives/bootstrap/dynlib.h"
#include "base/error.h"
#include "runtime/log.h"
#include "runtime/tunables.h"

namespace dp {
namespace {

// The part of the PMIx Standard ABI used here (stable since PMIx v2; sizes and offsets checked
// against PMIx 4.2.2's pmix_common.h: proc 260, value 32, info 552 with value at 520). Only the
// types: the functions come from dlsym.
namespace pmix {
using status_t = int;
using rank_t = uint32_t;
using data_type_t = uint16_t;
using scope_t = uint8_t;
constexpr size_t kMaxNsLen = 255, kMaxKeyLen = 511;
constexpr status_t kSuccess = 0, kErrTimeout = -24;
constexpr data_type_t kBool = 1, kInt = 6, kInt8 = 7, kInt16 = 8, kInt32 = 9, kInt64 = 10, kUint = 11, kUint8 = 12,
                      kUint16 = 13, kUint32 = 14, kUint64 = 15, kSize = 4, kByteObject = 27;
constexpr scope_t kGlobal = 3;
constexpr rank_t kRankWildcard = UINT32_MAX - 1;

struct proc_t {
  char nspace[kMaxNsLen + 1];
  rank_t rank;
};
struct byte_object_t {
  char* bytes;
  size_t size;
};
struct value_t {
  data_type_t type;
  union {
    bool flag;
    int integer;
    int8_t int8;
    int16_t int16;
    int32_t int32;
    int64_t int64;
    unsigned uint;
    uint8_t uint8;
    uint16_t uint16;
    uint32_t uint32;
    uint64_t uint64;
    size_t size;
    byte_object_t bo;
    uint64_t pad[3];  // the real union's size (its largest member is 24 bytes)
  } data;
};
struct info_t {
  char key[kMaxKeyLen + 1];
  uint32_t flags;
  value_t value;
};
static_assert(sizeof(proc_t) == 260 && offsetof(proc_t, rank) == 256);
static_assert(sizeof(value_t) == 32 && offsetof(value_t, data) == 8);
static_assert(sizeof(info_t) == 552 && offsetof(info_t, value) == 520);

using Init = status_t (*)(proc_t*, info_t*, size_t);
using Finalize = status_t (*)(const info_t*, size_t);
using Put = status_t (*)(scope_t, const char*, value_t*);
using Commit = status_t (*)();
using Fence = status_t (*)(const proc_t*, size_t, const info_t*, size_t);
using Get = status_t (*)(const proc_t*, const char*, const info_t*, size_t, value_t**);
using ErrorString = const char* (*)(status_t);
using ValueDestruct = void (*)(value_t*);
}  // namespace pmix

struct PmixApi {
  DynLib lib;
  pmix::Init init = nullptr;
  pmix::Finalize finalize = nullptr;
  pmix::Put put = nullptr;
  pmix::Commit commit = nullptr;
  pmix::Fence fence = nullptr;
  pmix::Get get = nullptr;
  pmix::ErrorString error_string = nullptr;
  pmix::ValueDestruct value_destruct = nullptr;  // PMIx v4+; older: freed by hand

  explicit PmixApi(const std::vector<std::string>& names) : lib(names) {
    init = lib.sym<pmix::Init>("PMIx_Init");
    finalize = lib.sym<pmix::Finalize>("PMIx_Finalize");
    put = lib.sym<pmix::Put>("PMIx_Put");
    commit = lib.sym<pmix::Commit>("PMIx_Commit");
    fence = lib.sym<pmix::Fence>("PMIx_Fence");
    get = lib.sym<pmix::Get>("PMIx_Get");
    error_string = lib.sym<pmix::ErrorString>("PMIx_Error_string");
    value_destruct = lib.sym<pmix::ValueDestruct>("PMIx_Value_destruct");
  }
  bool complete() const { return init && finalize && put && commit && fence && get; }
  std::string err(pmix::status_t s) const {
    return fmt::format("{} ({})", error_string ? error_string(s) : "PMIx error", s);
  }
  void release(pmix::value_t* v) const {
    if (v == nullptr) return;
    if (value_destruct) value_destruct(v);
    else if (v->type == pmix::kByteObject) std::free(v->data.bo.bytes);
    std::free(v);
  }
};

void set_key(char* dst, size_t cap, const std::string& key) {
  std::memset(dst, 0, cap);
  std::strncpy(dst, key.c_str(), cap - 1);
}

class PmixBootstrap final : public BootstrapBase {
 public:
  PmixBootstrap(std::unique_ptr<PmixApi> api, double timeout_s)
      : BootstrapBase(LaunchInfo{}), api_(std::move(api)), timeout_s_(timeout_s),
        report_s_(rendezvous_report_s(process_env())) {
    std::memset(&me_, 0, sizeof me_);
    const pmix::status_t s = api_->init(&me_, nullptr, 0);
    if (s != pmix::kSuccess)
      DP_THROW_USER("{}: PMIx_Init failed: {}; PMIX_RANK is set, but no PMIx server answers (launch with srun "
                    "--mpi=pmix or mpirun, or choose another bootstrap)",
                    who_, api_->err(s));
    initialized_ = true;
    info_.rank = static_cast<int>(me_.rank);
    pmix::proc_t wild = me_;
    wild.rank = pmix::kRankWildcard;
    info_.size = get_int(wild, "pmix.job.size").value_or(-1);
    if (info_.size <= 0) throw DpError(fmt::format("{}: the PMIx server did not give the job size", who_));
    info_.local_rank = get_int(me_, "pmix.lrank").value_or(-1);
    info_.local_size = get_int(wild, "pmix.local.size").value_or(-1);
    info_.node_id = get_int(me_, "pmix.nodeid").value_or(-1);
    settle_topology(host_key(process_env()));
  }
  ~PmixBootstrap() override {
    if (initialized_) api_->finalize(nullptr, 0);
  }

  const char* kind() const override { return "pmix"; }

  std::vector<std::string> allgather(const std::string& mine) override {
    const uint64_t seq = seq_++;
    const std::string key = fmt::format("dptrain.bs.{}", seq);
    // One marker byte first: an empty byte object is not a value every PMIx version accepts.
    std::string payload = "\x01" + mine;
    pmix::value_t v{};
    v.type = pmix::kByteObject;
    v.data.bo.bytes = payload.data();
    v.data.bo.size = payload.size();
    check(api_->put(pmix::kGlobal, key.c_str(), &v), "PMIx_Put", seq);
    check(api_->commit(), "PMIx_Commit", seq);
    fence(seq);
    std::vector<std::string> out(static_cast<size_t>(info_.size));
    for (int r = 0; r < info_.size; ++r) {
      pmix::proc_t p = me_;
      p.rank = static_cast<pmix::rank_t>(r);
      pmix::value_t* got = nullptr;
      check(api_->get(&p, key.c_str(), nullptr, 0, &got), fmt::format("PMIx_Get of rank {}'s blob", r), seq);
      if (got == nullptr || got->type != pmix::kByteObject || got->data.bo.size == 0) {
        api_->release(got);
        throw DpError(fmt::format("{}: rank {}'s blob in {} is not a byte object", who_, r, allgather_name(seq)));
      }
      out[static_cast<size_t>(r)].assign(got->data.bo.bytes + 1, got->data.bo.size - 1);
      api_->release(got);
    }
    return out;
  }

 private:
  void fence(uint64_t seq) {
    // PMIX_COLLECT_DATA and PMIX_TIMEOUT (whole seconds); a watchdog a little longer in case
    // the server ignores the timeout.
    auto infos = std::make_shared<std::vector<pmix::info_t>>(2);
    std::memset(infos->data(), 0, sizeof(pmix::info_t) * 2);
    set_key((*infos)[0].key, sizeof((*infos)[0].key), "pmix.collect");
    (*infos)[0].value.type = pmix::kBool;
    (*infos)[0].value.data.flag = true;
    set_key((*infos)[1].key, sizeof((*infos)[1].key), "pmix.timeout");
    (*infos)[1].value.type = pmix::kInt;
    (*infos)[1].value.data.integer = std::max(1, static_cast<int>(std::ceil(timeout_s_)));
    auto all = std::make_shared<pmix::proc_t>(me_);
    all->rank = pmix::kRankWildcard;
    auto fn = [f = api_->fence, infos, all] { return f(all.get(), 1, infos->data(), infos->size()); };
    const auto s = call_with_deadline<pmix::status_t>(fn, timeout_s_ + 5, [&] { say_waiting(seq); }, report_s_);
    if (!s || *s == pmix::kErrTimeout)
      throw DpError(fmt::format("{}: timed out after {:g} s in PMIx_Fence ({}); PMIx does not say which of the {} "
                                "ranks did not arrive",
                                who_, timeout_s_, allgather_name(seq), info_.size));
    check(*s, "PMIx_Fence", seq);
  }

  void check(pmix::status_t s, const std::string& what, uint64_t seq) const {
    if (s != pmix::kSuccess)
      throw DpError(fmt::format("{}: {} failed in {}: {}", who_, what, allgather_name(seq), api_->err(s)));
  }

  std::optional<int> get_int(const pmix::proc_t& p, const char* key) const {
    pmix::value_t* v = nullptr;
    if (api_->get(&p, key, nullptr, 0, &v) != pmix::kSuccess || v == nullptr) return std::nullopt;
    std::optional<int64_t> x;
    switch (v->type) {
      case pmix::kInt: x = v->data.integer; break;
      case pmix::kInt8: x = v->data.int8; break;
      case pmix::kInt16: x = v->data.int16; break;
      case pmix::kInt32: x = v->data.int32; break;
      case pmix::kInt64: x = v->data.int64; break;
      case pmix::kUint: x = v->data.uint; break;
      case pmix::kUint8: x = v->data.uint8; break;
      case pmix::kUint16: x = v->data.uint16; break;
      case pmix::kUint32: x = v->data.uint32; break;
      case pmix::kUint64: x = static_cast<int64_t>(v->data.uint64); break;
      case pmix::kSize: x = static_cast<int64_t>(v->data.size); break;
      default: break;
    }
    api_->release(v);
    if (!x || *x < 0 || *x > (1 << 24)) return std::nullopt;
    return static_cast<int>(*x);
  }

  const std::string who_ = "bootstrap pmix";
  std::unique_ptr<PmixApi> api_;
  // A fence cannot say who has arrived: one line, the first time a fence is slow.
  void say_waiting(uint64_t seq) {
    if (said_waiting_) return;
    said_waiting_ = true;
    log::get("coll")->info("{}: rank {} waiting for the other ranks in PMIx_Fence ({}), up to {:g} s; PMIx cannot say "
                           "how many have arrived, so this is the only such line",
                           who_, info_.rank, allgather_name(seq), timeout_s_);
  }
  double timeout_s_;
  double report_s_ = 5;
  bool said_waiting_ = false;
  pmix::proc_t me_{};
  bool initialized_ = false;
  uint64_t seq_ = 0;
};

}  // namespace

std::unique_ptr<Bootstrap> make_pmix_bootstrap(double timeout_s) {
  // DPTRAIN_PMIX_LIB names the library when it is elsewhere (or, in tests, nowhere).
  std::vector<std::string> names = {"libpmix.so.2", "libpmix.so"};
  if (const Tunables t = tunables(); t.is_set(Tunable::PmixLib)) names = {t.text(Tunable::PmixLib)};
  auto api = std::make_unique<PmixApi>(names);
  if (!api->lib.handle())
    DP_THROW_USER("bootstrap pmix: cannot load the PMIx library ({}); install PMIx (Debian: libpmix2) or choose "
                  "another bootstrap",
                  api->lib.error());
  if (!api->complete())
    DP_THROW_USER("bootstrap pmix: {} lacks PMIx_Init/Put/Commit/Fence/Get: not a PMIx library", api->lib.name());
  log::get("coll")->debug("bootstrap pmix: using {}", api->lib.name());
  return std::make_unique<PmixBootstrap>(std::move(api), timeout_s);
}

}  // namespace dp
