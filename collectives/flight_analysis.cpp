#include "collectives/flight_analysis.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "base/error.h"
#include "collectives/bootstrap/common.h"
#include "collectives/ring/topology.h"

namespace dp {
namespace {

using nlohmann::json;

// "all-reduce #5123 (bucket 7, step 812)"
std::string describe(const FlightCollective& c, uint64_t seq) {
  static const std::map<std::string, std::string> names = {{"allreduce", "all-reduce"}, {"broadcast", "broadcast"},
                                                           {"allgather", "all-gather"},
                                                           {"reduce_scatter", "reduce-scatter"},
                                                           {"barrier", "barrier"}};
  auto it = names.find(c.op);
  std::string d = fmt::format("{} #{}", it != names.end() ? it->second : (c.op.empty() ? "collective" : c.op), seq);
  std::vector<std::string> tags;
  if (c.bucket >= 0) tags.push_back(fmt::format("bucket {}", c.bucket));
  if (c.step >= 0) tags.push_back(fmt::format("step {}", c.step));
  if (!tags.empty()) d += " (" + (tags.size() == 2 ? tags[0] + ", " + tags[1] : tags[0]) + ")";
  return d;
}

// Names ranks with their hosts (collectives/ring/topology.h's wording).
std::string name_ranks(const std::vector<std::string>& hosts, const std::vector<int>& ranks) {
  if (hosts.empty()) return ring::rank_list(ranks);
  std::vector<int> node;
  std::vector<std::string> uniq;
  for (const auto& h : hosts) {
    auto it = std::find(uniq.begin(), uniq.end(), h);
    node.push_back(static_cast<int>(it - uniq.begin()));
    if (it == uniq.end()) uniq.push_back(h);
  }
  return ring::RingTopology(0, node, hosts).name(ranks);
}

// What the records say about each rank.
struct Known {
  bool file = false, died = false;
  bool unanswered = false;              // someone asked it and got no answer
  bool asked_in_vain = false;           // its own record: it asked others and got no answer
  bool has_position = false, answered_position = false;
  bool failed_in_last = false;          // its own record: the collective it last entered failed
  uint64_t entered = 0, completed = 0;  // the latest answer it gave, else its own record's
};

struct Facts {
  std::vector<Known> k;
  std::vector<std::vector<char>> heard;  // [q][p]: q asked p and got an answer
};

Facts gather(const std::vector<RankFlight>& recs, int n) {
  Facts f;
  f.k.resize(static_cast<size_t>(n));
  f.heard.assign(static_cast<size_t>(n), std::vector<char>(static_cast<size_t>(n), 0));
  for (const RankFlight& rec : recs) {
    Known& me = f.k[static_cast<size_t>(rec.rank)];
    me.file = me.has_position = true;
    me.entered = rec.last_entered, me.completed = rec.last_completed;
    const auto last = rec.collectives.find(rec.last_entered);
    me.failed_in_last = last != rec.collectives.end() && last->second.state == "failed";
  }
  const std::vector<Known> own = f.k;
  for (const RankFlight& rec : recs)
    for (const auto& p : rec.peers) {
      if (p.rank < 0 || p.rank >= n) continue;
      Known& o = f.k[static_cast<size_t>(p.rank)];
      if (p.closed && !o.file) o.died = true;
      if (!p.queried) continue;
      if (p.answered) {
        f.heard[static_cast<size_t>(rec.rank)][static_cast<size_t>(p.rank)] = 1;
        // Its answer (where it was when the others were stuck) over its own record, which it may
        // have written later (a stopped process, continued).
        if (!o.answered_position || p.entered > o.entered) {
          o.answered_position = true;
          o.has_position = true;
          o.entered = p.entered, o.completed = p.completed;
        }
      } else {
        o.unanswered = true;
        f.k[static_cast<size_t>(rec.rank)].asked_in_vain = true;
      }
    }
  // An answer given between two collectives (a slow rank, not a stuck one) says less than its own
  // record of the later collective it then waited in. So does one given after the rank's own
  // timeout in that collective: the control plane counts a failed collective as finished (entered
  // == completed == #s), while its record, written as #s failed, has it waiting in #s (ranks time
  // out at different moments on a loaded machine, and the late ones ask the early ones).
  for (size_t r = 0; r < f.k.size(); ++r) {
    Known& x = f.k[r];
    const Known& o = own[r];
    if (!x.answered_position || !o.file || x.entered != x.completed || o.entered <= o.completed) continue;
    if (o.entered > x.entered || (o.failed_in_last && o.entered == x.entered))
      x.entered = o.entered, x.completed = o.completed;
  }
  return f;
}

// The ranks that can still hear each other: the largest set connected by answered queries
// (ties: the one with the lowest rank); everyone when nobody asked anyone.
std::vector<char> main_group(const Facts& f, int n) {
  bool asked = false;
  for (const auto& row : f.heard) asked |= std::find(row.begin(), row.end(), 1) != row.end();
  if (!asked) return std::vector<char>(static_cast<size_t>(n), 1);
  std::vector<int> comp(static_cast<size_t>(n), -1);
  int best = -1, best_size = 0;
  for (int r = 0, c = 0; r < n; ++r, ++c) {
    if (comp[static_cast<size_t>(r)] >= 0) continue;
    std::vector<int> stack{r};
    comp[static_cast<size_t>(r)] = c;
    int size = 0;
    while (!stack.empty()) {
      const int q = stack.back();
      stack.pop_back();
      ++size;
      for (int p = 0; p < n; ++p)
        if ((f.heard[static_cast<size_t>(q)][static_cast<size_t>(p)] || f.heard[static_cast<size_t>(p)][static_cast<size_t>(q)]) &&
            comp[static_cast<size_t>(p)] < 0) {
          comp[static_cast<size_t>(p)] = c;
          stack.push_back(p);
        }
    }
    if (size > best_size) best = c, best_size = size;
  }
  std::vector<char> in(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) in[static_cast<size_t>(r)] = comp[static_cast<size_t>(r)] == best;
  return in;
}

// The collective #seq as any record describes it.
FlightCollective collective(const std::vector<RankFlight>& recs, uint64_t seq) {
  for (const RankFlight& f : recs)
    if (auto it = f.collectives.find(seq); it != f.collectives.end()) return it->second;
  return {};
}

}  // namespace

RankFlight parse_flight(const std::string& text, const std::string& what) {
  json j;
  try {
    j = json::parse(text);
  } catch (const std::exception& e) {
    DP_THROW_USER("{}: not JSON ({})", what, e.what());
  }
  if (!j.is_object() || j.value("format", "") != "dptrain-flight")
    DP_THROW_USER("{}: not a dptrain flight record (no \"format\": \"dptrain-flight\")", what);
  if (j.value("version", 0) != 1)
    DP_THROW_USER("{}: flight record version {} (this tool reads version 1; use the tools of the dptrain that wrote it)",
                  what, j.value("version", 0));
  try {
    RankFlight f;
    f.rank = j.at("rank").get<int>();
    f.size = j.at("size").get<int>();
    f.host = j.value("host", "");
    f.reason = j.value("reason", "");
    f.hosts = j.value("hosts", std::vector<std::string>{});
    f.in_flight = j.value("in_flight", uint64_t{0});
    f.last_entered = j.value("last_entered", uint64_t{0});
    f.last_completed = j.value("last_completed", uint64_t{0});
    for (const json& c : j.at("collectives")) {
      FlightCollective fc;
      fc.seq = c.at("seq").get<uint64_t>();
      fc.op = c.value("op", "");
      fc.reduce = c.value("reduce", "");
      fc.state = c.value("state", "");
      fc.bucket = c.value("bucket", -1);
      fc.step = c.value("step", int64_t{-1});
      f.collectives[fc.seq] = fc;
    }
    for (const json& p : j.at("peers")) {
      RankFlight::Peer q;
      q.rank = p.at("rank").get<int>();
      q.queried = p.value("queried", false);
      q.answered = p.value("answered", false);
      q.closed = p.value("closed", false);
      q.entered = p.value("entered", uint64_t{0});
      q.completed = p.value("completed", uint64_t{0});
      f.peers.push_back(q);
    }
    if (f.rank < 0 || f.rank >= f.size) DP_THROW_USER("{}: rank {} of a world of {}", what, f.rank, f.size);
    return f;
  } catch (const json::exception& e) {
    DP_THROW_USER("{}: a field is missing or has the wrong type ({})", what, e.what());
  }
}

std::vector<RankFlight> read_flight_dir(const std::string& dir) {
  namespace fs = std::filesystem;
  fs::path where = dir;
  if (fs::is_directory(where / "flight")) where /= "flight";
  if (!fs::is_directory(where))
    DP_THROW_USER("{}: no such directory (give a run directory, runs/<name>, or its flight/ folder)", dir);
  std::vector<RankFlight> out;
  for (const auto& e : fs::directory_iterator(where)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("rank-", 0) != 0 || e.path().extension() != ".json") continue;
    std::ifstream in(e.path());
    std::stringstream ss;
    ss << in.rdbuf();
    out.push_back(parse_flight(ss.str(), e.path().string()));
  }
  if (out.empty())
    DP_THROW_USER("{}: no flight records (rank-<r>.json); a rank writes one on a communication error, a timeout, "
                  "abort, or SIGUSR2",
                  where.string());
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.rank < b.rank; });
  return out;
}

namespace {

// Who is to blame, for what, in which collective (see the header): the dead; else the silent
// (asked by the others, never answering), one verb for all of them; else those behind.
struct Blame {
  std::vector<int> culprits;
  std::string verb;
  uint64_t seq = 0;
  bool lost = false;  // a partition: both sides are waiting
};

Blame blame(const Facts& f, const std::vector<char>& main, int n) {
  auto latest = [&](bool in_main) {
    uint64_t s = 0;
    for (int r = 0; r < n; ++r)
      if (f.k[static_cast<size_t>(r)].has_position && (main[static_cast<size_t>(r)] != 0) == in_main)
        s = std::max(s, f.k[static_cast<size_t>(r)].entered);
    return s;
  };
  std::vector<int> died, silent, behind;
  const uint64_t s_main = latest(true);
  for (int r = 0; r < n; ++r) {
    const Known& x = f.k[static_cast<size_t>(r)];
    if (x.died) died.push_back(r);
    else if (!main[static_cast<size_t>(r)] && x.unanswered) silent.push_back(r);
    else if (x.has_position && x.entered < s_main) behind.push_back(r);
  }
  auto all_of = [&](const std::vector<int>& rs, auto pred) {
    return std::all_of(rs.begin(), rs.end(), [&](int r) { return pred(f.k[static_cast<size_t>(r)]); });
  };
  Blame b;
  b.seq = s_main;
  if (!died.empty()) {
    b.culprits = died, b.verb = "died in", b.seq = std::max(latest(true), latest(false));
  } else if (!silent.empty()) {
    // Silent in a collective others still wait in (a ring may let some ranks finish it and go
    // on), or behind everyone: "never entered" only then.
    b.culprits = silent;
    const uint64_t theirs = latest(false);
    bool others_wait_there = false;
    for (int r = 0; r < n; ++r) {
      const Known& x = f.k[static_cast<size_t>(r)];
      others_wait_there |= main[static_cast<size_t>(r)] && x.has_position && x.entered == theirs && x.completed < theirs;
    }
    if (all_of(silent, [](const Known& x) { return x.file && x.asked_in_vain; }))
      b.verb = "lost contact with all other ranks in", b.seq = theirs, b.lost = true;
    else if (all_of(silent, [&](const Known& x) { return x.has_position && x.entered < s_main; }) && !others_wait_there)
      b.verb = "never entered";
    else
      b.verb = "stopped answering in", b.seq = others_wait_there ? theirs : s_main;
  } else if (!behind.empty()) {
    b.culprits = behind, b.verb = "never entered";
  }
  return b;
}

// Where the others are: waiting in #b.seq, or in other collectives (grouped by collective).
std::string whereabouts(const std::vector<RankFlight>& recs, const Facts& f, const Blame& b, int n,
                        const std::vector<std::string>& hosts) {
  std::map<uint64_t, std::vector<int>> where;
  std::vector<int> unknown;
  for (int r = 0; r < n; ++r) {
    if (std::find(b.culprits.begin(), b.culprits.end(), r) != b.culprits.end()) continue;
    const Known& x = f.k[static_cast<size_t>(r)];
    if (x.has_position && x.entered > x.completed) where[x.entered].push_back(r);
    else unknown.push_back(r);
  }
  if (unknown.empty() && where.size() == 1 && where.begin()->first == b.seq)
    return b.lost ? "all others are waiting in it too" : "all others are waiting in it";
  std::vector<std::string> parts;
  auto are = [](const std::vector<int>& rs) { return rs.size() == 1 ? "is" : "are"; };
  if (auto it = where.find(b.seq); it != where.end())
    parts.push_back(fmt::format("{} {} waiting in it", name_ranks(hosts, it->second), are(it->second)));
  for (const auto& [seq, rs] : where)
    if (seq != b.seq) parts.push_back(fmt::format("{} in {}", name_ranks(hosts, rs), describe(collective(recs, seq), seq)));
  if (!unknown.empty()) parts.push_back(fmt::format("nothing says where {} {}", name_ranks(hosts, unknown), are(unknown)));
  std::string tail;
  for (size_t i = 0; i < parts.size(); ++i) tail += (i ? "; " : "") + parts[i];
  return tail;
}

}  // namespace

std::string diagnose_flight(const std::vector<RankFlight>& recs) {
  if (recs.empty()) return "no flight records";
  const int n = recs[0].size;
  std::vector<std::string> hosts = recs[0].hosts;
  if (static_cast<int>(hosts.size()) != n) hosts.clear();
  const Facts f = gather(recs, n);
  const Blame b = blame(f, main_group(f, n), n);
  const std::string what = describe(collective(recs, b.seq), b.seq);
  if (b.culprits.empty()) {
    for (const RankFlight& rec : recs)
      if (!rec.reason.empty()) return fmt::format("no rank is missing from {}; rank {} recorded: {}", what, rec.rank, rec.reason);
    return fmt::format("no rank is missing from {}", what);
  }
  return fmt::format("{} {} {}; {}", name_ranks(hosts, b.culprits), b.verb, what, whereabouts(recs, f, b, n, hosts));
}

}  // namespace dp
