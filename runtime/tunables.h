// defines: Tunable and the one table of DPTRAIN_* environment tunables (name, type, default,
// range, meaning); Tunables, their values read and validated together; tunables(), the process's
// own, read once; log_tunables(), which logs each one set once; and the tunables' reference
// (Markdown for docs/config-reference.md, a short list for dptrain --help).
//
// NCCL's NCCL_PARAM is the model: a knob that is not worth a config key (it tunes the transport,
// names a library, injects a fault for tests) is still declared in one place, checked, and
// visible in the logs when someone set it. Variables that launchers and the system set (RANK,
// SLURM_*, PMI_*, PMIX_*, OMP_NUM_THREADS, ...) are not tunables: the bootstrap reads those
// through its injectable EnvLookup (collectives/bootstrap/common.h).
#pragma once
#include <array>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>

namespace dp {

enum class Tunable {
  RingSmallBytes,
  RingPieceBytes,
  RingSocketBuffer,
  RingShmBytes,
  RingSpinUs,
  RingHost,
  RingHierarchical,
  PmixLib,
  Pmi2Lib,
  MklDir,
  RunId,
  JobToken,
  StoreBind,
  StoreMaxFrameBytes,
  StoreMaxPending,
  StoreHandshakeS,
  FlightRecords,
  RendezvousReportS,
  RestartCount,
  FaultKillAfterStep,
  FaultKillRank,
  FaultKillLaunches,
  FaultSlowStepMs,
  FaultDeviceOomAtStep,
  FaultKillInCheckpointWrite,
  FaultCheckpointNoSpace,
};
inline constexpr size_t kTunableCount = static_cast<size_t>(Tunable::FaultCheckpointNoSpace) + 1;

enum class TunableType { Integer, Number, Text };

struct TunableSpec {
  Tunable id;
  std::string_view name;           // DPTRAIN_...
  TunableType type;
  std::string_view default_value;  // as it would be written in the environment; "" = none (meaning says)
  double min, max;                 // Integer and Number: the allowed range (max >= 9e18 reads "max")
  std::string_view meaning;
};

// The table, in the order of the reference.
std::span<const TunableSpec> tunable_specs();
const TunableSpec& tunable_spec(Tunable t);

// Every tunable's value: the one set in the environment, else the table's default.
class Tunables {
 public:
  // Set in the environment (to a non-empty value: an empty one counts as unset).
  bool is_set(Tunable t) const { return at(t).set; }
  // The value as its type; DpError for a tunable of another type, or for one that is unset and
  // has no default (ask is_set first).
  int64_t integer(Tunable t) const;
  double number(Tunable t) const;
  const std::string& text(Tunable t) const { return at(t).text; }  // any type, as written

 private:
  struct Value {
    bool set = false;
    std::string text;  // the environment's value, else the default
    int64_t integer = 0;
    double number = 0;
  };
  const Value& at(Tunable t) const { return values_[static_cast<size_t>(t)]; }
  std::array<Value, kTunableCount> values_{};
  friend Tunables read_tunables(const std::function<const char*(const char*)>& env);
};

// Pure: every tunable from `env` (nullptr = unset), validated. UserError for the first bad one,
// naming the variable, its value and what is allowed, e.g.
//   environment variable DPTRAIN_RING_SPIN_US = "fast" is not allowed: expected a number in
//   [0, 1000000]; unset it for the default (50)
Tunables read_tunables(const std::function<const char*(const char*)>& env);

// This process's tunables, read from its environment on the first call (UserError there for a
// bad value; dptrain makes that call at startup). Later calls return the same values.
Tunables tunables();
// One info line per variable set (subsystem "env"), each the first time it is called with that
// value: the trainer calls it once its logs reach the console of rank 0 and every rank's file.
void log_tunables();
// Reads and validates the environment's tunables without keeping them: for a launcher, whose
// workers read their own.
void check_tunables();
// Reads the environment again: for tests that set a tunable in-process (setenv) after the first
// read. Production code never calls it.
void reload_tunables();

// Markdown: a section with one table row per tunable (appended to the config reference).
std::string tunables_reference();
// Plain text for dptrain --help: one line per tunable, name, type, range and default.
std::string tunables_help();

}  // namespace dp
