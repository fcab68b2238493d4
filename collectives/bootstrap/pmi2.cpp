// The PMI2 bootstrap (srun --mpi=pmi2): Slurm's libpmi2 is opened at run time, so the binary
// runs where it is absent. Rank and size from PMI2_Init; local rank, node id and local size from
// srun's variables when present, else derived from host names.
//
// PMI2 values are short strings (PMI2_MAX_VALLEN = 1024, and ';' and '=' delimit the wire
// protocol), so a blob travels base64url-encoded (no padding) in chunks of at most 1000
// characters: key "dptrain.<s>.<rank>" holds the chunk count, "dptrain.<s>.<rank>.<i>" chunk i.
// allgather #s = put all of mine, PMI2_KVS_Fence, get everyone's. A fresh key prefix per
// exchange. PMI2 has no timeouts and cannot say who is missing: the fence runs under a watchdog.
#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "collectives/bootstrap/pmi2.h"
#include "collectives/bootstrap/common.h"
#include "collectives/bootstrap/dynlib.h"
#include "collectives/bootstrap/hostlist.h"
#include "base/error.h"
#include "runtime/log.h"
#include "runtime/tunables.h"

namespace dp {

// ---- base64url without padding (RFC 4648 section 5) ----

std::string base64url_encode(const std::string& in) {
  static const char* kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  std::string out;
  out.reserve((in.size() * 4 + 2) / 3);
  size_t i = 0;
  for (; i + 3 <= in.size(); i += 3) {
    const uint32_t v = (uint32_t(uint8_t(in[i])) << 16) | (uint32_t(uint8_t(in[i + 1])) << 8) | uint8_t(in[i + 2]);
    for (int k = 3; k >= 0; --k) out += kAlphabet[(v >> (6 * k)) & 63];
  }
  const size_t rest = in.size() - i;
  if (rest > 0) {
    uint32_t v = uint32_t(uint8_t(in[i])) << 16;
    if (rest == 2) v |= uint32_t(uint8_t(in[i + 1])) << 8;
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    if (rest == 2) out += kAlphabet[(v >> 6) & 63];
  }
  return out;
}

std::optional<std::string> base64url_decode(const std::string& in) {
  auto val = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '-') return 62;
    if (c == '_') return 63;
    return -1;
  };
  if (in.size() % 4 == 1) return std::nullopt;
  std::string out;
  out.reserve(in.size() * 3 / 4);
  uint32_t acc = 0;
  int bits = 0;
  for (char c : in) {
    const int v = val(c);
    if (v < 0) return std::nullopt;
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((acc >> bits) & 0xff);
    }
  }
  return out;
}

namespace {

constexpr size_t kChunkChars = 1000;  // under PMI2_MAX_VALLEN (1024) with room to spare
constexpr size_t kValueCap = 1024;

struct Pmi2Api {
  using Init = int (*)(int*, int*, int*, int*);
  using Finalize = int (*)();
  using Put = int (*)(const char*, const char*);
  using Fence = int (*)();
  using Get = int (*)(const char*, int, const char*, char*, int, int*);
  DynLib lib;
  Init init = nullptr;
  Finalize finalize = nullptr;
  Put put = nullptr;
  Fence fence = nullptr;
  Get get = nullptr;
  explicit Pmi2Api(const std::vector<std::string>& names) : lib(names) {
    init = lib.sym<Init>("PMI2_Init");
    finalize = lib.sym<Finalize>("PMI2_Finalize");
    put = lib.sym<Put>("PMI2_KVS_Put");
    fence = lib.sym<Fence>("PMI2_KVS_Fence");
    get = lib.sym<Get>("PMI2_KVS_Get");
  }
  bool complete() const { return init && finalize && put && fence && get; }
};

class Pmi2Bootstrap final : public BootstrapBase {
 public:
  Pmi2Bootstrap(std::unique_ptr<Pmi2Api> api, double timeout_s, const EnvLookup& env)
      : BootstrapBase(LaunchInfo{}), api_(std::move(api)), timeout_s_(timeout_s), report_s_(rendezvous_report_s(env)) {
    int spawned = 0, size = 0, rank = 0, appnum = 0;
    const int rc = api_->init(&spawned, &size, &rank, &appnum);
    if (rc != 0)
      DP_THROW_USER("{}: PMI2_Init failed (error {}); PMI_FD/PMI_RANK are set, but no PMI2 server answers (launch "
                    "with srun --mpi=pmi2, or choose another bootstrap)",
                    who_, rc);
    initialized_ = true;
    if (size < 1 || rank < 0 || rank >= size)
      throw DpError(fmt::format("{}: PMI2_Init gave rank {} of {}", who_, rank, size));
    info_.rank = rank;
    info_.size = size;
    // srun's variables, when this is srun: they match PMI2's ranks (both are Slurm task ids).
    info_.local_rank = env_int(env, who_, "SLURM_LOCALID", -1, 0, size - 1);
    info_.node_id = env_int(env, who_, "SLURM_NODEID", -1, 0, 1 << 24);
    if (const char* tpn = env("SLURM_STEP_TASKS_PER_NODE"); tpn && info_.node_id >= 0) {
      const auto counts = expand_tasks_per_node(tpn);
      if (static_cast<size_t>(info_.node_id) < counts.size()) info_.local_size = counts[static_cast<size_t>(info_.node_id)];
    }
    settle_topology(host_key(env));
  }
  ~Pmi2Bootstrap() override {
    if (initialized_) api_->finalize();
  }

  const char* kind() const override { return "pmi2"; }

  std::vector<std::string> allgather(const std::string& mine) override {
    const uint64_t seq = seq_++;
    const std::string enc = base64url_encode(mine);
    const size_t chunks = (enc.size() + kChunkChars - 1) / kChunkChars;
    put(fmt::format("dptrain.{}.{}", seq, info_.rank), std::to_string(chunks), seq);
    for (size_t i = 0; i < chunks; ++i)
      put(fmt::format("dptrain.{}.{}.{}", seq, info_.rank, i), enc.substr(i * kChunkChars, kChunkChars), seq);
    const auto rc = call_with_deadline<int>([f = api_->fence] { return f(); }, timeout_s_,
                                            [&] { say_waiting(seq); }, report_s_);
    if (!rc)
      throw DpError(fmt::format("{}: timed out after {:g} s in PMI2_KVS_Fence ({}); PMI2 does not say which of the {} "
                                "ranks did not arrive",
                                who_, timeout_s_, allgather_name(seq), info_.size));
    if (*rc != 0) throw DpError(fmt::format("{}: PMI2_KVS_Fence failed in {} (error {})", who_, allgather_name(seq), *rc));
    std::vector<std::string> out(static_cast<size_t>(info_.size));
    for (int r = 0; r < info_.size; ++r) {
      const std::string count_s = get(r, fmt::format("dptrain.{}.{}", seq, r), seq);
      char* end = nullptr;
      const unsigned long n = std::strtoul(count_s.c_str(), &end, 10);
      if (count_s.empty() || *end != '\0')
        throw DpError(fmt::format("{}: rank {}'s chunk count '{}' in {} is not a number", who_, r, count_s,
                                  allgather_name(seq)));
      std::string e;
      for (unsigned long i = 0; i < n; ++i) e += get(r, fmt::format("dptrain.{}.{}.{}", seq, r, i), seq);
      auto blob = base64url_decode(e);
      if (!blob) throw DpError(fmt::format("{}: rank {}'s blob in {} is not base64url", who_, r, allgather_name(seq)));
      out[static_cast<size_t>(r)] = std::move(*blob);
    }
    return out;
  }

 private:
  void put(const std::string& key, const std::string& value, uint64_t seq) {
    const int rc = api_->put(key.c_str(), value.c_str());
    if (rc != 0) throw DpError(fmt::format("{}: PMI2_KVS_Put of '{}' failed in {} (error {})", who_, key, allgather_name(seq), rc));
  }
  std::string get(int rank, const std::string& key, uint64_t seq) {
    char buf[kValueCap + 1] = {0};
    int len = 0;
    const int rc = api_->get(nullptr, rank, key.c_str(), buf, static_cast<int>(kValueCap), &len);
    if (rc != 0)
      throw DpError(fmt::format("{}: PMI2_KVS_Get of '{}' (rank {}) failed in {} (error {})", who_, key, rank,
                                allgather_name(seq), rc));
    if (len < 0 || static_cast<size_t>(len) > kValueCap) len = static_cast<int>(std::strlen(buf));
    return std::string(buf, std::min(static_cast<size_t>(len), std::strlen(buf)));
  }

  const std::string who_ = "bootstrap pmi2";
  std::unique_ptr<Pmi2Api> api_;
  // A fence cannot say who has arrived: one line, the first time a fence is slow.
  void say_waiting(uint64_t seq) {
    if (said_waiting_) return;
    said_waiting_ = true;
    log::get("coll")->info("{}: rank {} waiting for the other ranks in PMI2_KVS_Fence ({}), up to {:g} s; PMI2 cannot say "
                           "how many have arrived, so this is the only such line",
                           who_, info_.rank, allgather_name(seq), timeout_s_);
  }
  double timeout_s_;
  double report_s_ = 5;
  bool said_waiting_ = false;
  bool initialized_ = false;
  uint64_t seq_ = 0;
};

}  // namespace

std::unique_ptr<Bootstrap> make_pmi2_bootstrap(double timeout_s) {
  // Without PMI_FD, libpmi2 initialises as a singleton and fails on the first KVS call.
  if (std::getenv("PMI_FD") == nullptr)
    DP_THROW_USER("bootstrap pmi2: PMI_FD is not set: there is no PMI2 server to talk to (launch with srun --mpi=pmi2, "
                  "or choose another bootstrap)");
  std::vector<std::string> names = {"libpmi2.so.0", "libpmi2.so"};
  if (const Tunables t = tunables(); t.is_set(Tunable::Pmi2Lib)) names = {t.text(Tunable::Pmi2Lib)};
  auto api = std::make_unique<Pmi2Api>(names);
  if (!api->lib.handle())
    DP_THROW_USER("bootstrap pmi2: cannot load the PMI2 library ({}); install Slurm's libpmi2 (Debian: libpmi2-0) or "
                  "choose another bootstrap",
                  api->lib.error());
  if (!api->complete())
    DP_THROW_USER("bootstrap pmi2: {} lacks PMI2_Init/KVS_Put/KVS_Fence/KVS_Get: not a PMI2 library", api->lib.name());
  log::get("coll")->debug("bootstrap pmi2: using {}", api->lib.name());
  return std::make_unique<Pmi2Bootstrap>(std::move(api), timeout_s, process_env());
}

}  // namespace dp
