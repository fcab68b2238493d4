// The local launcher's restart decisions (launch/restart_policy.h), the fault's rank selector
// and launch count (launch/fault_kill.h) and the restart's record (launch/restart_record.h), as
// pure functions: no process, no file.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <csignal>
#include <map>

#include "launch/fault_kill.h"
#include "launch/restart_policy.h"
#include "launch/restart_record.h"

namespace dp::launch {
namespace {

WorkerExit exited(int rank, int code) { return {rank, code, 0}; }
WorkerExit killed(int rank, int sig) { return {rank, 128 + sig, sig}; }

TEST(RestartPolicy, WorkerExitOfAWaitStatus) {
  const WorkerExit k = worker_exit_of(1, SIGKILL);  // a raw status: killed by signal 9
  EXPECT_EQ(k.rank, 1);
  EXPECT_EQ(k.status, 137);
  EXPECT_EQ(k.signal, 9);
  const WorkerExit e = worker_exit_of(0, 2 << 8);  // exited with status 2
  EXPECT_EQ(e.status, 2);
  EXPECT_EQ(e.signal, 0);
}

TEST(RestartPolicy, DescribesExitsAndNamesSignals) {
  EXPECT_EQ(describe_exit(killed(1, SIGKILL)), "was killed by signal 9 (SIGKILL)");
  EXPECT_EQ(describe_exit(killed(0, SIGSEGV)), "was killed by signal 11 (SIGSEGV)");
  EXPECT_EQ(describe_exit(exited(0, 3)), "exited with status 3");
  EXPECT_EQ(signal_name(SIGTERM), "SIGTERM");
}

TEST(RestartPolicy, TheCauseIsTheWorkerThatDidNotJustLoseAPeer) {
  // Rank 0 reports the lost peer (status 3) in the same moment rank 1 dies: rank 1 is the cause.
  EXPECT_EQ(failure_cause({exited(0, 3), killed(1, SIGKILL)}).rank, 1);
  EXPECT_EQ(failure_cause({exited(0, 3), exited(2, 3)}).rank, 0);
  EXPECT_EQ(failure_cause({exited(0, 1), exited(1, 2)}).rank, 0);
}

TEST(RestartPolicy, CfgAndInputErrorsAndUnexecutableWorkersAreNotRetried) {
  EXPECT_FALSE(worth_retrying(exited(0, 2)));
  EXPECT_FALSE(worth_retrying(exited(0, 127)));
  for (int code : {1, 3, 4, 5, 7, 255}) EXPECT_TRUE(worth_retrying(exited(0, code))) << code;
  for (int sig : {SIGKILL, SIGSEGV, SIGABRT, SIGBUS}) EXPECT_TRUE(worth_retrying(killed(0, sig))) << sig;
  // Status 130 from a worker that exited by itself is a status, not a signal: retried.
  EXPECT_TRUE(worth_retrying(exited(0, 130)));
}

TEST(RestartPolicy, VerdictTable) {
  const WorkerExit k = killed(1, SIGKILL), bad = exited(1, 2);
  EXPECT_EQ(restart_verdict(k, 0, 0, false), RestartVerdict::Exhausted);  // --max-restarts 0: today's failure
  EXPECT_EQ(restart_verdict(k, 0, 1, false), RestartVerdict::Restart);
  EXPECT_EQ(restart_verdict(k, 1, 1, false), RestartVerdict::Exhausted);
  EXPECT_EQ(restart_verdict(k, 1, 3, false), RestartVerdict::Restart);
  EXPECT_EQ(restart_verdict(bad, 0, 3, false), RestartVerdict::NotRetriable);
  EXPECT_EQ(restart_verdict(k, 0, 3, true), RestartVerdict::StopRequested);
}

TEST(RestartPolicy, RestartArgsDropResetAndResume) {
  EXPECT_EQ(restart_args({"m.cfg", "--reset", "--set", "train.steps=3"}),
            (std::vector<std::string>{"m.cfg", "--set", "train.steps=3", "--set", "checkpoint.resume=true"}));
}

Tunables tunables_of(const std::map<std::string, std::string>& env) {
  return read_tunables([&](const char* name) -> const char* {
    const auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

TEST(FaultKill, RankSelectorAndLaunchCount) {
  EXPECT_EQ(fault_kill_step(tunables_of({}), 0), -1);
  // Without a rank selector every rank dies, in the first launch only.
  const Tunables every = tunables_of({{"DPTRAIN_FAULT_KILL_AFTER_STEP", "20"}});
  EXPECT_EQ(fault_kill_step(every, 0), 20);
  EXPECT_EQ(fault_kill_step(every, 3), 20);
  const Tunables rank1 = tunables_of({{"DPTRAIN_FAULT_KILL_AFTER_STEP", "20"}, {"DPTRAIN_FAULT_KILL_RANK", "1"}});
  EXPECT_EQ(fault_kill_step(rank1, 0), -1);
  EXPECT_EQ(fault_kill_step(rank1, 1), 20);
  // The restarted job gets past it ...
  const Tunables restarted = tunables_of(
      {{"DPTRAIN_FAULT_KILL_AFTER_STEP", "20"}, {"DPTRAIN_FAULT_KILL_RANK", "1"}, {"DPTRAIN_RESTART_COUNT", "1"}});
  EXPECT_EQ(fault_kill_step(restarted, 1), -1);
  // ... unless the fault is asked for in more launches.
  const Tunables thrice = tunables_of({{"DPTRAIN_FAULT_KILL_AFTER_STEP", "5"},
                                       {"DPTRAIN_RESTART_COUNT", "2"},
                                       {"DPTRAIN_FAULT_KILL_LAUNCHES", "3"}});
  EXPECT_EQ(fault_kill_step(thrice, 0), 5);
  const Tunables fourth = tunables_of({{"DPTRAIN_FAULT_KILL_AFTER_STEP", "5"},
                                       {"DPTRAIN_RESTART_COUNT", "3"},
                                       {"DPTRAIN_FAULT_KILL_LAUNCHES", "3"}});
  EXPECT_EQ(fault_kill_step(fourth, 0), -1);
}

FlightCollective coll(uint64_t seq, int64_t step, int32_t bucket, const char* state) {
  FlightCollective c;
  c.seq = seq, c.op = "allreduce", c.step = step, c.bucket = bucket, c.state = state;
  return c;
}

TEST(RestartRecord, LastStepDoneIsTheNewestStepWhoseGradientsWereReducedOnSomeRank) {
  RankFlight r0;
  r0.rank = 0;
  // Step 20: two buckets done, then the stop agreement (no bucket) failed: step 20's update ran.
  // Step 19 done. Nothing of step 21.
  for (auto c : {coll(1, 19, 0, "done"), coll(2, 19, 1, "done"), coll(3, 19, -1, "done"), coll(4, 20, 0, "done"),
                 coll(5, 20, 1, "done"), coll(6, 20, -1, "failed")})
    r0.collectives[c.seq] = c;
  // Rank 2 failed in step 21's second bucket: step 21 is not done.
  RankFlight r2;
  r2.rank = 2;
  for (auto c : {coll(7, 21, 0, "done"), coll(8, 21, 1, "failed")}) r2.collectives[c.seq] = c;
  EXPECT_EQ(last_step_done({r0, r2}), 20);
  EXPECT_EQ(last_step_done({r2}), -1);
  EXPECT_EQ(last_step_done({}), -1);
}

TEST(RestartRecord, MetricsLineAndDetails) {
  const RestartEvent e{.restart = 1, .max_restarts = 2, .failure = killed(1, SIGKILL), .host = "h1"};
  const RestartFacts f{.resume_step = 16, .last_step = 20, .verdict = "rank 1 on host h1 died in all-reduce #9"};
  EXPECT_EQ(restart_metrics_line(e, f, 1.5).dump(),
            R"J({"cause":"was killed by signal 9 (SIGKILL)","exit_status":137,"host":"h1","last_step":20,)J"
            R"J("max_restarts":2,"rank":1,"restart":1,"resume_step":16,"signal":9,"signal_name":"SIGKILL",)J"
            R"J("split":"restart","steps_lost":4,"unix_time":1.5,"watchdog":"rank 1 on host h1 died in all-reduce #9"})J");
  EXPECT_EQ(restart_details(f), "the watchdog: rank 1 on host h1 died in all-reduce #9; resuming from step 16 (4 "
                                "steps lost)");
  const RestartEvent x{.restart = 2, .max_restarts = 2, .failure = exited(0, 1), .host = "h1"};
  const RestartFacts unknown{};
  EXPECT_EQ(restart_metrics_line(x, unknown, 2).dump(),
            R"J({"cause":"exited with status 1","exit_code":1,"exit_status":1,"host":"h1","last_step":null,)J"
            R"J("max_restarts":2,"rank":0,"restart":2,"resume_step":0,"signal":0,"split":"restart","steps_lost":null,)J"
            R"J("unix_time":2.0,"watchdog":null})J");
  EXPECT_EQ(restart_details(unknown), "no checkpoint yet: starting over from step 0");
}

TEST(RestartRecord, RestartEventsForFlightrec) {
  const std::string metrics =
      R"J({"split":"train","step":4,"loss":1.5})J"
      "\n"
      R"J({"cause":"was killed by signal 9 (SIGKILL)","host":"h1","max_restarts":2,"rank":1,"restart":1,)J"
      R"J("resume_step":16,"split":"restart","steps_lost":4,"watchdog":"rank 1 died in all-reduce #96 (step 20)"})J"
      "\n"
      R"J({"cause":"exited with status 1","host":"h1","max_restarts":2,"rank":0,"restart":2,"resume_step":24,)J"
      R"J("split":"restart","steps_lost":null,"watchdog":null})J"
      "\nnot json\n";
  EXPECT_EQ(restart_events(metrics),
            (std::vector<std::string>{"restart 1 of 2: rank 1 on h1 was killed by signal 9 (SIGKILL); resumed from step "
                                      "16 (4 steps lost); the watchdog: rank 1 died in all-reduce #96 (step 20)",
                                      "restart 2 of 2: rank 0 on h1 exited with status 1; resumed from step 24"}));
}

}  // namespace
}  // namespace dp::launch
