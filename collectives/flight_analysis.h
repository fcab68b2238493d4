// defines: reading the flight recorder's files back (RankFlight, read_flight_dir) and
// diagnose_flight, which says in one line who is stuck where, as tools/flightrec prints it:
//   "ranks 4-5 on host h3 never entered all-reduce #5123 (bucket 7, step 812); all others are
//    waiting in it"
// The file format is collectives/flight_recorder.h's.
//
// The collective of interest is the latest one any rank entered (#S: nobody completes a
// collective some rank has not entered). Who is to blame, in this order:
//  - ranks whose connections closed without a goodbye and who wrote no record: "died in #S";
//  - ranks that others asked (a timed-out rank asks every peer where it is) and that did not
//    answer: "lost contact with all other ranks in #P" when they asked the others too and got
//    no answer either (a cut link: both sides wrote records; P: where they were); "never entered
//    #S" when what is known of them (their own record, written later, e.g. after SIGCONT) is an
//    earlier collective that nobody else still waits in; else "stopped answering in #P" (P:
//    their collective when others still wait in it, else #S);
//  - ranks known to be in an earlier collective (their record, or their answer): "never
//    entered #S".
// The rest of the line says where the others are ("all others are waiting in it", or which
// ranks are). Without any of these, the line gives the first failure recorded.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace dp {

struct FlightCollective {
  uint64_t seq = 0;
  std::string op, reduce, state;  // "allreduce", "avg", "running"
  int32_t bucket = -1;
  int64_t step = -1;
};

struct RankFlight {
  int rank = -1, size = 0;
  std::string host, reason;
  std::vector<std::string> hosts;
  uint64_t in_flight = 0, last_entered = 0, last_completed = 0;
  std::map<uint64_t, FlightCollective> collectives;
  struct Peer {
    int rank = -1;
    bool queried = false, answered = false, closed = false;
    uint64_t entered = 0, completed = 0;
  };
  std::vector<Peer> peers;
};

// Parses one rank-<r>.json (UserError naming the file and what is wrong, for a file that is not
// a dptrain flight record or has another version).
RankFlight parse_flight(const std::string& json_text, const std::string& what);
// Every <dir>/flight/rank-*.json (or <dir>/rank-*.json when dir is the flight folder itself),
// by rank. UserError when there is none.
std::vector<RankFlight> read_flight_dir(const std::string& dir);

// Pure: the one-line diagnosis.
std::string diagnose_flight(const std::vector<RankFlight>& records);

}  // namespace dp
