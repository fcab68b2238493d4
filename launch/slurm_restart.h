// defines: `dptrain record-restart`, what the sbatch script of `dptrain submit --min-nodes`
// (launch/submit.h) runs between two srun steps: the restart's line in the run's metrics.jsonl
// (launch/restart_record.h's, as the local launcher writes it, plus the nodes the next step runs
// on), and the words the script's own line adds (where the job resumes, the steps lost).
#pragma once
#include <string>

#include <nlohmann/json.hpp>

namespace CLI {
class App;
}

namespace dp::launch {

// What the script knows about the failed step.
struct SlurmRestart {
  std::string run;         // the run directory <run.dir>/<run.name>
  int restart = 0;         // 1 for the first
  int max_restarts = 0;    // --max-restarts
  int status = 1;          // srun's exit status
  int rank = -1;           // the first rank on the lost node (-1: no node lost)
  std::string host;        // the lost node(s), space-separated ("" none)
  int nodes = 0;           // the nodes the next step runs on
  std::string cause;       // the script's words: "host(s) h3 left the job (...)"
};

// The subcommand and its options (hidden from `dptrain --help`: the script's, not the user's).
CLI::App* add_record_restart_command(CLI::App& app, SlurmRestart& r);

// Appends the metrics line (its "cause" the script's, "nodes" added) and prints restart_details.
int record_slurm_restart(const SlurmRestart& r);

}  // namespace dp::launch
