// defines: `dptrain record-restart` (launch/slurm_restart.h).
#include "launch/slurm_restart.h"

#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <filesystem>

#include "launch/restart_record.h"
#include "launch/run_dir.h"

namespace dp::launch {

CLI::App* add_record_restart_command(CLI::App& app, SlurmRestart& r) {
  CLI::App* sub = app.add_subcommand("record-restart", "");  // no description: hidden
  sub->add_option("--run", r.run, "the run directory")->required();
  sub->add_option("--restart", r.restart, "the restart's number (1 for the first)")->required();
  sub->add_option("--max-restarts", r.max_restarts, "--max-restarts")->required();
  sub->add_option("--status", r.status, "srun's exit status")->required();
  sub->add_option("--rank", r.rank, "the first rank on the lost node (-1: none)");
  sub->add_option("--host", r.host, "the lost node(s)");
  sub->add_option("--nodes", r.nodes, "the nodes the next step runs on");
  sub->add_option("--cause", r.cause, "what happened");
  return sub;
}

int record_slurm_restart(const SlurmRestart& r) {
  const std::filesystem::path p(r.run);
  RunDir run(p.parent_path().string(), p.filename().string());
  const RestartFacts f = read_restart_facts(run.path());
  set_flight_records_aside(run.path(), r.restart);
  RestartEvent e;
  e.restart = r.restart;
  e.max_restarts = r.max_restarts;
  e.failure = WorkerExit{r.rank, r.status, 0};
  e.host = r.host;
  const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  nlohmann::json line = restart_metrics_line(e, f, now);
  if (!r.cause.empty()) line["cause"] = r.cause;
  line["nodes"] = r.nodes;
  run.append_metrics(line);
  std::printf("%s\n", restart_details(f).c_str());
  return 0;
}

}  // namespace dp::launch
