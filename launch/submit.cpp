#include "launch/submit.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <utility>

#include "launch/command.h"
#include "base/error.h"
#include "runtime/checkpoint/safetensors.h"

namespace dp::launch {
namespace {

void check_sbatch_value(const std::string& what, const std::string& v) {
  if (v.find_first_of(" \t\n\r") != std::string::npos)
    DP_THROW_USER("{} '{}' contains whitespace, which an #SBATCH line cannot hold; choose another", what, v);
}

// The first executable `name` on PATH, or "".
std::string find_on_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    const std::string p = (dir.empty() ? "." : dir) + "/" + name;
    if (::access(p.c_str(), X_OK) == 0) return p;
  }
  return "";
}

}  // namespace

int tasks_per_node(const SlurmOptions& s) {
  if (s.gpus_per_node > 0 && s.ntasks_per_node > 0 && s.ntasks_per_node != s.gpus_per_node)
    DP_THROW_USER("--ntasks-per-node {} with --gpus-per-node {}: dptrain runs one task per GPU; leave "
                  "--ntasks-per-node out (or set it to {})",
                  s.ntasks_per_node, s.gpus_per_node, s.gpus_per_node);
  if (s.ntasks_per_node > 0) return s.ntasks_per_node;
  return s.gpus_per_node > 0 ? s.gpus_per_node : 1;
}

std::string shell_quote(const std::string& word) {
  static const std::string kPlain =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_./=:,@%+-";
  if (!word.empty() && word.find_first_not_of(kPlain) == std::string::npos) return word;
  std::string out = "'";
  for (char c : word) {
    if (c == '\'') out += "'\\''";  // close, escaped quote, reopen
    else out += c;
  }
  return out + "'";
}

namespace {

// The srun step; `extra` ("" or " $resume") ends dptrain's arguments.
std::string srun_line(const SbatchJob& job, const std::string& extra) {
  const SlurmOptions& s = job.slurm;
  // srun does not inherit --cpus-per-task from the allocation (Slurm >= 22.05): pass it on.
  std::string o = "srun --mpi=pmix --kill-on-bad-exit=1 --open-mode=append";
  if (s.cpus_per_task > 0) o += fmt::format(" --cpus-per-task={}", s.cpus_per_task);
  o += " \\\n  --output=" + job.run_path + "/logs/slurm-%j-%t.out \\\n  " + shell_quote(job.dptrain);
  for (const auto& a : job.args) {
    o += ' ';
    o += shell_quote(a);
  }
  return o + extra + "\n";
}

// --max-restarts K: the srun step in a loop (launch/restart_policy.h's rule, by exit status).
std::string retried_srun(const SbatchJob& job) {
  const int k = job.slurm.max_restarts;
  std::string o = fmt::format(
      "# --max-restarts {0}: a failed step (any status but 2, a cfg or input error, and 130 or 143, an\n"
      "# interrupted or cancelled job) runs again, up to {0} times, from the newest checkpoint.\n"
      "restarts=0\n"
      "resume=\n"
      "while true; do\n"
      "export DPTRAIN_RESTART_COUNT=$restarts\n",
      k);
  o += srun_line(job, " $resume");
  o += fmt::format(
      "status=$?\n"
      "if [ $status -eq 0 ]; then exit 0; fi\n"
      "if [ $status -eq 2 ] || [ $status -eq 130 ] || [ $status -eq 143 ]; then\n"
      "  echo \"dptrain submit: the srun step exited with status $status: not restarting\"; exit $status\n"
      "fi\n"
      "if [ $restarts -ge {0} ]; then\n"
      "  echo \"dptrain submit: the srun step exited with status $status after $restarts restart(s) "
      "(--max-restarts {0}): giving up\"; exit $status\n"
      "fi\n"
      "restarts=$((restarts + 1))\n"
      "resume=\"--set checkpoint.resume=true\"\n"
      "echo \"dptrain submit: the srun step exited with status $status; restart $restarts of {0}, from the newest "
      "checkpoint\"\n"
      "done\n",
      k);
  return o;
}

}  // namespace

std::string sbatch_script(const SbatchJob& job) {
  const SlurmOptions& s = job.slurm;
  if (s.nodes < 1) DP_THROW_USER("--nodes {}: need at least 1", s.nodes);
  if (s.gpus_per_node < 0) DP_THROW_USER("--gpus-per-node {}: need 0 (CPU nodes) or more", s.gpus_per_node);
  const int tasks = tasks_per_node(s);
  check_sbatch_value("job name", job.job_name);
  check_sbatch_value("run directory", job.run_path);
  check_sbatch_value("working directory", job.workdir);
  for (const auto& [what, v] : {std::pair{"--partition", s.partition}, {"--account", s.account}, {"--qos", s.qos},
                                {"--time", s.time}, {"--nodelist", s.nodelist}, {"--mem", s.mem}})
    check_sbatch_value(what, v);

  std::string o;
  o += "#!/bin/bash\n";
  o += "# Written by `dptrain submit`; submit it again with: sbatch " + job.run_path + "/submit.sbatch\n";
  o += fmt::format("# {} node(s) x {} task(s), {}.\n", s.nodes, tasks,
                   s.gpus_per_node > 0 ? "one task per GPU" : "CPU nodes");
  o += "# SIGUSR1 90 s before the time limit: dptrain checkpoints, requeues the job and exits;\n";
  o += "# the requeued job resumes from the newest checkpoint in " + job.run_path + "/checkpoints.\n";
  o += "#SBATCH --job-name=" + job.job_name + "\n";
  o += fmt::format("#SBATCH --nodes={}\n", s.nodes);
  o += fmt::format("#SBATCH --ntasks-per-node={}\n", tasks);
  if (s.gpus_per_node > 0) o += fmt::format("#SBATCH --gres=gpu:{}\n", s.gpus_per_node);
  if (s.cpus_per_task > 0) o += fmt::format("#SBATCH --cpus-per-task={}\n", s.cpus_per_task);
  if (!s.mem.empty()) o += "#SBATCH --mem=" + s.mem + "\n";
  if (!s.partition.empty()) o += "#SBATCH --partition=" + s.partition + "\n";
  if (!s.account.empty()) o += "#SBATCH --account=" + s.account + "\n";
  if (!s.qos.empty()) o += "#SBATCH --qos=" + s.qos + "\n";
  if (!s.time.empty()) o += "#SBATCH --time=" + s.time + "\n";
  if (!s.nodelist.empty()) o += "#SBATCH --nodelist=" + s.nodelist + "\n";
  o += "#SBATCH --chdir=" + job.workdir + "\n";
  o += "#SBATCH --output=" + job.run_path + "/logs/slurm-%j.out\n";
  o += "#SBATCH --open-mode=append\n";
  o += "#SBATCH --signal=USR1@90\n";
  o += "#SBATCH --requeue\n";
  o += "\n";
  o += s.max_restarts > 0 ? retried_srun(job) : srun_line(job, "");
  return o;
}

std::string snapshot_name(std::time_t t, int attempt) {
  std::tm tm{};
  ::localtime_r(&t, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
  return attempt > 1 ? fmt::format("submit-{}-{}.cfg", stamp, attempt) : fmt::format("submit-{}.cfg", stamp);
}

std::string snapshot_text(const std::string& resolved_toml, const std::string& source_cfg) {
  return fmt::format("# written by `dptrain submit` from {} (with its --set options): the job runs this file, so\n"
                     "# later edits of {} do not change it\n{}",
                     source_cfg, source_cfg, resolved_toml);
}

std::string finished_run_warning(const std::string& run_path) {
  const std::string final_path = run_path + "/final.safetensors";
  if (!std::filesystem::exists(final_path)) return "";
  std::string step = "?";
  try {
    const SafetensorsFile f = SafetensorsFile::open(final_path);
    if (f.metadata().count("step")) step = f.metadata().at("step");
  } catch (const std::exception&) {
    // Unreadable: still a finished run's file; the step stays unknown.
  }
  return fmt::format("{} already holds a finished run ({} from step {}): the job will resume it, find it complete "
                     "and only evaluate. To train again, submit with another --name, or move {} away first",
                     run_path, final_path, step, run_path);
}

std::string submit_sbatch(const std::string& script_path) {
  const std::string sbatch = find_on_path("sbatch");
  if (sbatch.empty())
    DP_THROW_USER("sbatch not found on PATH: run `dptrain submit` on a Slurm login node, or add --dry-run to print "
                  "the script (written to {})",
                  script_path);
  const std::string cmd = shell_quote(sbatch) + " --parsable " + shell_quote(script_path);
  const CommandResult r = run_command(cmd);
  if (!r.started) DP_THROW_USER("cannot run '{}': {}", cmd, r.output);
  if (r.exit_code != 0)
    DP_THROW_USER("sbatch failed (exit status {}; its message is above); the script is {}", r.exit_code, script_path);
  const std::string& out = r.output;
  // --parsable prints "<job id>" or "<job id>;<cluster>".
  std::string id = out.substr(0, out.find_first_of(";\n"));
  if (id.empty() || id.find_first_not_of("0123456789") != std::string::npos)
    DP_THROW_USER("sbatch printed '{}', not a job id; the script is {}", out, script_path);
  return id;
}

}  // namespace dp::launch
