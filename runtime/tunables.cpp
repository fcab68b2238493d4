#include "runtime/tunables.h"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <mutex>
#include <optional>

#include "base/error.h"
#include "runtime/log.h"

namespace dp {
namespace {

constexpr double kMax = 9.2e18;  // "no upper bound" for an integer (shown as "max")

// Ring values must be the same on every rank: the stream headers catch a rank that differs
// (collectives/ring/transport.cpp). Defaults and their reasons: collectives/ring/ring_communicator.h.
constexpr TunableSpec kSpecs[] = {
    {Tunable::RingSmallBytes, "DPTRAIN_RING_SMALL_BYTES", TunableType::Integer, "65536", 0, kMax,
     "ring backend: allreduce and broadcast messages up to this many bytes use the latency-optimised algorithms "
     "(recursive doubling, binomial tree), larger ones the pipelined ring and chain"},
    {Tunable::RingPieceBytes, "DPTRAIN_RING_PIECE_BYTES", TunableType::Integer, "262144", 8, kMax,
     "ring backend: pipelining granularity (bytes) of the ring and the chain"},
    {Tunable::RingSocketBuffer, "DPTRAIN_RING_SOCKET_BUFFER", TunableType::Integer, "4194304", 0, 2147483647,
     "ring backend: SO_SNDBUF/SO_RCVBUF (bytes) of the data sockets (0 = the system's)"},
    {Tunable::RingShmBytes, "DPTRAIN_RING_SHM_BYTES", TunableType::Integer, "1048576", 0, kMax,
     "ring backend: capacity (bytes) of each shared-memory FIFO between two ranks of a node, of which each rank "
     "maps (local ranks - 1); 0 keeps every pair on TCP"},
    {Tunable::RingSpinUs, "DPTRAIN_RING_SPIN_US", TunableType::Number, "50", 0, 1e6,
     "ring backend: microseconds a rank waiting on shared memory spins (yielding the core) before it sleeps"},
    {Tunable::RingHost, "DPTRAIN_RING_HOST", TunableType::Text, "", 0, 0,
     "ring backend: the address this rank listens on, over dist.iface (unset: dist.iface's address when set, else "
     "127.0.0.1 when every rank is on this node, else this host's address)"},
    {Tunable::RingHierarchical, "DPTRAIN_RING_HIERARCHICAL", TunableType::Integer, "1", 0, 1,
     "ring backend: 1 = all-reduce hierarchically (within each host over shared memory, across hosts between one "
     "leader per host) when the job spans several hosts and some host runs several ranks; 0 = always the flat "
     "algorithms (collectives/ring/README.md)"},
    {Tunable::PmixLib, "DPTRAIN_PMIX_LIB", TunableType::Text, "", 0, 0,
     "bootstrap pmix: the PMIx library to load (unset: libpmix.so.2, then libpmix.so)"},
    {Tunable::Pmi2Lib, "DPTRAIN_PMI2_LIB", TunableType::Text, "", 0, 0,
     "bootstrap pmi2: the PMI2 library to load (unset: libpmi2.so.0, then libpmi2.so)"},
    {Tunable::MklDir, "DPTRAIN_MKL_DIR", TunableType::Text, "/opt/dptrain-deps/mkl-2026.2.0/lib", 0, 0,
     "CPU linear GEMMs: the folder whose libmkl_rt.so.3 train.cpu_gemm = \"mkl\" (and \"auto\", when it is there) "
     "loads, e.g. tools/setup.sh's pinned MKL; without it auto runs oneDNN or OpenBLAS"},
    {Tunable::RunId, "DPTRAIN_RUN_ID", TunableType::Text, "", 0, 0,
     "bootstrap file: this launch's id, which tells its rendezvous files from an earlier launch's (unset: "
     "SLURM_JOB_ID.SLURM_STEP_ID, else TORCHELASTIC_RUN_ID); read with those through the bootstrap's "
     "environment lookup"},
    {Tunable::JobToken, "DPTRAIN_JOB_TOKEN", TunableType::Text, "", 0, 0,
     "bootstrap env and slurm: the job's secret (16+ printable characters, the same in every process; e.g. "
     "`openssl rand -hex 32`): every connection to rank 0's TCP store and to the ring's listeners proves it "
     "knows it (HMAC-SHA256 over nonces; never sent, never logged). dptrain --nproc sets a fresh one; unset: the "
     "store is open to anyone who can reach its port (a warning says so on a non-loopback address)"},
    {Tunable::StoreBind, "DPTRAIN_STORE_BIND", TunableType::Text, "", 0, 0,
     "bootstrap env and slurm: the address rank 0's TCP store listens on, over dist.iface (unset: dist.iface's "
     "address when set, else MASTER_ADDR's own address, never every interface; \"0.0.0.0\" when MASTER_ADDR is not "
     "an address of rank 0's host, e.g. behind NAT); read through the bootstrap's environment lookup"},
    {Tunable::StoreMaxFrameBytes, "DPTRAIN_STORE_MAX_FRAME_BYTES", TunableType::Integer, "4194304", 4096,
     1073741824,
     "TCP store: the largest request (bytes) rank 0's store accepts from a member of the job; a larger one closes "
     "that connection (the bootstrap's own exchanges are a few KB per rank)"},
    {Tunable::StoreMaxPending, "DPTRAIN_STORE_MAX_PENDING", TunableType::Integer, "64", 1, 65536,
     "TCP store: connections that have not yet proved the job token, at most; past it the oldest is closed (so a "
     "flood of connections never takes rank 0's file descriptors)"},
    {Tunable::StoreHandshakeS, "DPTRAIN_STORE_HANDSHAKE_S", TunableType::Number, "5", 0.05, 3600,
     "TCP store and ring listeners: seconds a new connection has to prove the job token before it is closed"},
    {Tunable::FlightRecords, "DPTRAIN_FLIGHT_RECORDS", TunableType::Integer, "256", 16, 1000000,
     "flight recorder: how many of its last collectives each rank remembers for runs/<name>/flight/rank-<r>.json "
     "(docs/multi-host.md)"},
    {Tunable::RendezvousReportS, "DPTRAIN_RENDEZVOUS_REPORT_S", TunableType::Number, "5", 0.1, 3600,
     "bootstrap: seconds between the 'waiting for ranks' lines of a rank waiting for the others at start-up (and "
     "in any bootstrap exchange); read with the launcher's variables through the bootstrap's environment lookup"},
    {Tunable::RestartCount, "DPTRAIN_RESTART_COUNT", TunableType::Integer, "0", 0, kMax,
     "set by dptrain --nproc for its workers: how often the job has been restarted after a failed worker "
     "(--max-restarts; 0: the first launch; torchrun's TORCHELASTIC_RESTART_COUNT); logged by the workers, and "
     "DPTRAIN_FAULT_KILL_LAUNCHES counts launches with it"},
    {Tunable::FaultKillAfterStep, "DPTRAIN_FAULT_KILL_AFTER_STEP", TunableType::Integer, "", 1, kMax,
     "tests: the process kills itself (SIGKILL) right after step N and any checkpoint due at N, as kill -9 "
     "would (unset: never); only rank DPTRAIN_FAULT_KILL_RANK when that is set, and only in the job's first "
     "DPTRAIN_FAULT_KILL_LAUNCHES launches"},
    {Tunable::FaultKillRank, "DPTRAIN_FAULT_KILL_RANK", TunableType::Integer, "", 0, kMax,
     "tests: only this rank obeys DPTRAIN_FAULT_KILL_AFTER_STEP (unset: every rank)"},
    {Tunable::FaultKillLaunches, "DPTRAIN_FAULT_KILL_LAUNCHES", TunableType::Integer, "1", 1, kMax,
     "tests: DPTRAIN_FAULT_KILL_AFTER_STEP fires in the job's first N launches only (while DPTRAIN_RESTART_COUNT < "
     "N): with the default 1 a job restarted by --max-restarts gets past the fault; a large N makes a rank that "
     "keeps dying"},
    {Tunable::FaultSlowStepMs, "DPTRAIN_FAULT_SLOW_STEP_MS", TunableType::Number, "0", 0, 1e6,
     "tests: the process sleeps this many milliseconds at the start of every step, a straggler for the straggler "
     "report (set it for one rank only)"},
    {Tunable::FaultDeviceOomAtStep, "DPTRAIN_FAULT_DEVICE_OOM_AT_STEP", TunableType::Integer, "", 1, kMax,
     "tests: step N fails as if the device ran out of memory (its first layer raises the out-of-memory error a "
     "failed allocation raises, on the CPU too), so the error, exit status 4 and the resume after it can be tested "
     "without a GPU (unset: never)"},
    {Tunable::FaultKillInCheckpointWrite, "DPTRAIN_FAULT_KILL_IN_CKPT_WRITE_AT_STEP", TunableType::Integer, "", 1,
     kMax,
     "tests: the process kills itself (SIGKILL) while writing the checkpoint of step N, half of its tensors in the "
     "temporary file (with checkpoint.async, from the background writer while training goes on) (unset: never)"},
    {Tunable::FaultCheckpointNoSpace, "DPTRAIN_FAULT_CKPT_NO_SPACE_AT_STEP", TunableType::Integer, "", 1, kMax,
     "tests: writing the checkpoint of step N fails half-way with ENOSPC, as on a full disk (unset: never)"},
};
static_assert(std::size(kSpecs) == kTunableCount, "one table row per Tunable");

std::string bound(double x) { return x >= kMax ? "max" : fmt::format("{}", x); }

std::string allowed(const TunableSpec& s) {
  switch (s.type) {
    case TunableType::Integer: return fmt::format("an integer in [{}, {}]", bound(s.min), bound(s.max));
    case TunableType::Number: return fmt::format("a number in [{}, {}]", bound(s.min), bound(s.max));
    case TunableType::Text: return "any text";
  }
  return "?";
}

[[noreturn]] void refuse(const TunableSpec& s, const std::string& value) {
  DP_THROW_USER("environment variable {} = \"{}\" is not allowed: expected {}; {}", s.name, value, allowed(s),
                s.default_value.empty() ? std::string("or unset it")
                                        : fmt::format("unset it for the default ({})", s.default_value));
}

// Whole-string parses: "64k", "1e3" for an integer, " 5" are all refused.
std::optional<int64_t> parse_integer(const std::string& v) {
  int64_t x = 0;
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
  if (ec != std::errc() || end != v.data() + v.size()) return std::nullopt;
  return x;
}
std::optional<double> parse_number(const std::string& v) {
  double x = 0;
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
  if (ec != std::errc() || end != v.data() + v.size() || !std::isfinite(x)) return std::nullopt;
  return x;
}

struct Parsed {
  int64_t integer = 0;
  double number = 0;
};

// `value` (non-empty) as spec `s` wants it; UserError otherwise.
Parsed parse_value(const TunableSpec& s, const std::string& value) {
  Parsed p;
  switch (s.type) {
    case TunableType::Integer: {
      const auto x = parse_integer(value);
      if (!x || static_cast<double>(*x) < s.min || static_cast<double>(*x) > s.max) refuse(s, value);
      p.integer = *x;
      break;
    }
    case TunableType::Number: {
      const auto x = parse_number(value);
      if (!x || *x < s.min || *x > s.max) refuse(s, value);
      p.number = *x;
      break;
    }
    case TunableType::Text: break;
  }
  return p;
}

struct Process {
  std::mutex mu;
  std::optional<Tunables> values;
  std::array<std::optional<std::string>, kTunableCount> logged;  // the value last logged, per tunable
};
Process& process() {
  static Process p;
  return p;
}

Tunables from_environment() {
  return read_tunables([](const char* name) { return std::getenv(name); });
}

}  // namespace

std::span<const TunableSpec> tunable_specs() { return kSpecs; }

const TunableSpec& tunable_spec(Tunable t) {
  const auto i = static_cast<size_t>(t);
  DP_CHECK(i < kTunableCount && kSpecs[i].id == t, "tunable #{} is not in the table in enum order", i);
  return kSpecs[i];
}

int64_t Tunables::integer(Tunable t) const {
  const TunableSpec& s = tunable_spec(t);
  DP_CHECK(s.type == TunableType::Integer, "{} is not an integer tunable", s.name);
  DP_CHECK(at(t).set || !s.default_value.empty(), "{} is unset and has no default (ask is_set first)", s.name);
  return at(t).integer;
}

double Tunables::number(Tunable t) const {
  const TunableSpec& s = tunable_spec(t);
  DP_CHECK(s.type == TunableType::Number, "{} is not a number tunable", s.name);
  return at(t).number;
}

Tunables read_tunables(const std::function<const char*(const char*)>& env) {
  Tunables out;
  for (const auto& s : kSpecs) {
    const std::string name(s.name);
    const char* v = env(name.c_str());
    Tunables::Value& value = out.values_[static_cast<size_t>(s.id)];
    value.set = v != nullptr && *v != '\0';
    value.text = value.set ? std::string(v) : std::string(s.default_value);
    if (value.text.empty()) continue;  // unset, no default
    const Parsed p = parse_value(s, value.text);
    value.integer = p.integer;
    value.number = p.number;
  }
  return out;
}

Tunables tunables() {
  Process& p = process();
  std::lock_guard lock(p.mu);
  if (!p.values) p.values = from_environment();
  return *p.values;
}

void log_tunables() {
  const Tunables now = tunables();
  Process& p = process();
  std::lock_guard lock(p.mu);
  for (const auto& s : kSpecs) {
    auto& logged = p.logged[static_cast<size_t>(s.id)];
    if (!now.is_set(s.id) || logged == now.text(s.id)) continue;
    logged = now.text(s.id);
    if (s.id == Tunable::JobToken) {  // a secret: say that it is set, never what it is
      log::get("env")->info("{} set by the environment (a secret: not shown)", s.name);
      continue;
    }
    log::get("env")->info("{} set by the environment to {}{}", s.name, now.text(s.id),
                          s.default_value.empty() ? "" : fmt::format(" (default {})", s.default_value));
  }
}

void check_tunables() { from_environment(); }

void reload_tunables() {
  Process& p = process();
  std::lock_guard lock(p.mu);
  p.values = from_environment();
}

std::string tunables_reference() {
  std::string out =
      "\n## Environment tunables\n\n"
      "`DPTRAIN_*` variables: knobs below the config, declared in one table (`runtime/tunables.cpp`), read and "
      "checked once per process (a bad value stops the run with one error naming the variable) and logged when set "
      "(subsystem `env`). An empty value counts as unset.\n\n"
      "| variable | type | default | allowed | meaning |\n|---|---|---|---|---|\n";
  for (const auto& s : kSpecs) {
    const char* type = s.type == TunableType::Integer ? "integer" : s.type == TunableType::Number ? "number" : "text";
    const std::string range = s.type == TunableType::Text ? "" : fmt::format("[{}, {}]", bound(s.min), bound(s.max));
    out += fmt::format("| `{}` | {} | {} | {} | {} |\n", s.name, type,
                       s.default_value.empty() ? "(unset)" : fmt::format("`{}`", s.default_value), range, s.meaning);
  }
  return out;
}

std::string tunables_help() {
  std::string out = "Environment tunables (meanings: dptrain --print-config-reference):\n";
  for (const auto& s : kSpecs)
    out += fmt::format("  {:<32} {}{}\n", s.name, allowed(s),
                       s.default_value.empty() ? "" : fmt::format(", default {}", s.default_value));
  return out;
}

}  // namespace dp
