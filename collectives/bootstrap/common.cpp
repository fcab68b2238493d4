#include "collectives/bootstrap/common.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <map>

#include "base/error.h"
#include "collectives/bootstrap/job_token.h"

namespace dp {

EnvLookup process_env() {
  return [](const std::string& name) -> const char* { return std::getenv(name.c_str()); };
}

Topology derive_topology(const std::vector<std::string>& hosts, int rank) {
  DP_CHECK(rank >= 0 && static_cast<size_t>(rank) < hosts.size(), "rank {} of {} host names", rank, hosts.size());
  std::map<std::string, int> node_of;
  for (const auto& h : hosts) node_of.emplace(h, static_cast<int>(node_of.size()));
  Topology t;
  const std::string& mine = hosts[static_cast<size_t>(rank)];
  t.node_id = node_of.at(mine);
  t.local_rank = 0;
  t.local_size = 0;
  for (size_t r = 0; r < hosts.size(); ++r) {
    if (hosts[r] != mine) continue;
    if (static_cast<int>(r) < rank) ++t.local_rank;
    ++t.local_size;
  }
  return t;
}

std::string host_key(const EnvLookup& env) {
  if (const char* n = env("SLURMD_NODENAME"); n && *n) return n;
  char buf[256] = {0};
  if (::gethostname(buf, sizeof buf - 1) == 0) return buf;
  return "unknown-host";
}

std::string format_ranks(const std::vector<int>& ranks) {
  std::string out = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (i > 0) out += ", ";
    if (j - i >= 2) {
      out += fmt::format("{}-{}", ranks[i], ranks[j]);
    } else {
      for (size_t k = i; k <= j; ++k) out += fmt::format("{}{}", k > i ? ", " : "", ranks[k]);
    }
    i = j + 1;
  }
  return out;
}

double rendezvous_report_s(const EnvLookup& env) {
  const char* v = env("DPTRAIN_RENDEZVOUS_REPORT_S");
  if (v == nullptr || *v == 0) return 5.0;
  char* end = nullptr;
  const double s = std::strtod(v, &end);
  if (end == v || *end != 0 || !(s >= 0.1 && s <= 3600))
    DP_THROW_USER("environment variable DPTRAIN_RENDEZVOUS_REPORT_S = \"{}\" is not allowed: expected a number in "
                  "[0.1, 3600]; unset it for the default (5)",
                  v);
  return s;
}

std::string waiting_line(const std::string& who, int rank, const std::vector<int>& missing, int size, uint64_t seq,
                         double waited_s, double timeout_s) {
  return fmt::format("{}: rank {} waiting for {} ({} of {} arrived) in {}: {:.1f} s of {:g} s", who, rank,
                     format_ranks(missing), size - static_cast<int>(missing.size()), size, allgather_name(seq),
                     waited_s, timeout_s);
}

std::string allgather_name(uint64_t seq) {
  return seq == 0 ? "allgather #0 (startup)" : fmt::format("allgather #{}", seq);
}

int env_int(const EnvLookup& env, const std::string& who, const std::string& name, int fallback, int lo, int hi) {
  const char* v = env(name);
  if (v == nullptr) return fallback;
  errno = 0;
  char* end = nullptr;
  long x = std::strtol(v, &end, 10);
  if (*v == '\0' || *end != '\0' || errno != 0 || x < lo || x > hi)
    DP_THROW_USER("{}: {}='{}' is not an integer in [{}, {}]", who, name, v, lo, hi);
  return static_cast<int>(x);
}

void BootstrapBase::settle_topology(const std::string& host) {
  // "host" or, from rank 0 when the launcher gave no token, "host\ntoken" (host names hold no
  // newline).
  const bool share = token_.empty() && info_.size > 1;
  std::vector<std::string> blobs = allgather(share && info_.rank == 0 ? host + "\n" + make_job_token() : host);
  if (share) {
    const size_t nl = blobs[0].find('\n');
    if (nl == std::string::npos)
      throw DpError(fmt::format("bootstrap {}: rank 0 shared no job token in the startup exchange (mixed dptrain "
                                "builds, or only some ranks have DPTRAIN_JOB_TOKEN?)",
                                kind()));
    token_ = blobs[0].substr(nl + 1);
  }
  for (auto& b : blobs) b = b.substr(0, b.find('\n'));
  const Topology t = derive_topology(blobs, info_.rank);
  if (info_.local_rank < 0) info_.local_rank = t.local_rank;
  if (info_.local_size < 0) info_.local_size = t.local_size;
  if (info_.node_id < 0) info_.node_id = t.node_id;
  if (info_.local_rank >= info_.local_size)
    DP_THROW_USER("bootstrap {}: local rank {} is not below the local size {} (check LOCAL_RANK and LOCAL_WORLD_SIZE)",
                  kind(), info_.local_rank, info_.local_size);
}

}  // namespace dp
