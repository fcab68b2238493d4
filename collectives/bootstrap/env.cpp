// The TCP-store bootstrap (kinds "env" and "slurm") and the env bootstrap's reading of torchrun's
// variables.
#include <algorithm>

#include "collectives/bootstrap/env.h"
#include "collectives/bootstrap/job_token.h"
#include "collectives/bootstrap/tcp_store.h"
#include "collectives/listen_address.h"
#include "base/error.h"
#include "runtime/log.h"
#include "runtime/suggest.h"

namespace dp {
namespace {

bool is_loopback_literal(const std::string& host) {
  return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

class StoreBootstrap final : public BootstrapBase {
 public:
  StoreBootstrap(std::string kind, const LaunchInfo& info, const StoreAddress& at, double timeout_s,
                 const std::string& host, double report_s)
      : BootstrapBase(info, at.token), kind_(std::move(kind)), who_("bootstrap " + kind_), timeout_s_(timeout_s),
        report_s_(report_s) {
    if (info_.size > 1) {
      // Rank 0's own client goes to the address its store is bound to: with dist.iface that may
      // differ from what MASTER_ADDR resolves to on rank 0's own host (Debian maps a host's name
      // to 127.0.1.1) while the other hosts reach it by MASTER_ADDR.
      std::string connect_to = at.addr;
      if (info_.rank == 0) {
        // The store listens on the job's own address (DPTRAIN_STORE_BIND, dist.iface's address or
        // MASTER_ADDR), never on every interface unless asked.
        const std::string bind = listen_address(Listener::Store, {at.bind, at.iface, at.addr, false});
        if (at.token.empty() && !is_loopback_literal(bind))
          log::get("coll")->warn("{}: no job token (DPTRAIN_JOB_TOKEN): the TCP store on {}:{} is open to anyone who "
                                 "can reach that port, who could read and change this job's rendezvous; set "
                                 "DPTRAIN_JOB_TOKEN to the same secret on every rank (e.g. `openssl rand -hex 32`)",
                                 who_, bind, at.port);
        server_ = std::make_unique<TcpStoreServer>(who_, bind, at.port, info_.size, at.token);
        if (bind != "0.0.0.0") connect_to = bind;
      }
      client_ = std::make_unique<TcpStoreClient>(who_, connect_to, at.port, info_.rank, info_.size, timeout_s, at.token,
                                                 report_s);
    }
    settle_topology(host);
  }
  // The client leaves first (goodbye), then rank 0's server flushes what it owes the others.
  ~StoreBootstrap() override {
    client_.reset();
    server_.reset();
  }

  const char* kind() const override { return kind_.c_str(); }

  std::vector<std::string> allgather(const std::string& mine) override {
    const uint64_t seq = seq_++;
    if (info_.size == 1) return {mine};
    std::vector<std::string> keys, del;
    for (int r = 0; r < info_.size; ++r) {
      keys.push_back(fmt::format("{}/{}", seq, r));
      if (info_.rank == 0 && seq > 0) del.push_back(fmt::format("{}/{}", seq - 1, r));
    }
    auto res = wait_reporting(seq, del, {{keys[static_cast<size_t>(info_.rank)], mine}}, keys);
    if (res.status == TcpStoreClient::Result::Ok) return std::move(res.values);
    const std::vector<int> missing = missing_of(res);
    if (res.status == TcpStoreClient::Result::Timeout)
      throw DpError(fmt::format("{}: timed out after {:g} s waiting for {} of {} in {}", who_, timeout_s_,
                                format_ranks(missing), info_.size, allgather_name(seq)));
    if (res.status == TcpStoreClient::Result::Closing)
      throw DpError(fmt::format("{}: rank 0 stopped serving the TCP store (it failed or left) while this rank waited "
                                "for {} of {} in {}",
                                who_, format_ranks(missing), info_.size, allgather_name(seq)));
    throw DpError(fmt::format("{}: {} of {} left without a goodbye (exited or crashed?) while this rank waited for {} "
                              "in {}",
                              who_, format_ranks(res.lost_ranks), info_.size, format_ranks(missing),
                              allgather_name(seq)));
  }

 private:
  // The allgather's transaction, waited for in report_s slices: after each slice that ends
  // without every key, an info line names the ranks still missing; the last slice ends at the
  // timeout.
  TcpStoreClient::Result wait_reporting(uint64_t seq, std::vector<std::string> del,
                                        std::vector<std::pair<std::string, std::string>> set,
                                        const std::vector<std::string>& keys) {
    const auto t0 = std::chrono::steady_clock::now();
    while (true) {
      const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      const double left = std::max(0.0, timeout_s_ - waited);
      const bool last = left <= report_s_;
      auto res = client_->transact(del, set, keys, last ? left : report_s_, /*report_only=*/!last);
      if (last || res.status != TcpStoreClient::Result::Timeout) return res;
      del.clear(), set.clear();  // done by the first slice
      log::get("coll")->info("{}", waiting_line(who_, info_.rank, missing_of(res), info_.size, seq, waited + report_s_,
                                                timeout_s_));
    }
  }
  std::vector<int> missing_of(const TcpStoreClient::Result& res) const {
    std::vector<int> missing;
    for (int r = 0; r < info_.size; ++r)
      if (!res.present[static_cast<size_t>(r)]) missing.push_back(r);
    return missing;
  }

  std::string kind_, who_;
  double timeout_s_, report_s_;
  uint64_t seq_ = 0;
  std::unique_ptr<TcpStoreServer> server_;
  std::unique_ptr<TcpStoreClient> client_;
};

}  // namespace

std::unique_ptr<Bootstrap> make_store_bootstrap(const std::string& kind, const LaunchInfo& info, const StoreAddress& at,
                                                double timeout_s, const std::string& host, double report_s) {
  return std::make_unique<StoreBootstrap>(kind, info, at, timeout_s, host, report_s);
}

StoreAddress store_address(const EnvLookup& env, std::string addr, int port, std::string iface) {
  StoreAddress at;
  at.addr = std::move(addr);
  at.iface = std::move(iface);
  at.port = port;
  at.token = job_token_from_env(env("DPTRAIN_JOB_TOKEN"));
  if (const char* b = env("DPTRAIN_STORE_BIND"); b && *b) at.bind = b;
  return at;
}

std::unique_ptr<Bootstrap> make_env_bootstrap(double timeout_s, const EnvLookup& env, const std::string& iface) {
  const std::string who = "bootstrap env";
  std::vector<std::string> missing;
  for (const char* v : {"RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"})
    if (env(v) == nullptr) missing.push_back(v);
  if (!missing.empty())
    DP_THROW_USER("{}: missing environment variable{} {} (a torchrun-style launcher sets RANK, WORLD_SIZE, "
                  "MASTER_ADDR and MASTER_PORT)",
                  who, missing.size() > 1 ? "s" : "", join(missing));
  constexpr int kMax = 1 << 24;
  LaunchInfo info;
  info.size = env_int(env, who, "WORLD_SIZE", -1, 1, kMax);
  info.rank = env_int(env, who, "RANK", -1, 0, kMax);
  if (info.rank >= info.size)
    DP_THROW_USER("{}: RANK={} is not below WORLD_SIZE={} (ranks go from 0 to WORLD_SIZE-1)", who, info.rank,
                  info.size);
  info.local_size = env_int(env, who, "LOCAL_WORLD_SIZE", -1, 1, info.size);
  info.local_rank = env_int(env, who, "LOCAL_RANK", -1, 0, info.size - 1);
  info.node_id = env_int(env, who, "GROUP_RANK", -1, 0, info.size - 1);
  const std::string addr = env("MASTER_ADDR");
  if (addr.empty()) DP_THROW_USER("{}: MASTER_ADDR is empty (set it to rank 0's host name or address)", who);
  const int port = env_int(env, who, "MASTER_PORT", -1, 1, 65535);
  log::get("coll")->debug("{}: rank {} of {}, store at {}:{}", who, info.rank, info.size, addr, port);
  return make_store_bootstrap("env", info, store_address(env, addr, port, iface), timeout_s, host_key(env),
                              rendezvous_report_s(env));
}

}  // namespace dp
