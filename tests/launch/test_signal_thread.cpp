// signal_action (launch/signal_thread.h): what the signal thread does with each signal, in each
// state of the program. The thread masks themselves are checked on a real run (test_signals.cpp).
#include <gtest/gtest.h>

#include <csignal>

#include "launch/signal_thread.h"

namespace dp::launch {
namespace {

using A = SignalAction;

TEST(SignalAction, UsrOneIsAlwaysAStopRequestTermAndIntOnlyInTheTrainingLoop) {
  const SignalState start{}, loop{false, true, false};
  EXPECT_EQ(signal_action(SIGUSR1, start), A::RecordStop);  // Slurm's warning during start-up: kept
  EXPECT_EQ(signal_action(SIGTERM, start), A::Terminate);   // before the loop: the default action
  EXPECT_EQ(signal_action(SIGINT, start), A::Terminate);
  EXPECT_EQ(signal_action(SIGUSR1, loop), A::RecordStop);
  EXPECT_EQ(signal_action(SIGTERM, loop), A::RecordStop);
  EXPECT_EQ(signal_action(SIGINT, loop), A::RecordStop);
}

TEST(SignalAction, UsrTwoWritesTheFlightRecordOnlyWhileARecorderListens) {
  EXPECT_EQ(signal_action(SIGUSR2, SignalState{}), A::Ignore);
  EXPECT_EQ(signal_action(SIGUSR2, SignalState{false, true, false}), A::Ignore);
  EXPECT_EQ(signal_action(SIGUSR2, SignalState{false, false, true}), A::FlightByte);
}

TEST(SignalAction, TheLauncherTakesAllFiveAndNothingElseIsTaken) {
  const SignalState launcher{true, false, false};
  for (int sig : {SIGUSR1, SIGTERM, SIGINT, SIGUSR2, SIGCHLD})
    EXPECT_EQ(signal_action(sig, launcher), A::ToLauncher) << sig;
  EXPECT_EQ(signal_action(SIGCHLD, SignalState{false, true, true}), A::Ignore);  // a worker's: waitpid reaps
  for (int sig : {SIGHUP, SIGPIPE}) {
    EXPECT_EQ(signal_action(sig, launcher), A::Ignore) << sig;
    EXPECT_EQ(signal_action(sig, SignalState{false, true, true}), A::Ignore) << sig;
  }
}

}  // namespace
}  // namespace dp::launch
