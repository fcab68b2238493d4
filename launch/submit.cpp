#include "launch/submit.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>
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

// --min-nodes: at most --nodes, and only with --max-restarts (a smaller world is a restart).
void check_min_nodes(const SlurmOptions& s) {
  if (s.min_nodes == 0) return;
  if (s.min_nodes < 1 || s.min_nodes > s.nodes)
    DP_THROW_USER("--min-nodes {} with --nodes {}: give 1 to {} (the fewest nodes the job may go on with)",
                  s.min_nodes, s.nodes, s.nodes);
  if (s.max_restarts < 1)
    DP_THROW_USER("--min-nodes {}: the job goes on with fewer nodes by restarting its srun step; give --max-restarts "
                  "K too (K >= 1: how many restarts it may make)",
                  s.min_nodes);
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

// The srun step; `extra` ("" or " $resume") ends dptrain's arguments; `placement` ("" or the
// elastic loop's -N/-n/--nodelist) follows `srun`.
std::string srun_line(const SbatchJob& job, const std::string& extra, const std::string& placement = "") {
  const SlurmOptions& s = job.slurm;
  // srun does not inherit --cpus-per-task from the allocation (Slurm >= 22.05): pass it on.
  std::string o = "srun" + placement + " --mpi=pmix --kill-on-bad-exit=1 --open-mode=append";
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

// --min-nodes: the shell functions of the elastic loop. up_nodes: the job's nodes Slurm counts as
// up and responding (sinfo's states alloc, mix, idle, comp; no '*'), one a line, in the job's
// order. answering L: the nodes of L whose slurmd starts a task within 60 s (a probe step), in L's
// order: Slurm notices a dead node only after SlurmdTimeout, and srun may end the failed step
// before that (status 143 after its own wait), so after a failure the loop asks the nodes
// themselves. not_in A B: the words of A that are not in B.
std::string elastic_functions() {
  return R"SH(up_nodes() {
  local n list states
  list=$(squeue -h -j "$SLURM_JOB_ID" -o %N)
  states=$(sinfo -h -N -n "$list" -o '%N %t')
  for n in $(scontrol show hostnames "$list"); do
    grep -Eq "^$n (alloc|mix|idle|comp)\$" <<<"$states" && echo "$n"
  done
}
answering() {
  local n got
  got=$(timeout 60 srun --overlap --mpi=none -N $(echo $1 | wc -w) -n $(echo $1 | wc -w) \
    --nodelist=$(echo $1 | tr ' ' ,) -t 1 printenv SLURMD_NODENAME)
  for n in $1; do [[ " "$(echo $got)" " == *" $n "* ]] && echo "$n"; done
}
not_in() {
  local w
  for w in $1; do [[ " "$(echo $2)" " == *" $w "* ]] || echo "$w"; done
}
)SH";
}

// The first rank on the first lost node (block distribution: T tasks per node in node order),
// then the lines of one restart: its record in metrics.jsonl and the script's line.
std::string elastic_restart(const SbatchJob& job, int tasks) {
  const int k = job.slurm.max_restarts;
  return fmt::format(
      "rank=-1; i=0\n"
      "for w in $step_nodes; do [ \"$w\" = \"${{lost%% *}}\" ] && rank=$((i * {1})); i=$((i + 1)); done\n"
      "if [ -n \"$lost\" ]; then cause=\"host(s) $(echo $lost) left the job (Slurm: node down or not responding)\"\n"
      "else cause=\"the srun step exited with status $status\"; fi\n"
      "details=$({2} record-restart --run {3} --restart $restarts --max-restarts {0} --status $status \\\n"
      "  --rank $rank --host \"$(echo $lost)\" --nodes $(echo $up | wc -w) --cause \"$cause\")\n"
      "echo \"dptrain submit: $cause; restart $restarts of {0} on $(echo $up | wc -w) node(s): $details\"\n",
      k, tasks, shell_quote(job.dptrain), shell_quote(job.run_path));
}

// --min-nodes M: too_few prints why the job stops (and succeeds) when fewer than M nodes are up.
std::string too_few_function(const SbatchJob& job) {
  return fmt::format(
      "too_few() {{\n"
      "  [ $(echo $up | wc -w) -ge {0} ] && return 1\n"
      "  echo \"dptrain submit: job $SLURM_JOB_ID has $(echo $up | wc -w) node(s) up ($(echo $up)); missing: \\\n"
      "$(echo $(not_in \"$(scontrol show hostnames \"$SLURM_JOB_NODELIST\")\" \"$up\")) (down or not responding); \\\n"
      "--min-nodes {0} needs {0}: not restarting. Resubmit once they are back (sbatch {1}/submit.sbatch), or with \\\n"
      "a smaller --min-nodes to go on without them\"\n"
      "}}\n",
      job.slurm.min_nodes, job.run_path);
}

// --min-nodes M with --max-restarts K: each step on the nodes still up (see sbatch_script).
// --overlap: the step that ran on a failed node never completes (its node never reports back:
// Slurm 22.05 keeps it "ending" and its CPUs on the other nodes taken), so the next step shares
// them; without it srun waits ("Requested nodes are busy") until the job ends.
std::string elastic_srun(const SbatchJob& job, int tasks) {
  const int k = job.slurm.max_restarts, m = job.slurm.min_nodes;
  std::string o = fmt::format(
      "# --min-nodes {1} --max-restarts {0}: each srun step runs on the job's nodes still up (--no-kill: a\n"
      "# failed node leaves the job, the job goes on); a failed step (any status but 2, a cfg or input error,\n"
      "# and 130 or 143 without a lost node) runs again, up to {0} times, from the newest checkpoint, on fewer\n"
      "# nodes when one was lost (the checkpoint is remapped: train.elastic_batch); below {1} nodes it stops.\n",
      k, m);
  o += elastic_functions() + too_few_function(job);
  o += "restarts=0\nresume=\nup=$(up_nodes)\nif too_few; then exit 1; fi\nwhile true; do\n"
       "export DPTRAIN_RESTART_COUNT=$restarts\n";
  o += srun_line(job, " $resume",
                 fmt::format(" -N $(echo $up | wc -w) -n $(($(echo $up | wc -w) * {})) --nodelist=$(echo $up | tr ' ' ,) "
                             "--overlap",
                             tasks));
  o += fmt::format(
      "status=$?\n"
      "if [ $status -eq 0 ]; then exit 0; fi\n"
      "step_nodes=$up\nup=$(answering \"$(up_nodes)\")\nlost=$(not_in \"$step_nodes\" \"$up\")\n"
      "if [ $status -eq 2 ] || {{ [ -z \"$lost\" ] && {{ [ $status -eq 130 ] || [ $status -eq 143 ]; }}; }}; then\n"
      "  echo \"dptrain submit: the srun step exited with status $status: not restarting\"; exit $status\n"
      "fi\n"
      "if too_few; then exit $status; fi\n"
      "if [ $restarts -ge {0} ]; then\n"
      "  echo \"dptrain submit: the srun step exited with status $status after $restarts restart(s) "
      "(--max-restarts {0}): giving up\"; exit $status\n"
      "fi\n"
      "restarts=$((restarts + 1))\n"
      "resume=\"--set checkpoint.resume=true\"\n",
      k);
  return o + elastic_restart(job, tasks) + "done\n";
}

}  // namespace

std::string sbatch_script(const SbatchJob& job) {
  const SlurmOptions& s = job.slurm;
  if (s.nodes < 1) DP_THROW_USER("--nodes {}: need at least 1", s.nodes);
  if (s.gpus_per_node < 0) DP_THROW_USER("--gpus-per-node {}: need 0 (CPU nodes) or more", s.gpus_per_node);
  const int tasks = tasks_per_node(s);
  check_min_nodes(s);
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
  // --min-nodes: all N nodes, and --no-kill. Not --nodes=M-N: with --ntasks-per-node, Slurm (22.05,
  // seen on the test fixture) allocates M nodes even when N are idle; M is the loop's floor.
  o += fmt::format("#SBATCH --nodes={}\n", s.nodes);
  if (s.min_nodes > 0) o += "#SBATCH --no-kill\n";
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
  if (s.min_nodes > 0) o += elastic_srun(job, tasks);
  else o += s.max_restarts > 0 ? retried_srun(job) : srun_line(job, "");
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
  if (r.signal != 0)
    DP_THROW_USER("sbatch was killed by signal {} ({}) before it answered; check `squeue --me` for the job, then "
                  "submit again if it is not there; the script is {}",
                  r.signal, strsignal(r.signal), script_path);
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
