// defines: `dptrain submit`: the sbatch script of a training job (a pure function of its inputs)
// and its submission with sbatch.
//
// The job runs one dptrain task per GPU (per node: --ntasks-per-node = --gres=gpu:G), or on CPU
// nodes (G = 0) one task per node unless --ntasks-per-node says otherwise, launched by
// `srun --mpi=pmix` (dptrain's PMIx bootstrap). Preemption and time limits: `--signal=USR1@90`
// makes Slurm send SIGUSR1 to every task 90 s before the end; dptrain then checkpoints and asks
// for a requeue (`--requeue` allows it), and the requeued job, the same script with the same
// job id, resumes from the run directory's newest checkpoint. Outputs are opened in append mode,
// so a requeued job adds to its logs: logs/slurm-<job>.out (the batch script) and
// logs/slurm-<job>-<task>.out (each task).
//
// The job runs a snapshot of the resolved cfg taken at submit time (<run>/submit-<time>.cfg, every
// --set applied, run.dir absolute), not the cfg the user keeps editing: a job waiting in the queue,
// or requeued, runs what was submitted.
#pragma once
#include <ctime>
#include <string>
#include <vector>

namespace dp::launch {

// The Slurm side of the job (the `dptrain submit` options).
struct SlurmOptions {
  int nodes = 1;
  int gpus_per_node = 0;      // 0: CPU nodes (no --gres)
  int ntasks_per_node = 0;    // 0: gpus_per_node, or 1 on CPU nodes
  int cpus_per_task = 0;      // 0: Slurm's default
  std::string mem;            // per node, e.g. "64G" ("" = Slurm's default)
  std::string partition, account, qos, time, nodelist;  // "" = not given
  // --max-restarts K: the script runs the srun step again after a failure, up to K times (see
  // sbatch_script); 0: one srun step, as before.
  int max_restarts = 0;
  // --min-nodes M (1 <= M <= nodes; 0: not given): the job asks for its N nodes and --no-kill
  // (Slurm keeps the job when one of its nodes fails, and drops that node from it), and each srun
  // step of the --max-restarts loop (which it needs) runs on the job's nodes still up: a step
  // that lost a node runs again on the others, a smaller world resuming from the newest
  // checkpoint (train.elastic_batch says what the batch keeps). Fewer than M nodes up: the job
  // stops with a line naming the missing ones. M = N: a lost node is waited for (while Slurm
  // still counts it as not responding), then named.
  int min_nodes = 0;
};

struct SbatchJob {
  SlurmOptions slurm;
  std::string job_name;            // run.name
  std::string workdir;             // absolute: where the job starts (the submit directory)
  std::string run_path;            // absolute: <run.dir>/<run.name>
  std::string dptrain;             // absolute path of the dptrain binary
  std::vector<std::string> args;   // dptrain's arguments: the cfg snapshot's absolute path, then options
};

// Tasks per node the job asks for (see SlurmOptions). Throws UserError when --ntasks-per-node
// contradicts one task per GPU.
int tasks_per_node(const SlurmOptions& s);

// The script, byte for byte (golden-tested). Throws UserError for values an #SBATCH line cannot
// hold (whitespace in paths or names). With slurm.max_restarts K > 0 the srun step runs in a loop:
// a step that fails with any status but 2 (a cfg or input error: launch/exit_status.h), 130 or 143
// (the job was interrupted or cancelled) runs again, up to K times, with DPTRAIN_RESTART_COUNT set
// and checkpoint.resume = true, so it resumes from the newest checkpoint; each restart is a line
// in logs/slurm-<job>.out, and after K the script exits with the step's status, saying so.
// With slurm.min_nodes (see SlurmOptions; UserError without --max-restarts or above --nodes) each
// step runs on the nodes still up (elastic_srun: -N n -n n x tasks --nodelist), a step that lost a
// node is retried even when srun reports 130 or 143, and each restart appends its line to the
// run's metrics.jsonl (`dptrain record-restart`, launch/slurm_restart.h).
std::string sbatch_script(const SbatchJob& job);

// `word` as one shell word: unchanged when it holds only [A-Za-z0-9_./=:,@%+-], else in single quotes.
std::string shell_quote(const std::string& word);

// Pure. The snapshot's file name for a submission at `t` (local time): "submit-20250301-142233.cfg";
// attempt > 1 (that name is taken: two submissions in one second) adds "-<attempt>".
std::string snapshot_name(std::time_t t, int attempt = 1);

// The snapshot's text: the resolved config (runtime/config.h to_toml) under a line saying what it is.
std::string snapshot_text(const std::string& resolved_toml, const std::string& source_cfg);

// "" unless <run_path>/final.safetensors exists (the run directory holds a finished run, which the
// job would find complete: it would only evaluate); then the warning saying so and what to do.
std::string finished_run_warning(const std::string& run_path);

// Runs `sbatch --parsable <script_path>` (found on PATH) and returns the job id it prints.
// sbatch's own messages go to our stderr. Throws UserError when sbatch is not on PATH or fails:
//   sbatch not found on PATH: run `dptrain submit` on a Slurm login node, or add --dry-run to print the script (written to <script_path>)
//   sbatch failed (exit status 1; its message is above); the script is <script_path>
std::string submit_sbatch(const std::string& script_path);

}  // namespace dp::launch
