// defines: run_world (fork N processes inside a test, each runs a function and reports through
// its exit code and a text), check_bootstrap_world (the allgather/broadcast/barrier checks every
// bootstrap passes), map_env (an EnvLookup over a map), free_port.
#pragma once
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "collectives/bootstrap/factory.h"
#include "collectives/bootstrap/env.h"
#include "collectives/bootstrap/single.h"

namespace dp::testing_mp {

struct ChildResult {
  int status = -1;      // exit code; 128+signal when killed; -1 when the watchdog killed it
  std::string message;  // what the child reported (or the exception it died of)
};

// Forks n processes; process r runs fn(r, report) and exits with its return value (99 and the
// exception's text in `report` when it throws). Every child is killed after watchdog_s: a hang
// fails the test instead of stalling it.
inline std::vector<ChildResult> run_world(int n, const std::function<int(int rank, std::string& report)>& fn,
                                          double watchdog_s = 30) {
  std::vector<pid_t> pids(static_cast<size_t>(n));
  std::vector<int> fds(static_cast<size_t>(n));
  std::fflush(stdout);
  std::fflush(stderr);
  for (int r = 0; r < n; ++r) {
    int p[2];
    if (::pipe2(p, O_CLOEXEC) != 0) std::abort();
    pid_t pid = ::fork();
    if (pid == 0) {
      ::close(p[0]);
      std::string report;
      int code;
      try {
        code = fn(r, report);
      } catch (const std::exception& e) {
        report = e.what();
        code = 99;
      }
      size_t off = 0;
      while (off < report.size()) {
        ssize_t w = ::write(p[1], report.data() + off, report.size() - off);
        if (w <= 0) break;
        off += static_cast<size_t>(w);
      }
      ::_exit(code);
    }
    ::close(p[1]);
    pids[static_cast<size_t>(r)] = pid;
    fds[static_cast<size_t>(r)] = p[0];
  }
  std::vector<ChildResult> res(static_cast<size_t>(n));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(watchdog_s);
  int open = n;
  std::vector<bool> done(static_cast<size_t>(n), false);
  while (open > 0 && std::chrono::steady_clock::now() < deadline) {
    std::vector<pollfd> pfds;
    std::vector<int> who;
    for (int r = 0; r < n; ++r)
      if (!done[static_cast<size_t>(r)]) {
        pfds.push_back({fds[static_cast<size_t>(r)], POLLIN, 0});
        who.push_back(r);
      }
    ::poll(pfds.data(), pfds.size(), 100);
    for (size_t i = 0; i < pfds.size(); ++i) {
      if (!pfds[i].revents) continue;
      char buf[4096];
      ssize_t k = ::read(pfds[i].fd, buf, sizeof buf);
      if (k > 0) res[static_cast<size_t>(who[i])].message.append(buf, static_cast<size_t>(k));
      else {
        done[static_cast<size_t>(who[i])] = true;
        --open;
      }
    }
  }
  for (int r = 0; r < n; ++r) {
    ::close(fds[static_cast<size_t>(r)]);
    const pid_t pid = pids[static_cast<size_t>(r)];
    int st = 0;
    pid_t w = 0;
    while ((w = ::waitpid(pid, &st, WNOHANG)) == 0 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    if (w == 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &st, 0);
      res[static_cast<size_t>(r)].status = -1;
      res[static_cast<size_t>(r)].message += " [killed by the test's watchdog]";
    } else {
      res[static_cast<size_t>(r)].status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    }
  }
  return res;
}

// A map as the environment.
inline EnvLookup map_env(std::map<std::string, std::string> m) {
  auto shared = std::make_shared<std::map<std::string, std::string>>(std::move(m));
  return [shared](const std::string& name) -> const char* {
    auto it = shared->find(name);
    return it == shared->end() ? nullptr : it->second.c_str();
  };
}

// A TCP port that was free on 127.0.0.1 a moment ago.
inline int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

// Rank r's blob of round k: `size` bytes of a pattern no other (rank, round) shares.
inline std::string blob(int r, int k, size_t size) {
  std::string s(size, '\0');
  for (size_t i = 0; i < size; ++i) s[i] = static_cast<char>((r * 131 + k * 17 + i * 7 + i / 251) & 0xff);
  return s;
}

// The checks every bootstrap passes in a world of n; 0 and "ok ..." on success, else a code and
// what went wrong. Rounds: empty, 1 byte, 1000 bytes, 1 MiB, a size that differs per rank (some
// ranks empty); then a broadcast from every root and a barrier that rank 0 enters 200 ms late.
inline int check_bootstrap_world(Bootstrap& b, int n, int rank, std::string& report) {
  if (b.rank() != rank || b.size() != n) {
    report = fmt::format("identity: rank {} size {}, expected {} {}", b.rank(), b.size(), rank, n);
    return 2;
  }
  const std::vector<std::function<size_t(int)>> sizes = {
      [](int) { return size_t{0}; }, [](int) { return size_t{1}; }, [](int) { return size_t{1000}; },
      [](int) { return size_t{1} << 20; }, [](int r) { return size_t(r % 3) * 37; }};
  for (size_t k = 0; k < sizes.size(); ++k) {
    const auto all = b.allgather(blob(rank, static_cast<int>(k), sizes[k](rank)));
    if (all.size() != static_cast<size_t>(n)) {
      report = fmt::format("round {}: {} blobs", k, all.size());
      return 3;
    }
    for (int q = 0; q < n; ++q)
      if (all[static_cast<size_t>(q)] != blob(q, static_cast<int>(k), sizes[k](q))) {
        report = fmt::format("round {}: rank {}'s blob differs ({} bytes)", k, q, all[static_cast<size_t>(q)].size());
        return 4;
      }
  }
  for (int root = 0; root < n; ++root) {
    const std::string got = b.broadcast(rank == root ? blob(root, 100, 5000) : std::string("ignored"), root);
    if (got != blob(root, 100, 5000)) {
      report = fmt::format("broadcast from {}: {} bytes differ", root, got.size());
      return 5;
    }
  }
  if (rank == 0) std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const auto t0 = std::chrono::steady_clock::now();
  b.barrier();
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (rank != 0 && waited < 0.1) {
    report = fmt::format("left the barrier after {:.3f} s although rank 0 entered it 0.2 s late", waited);
    return 6;
  }
  report = fmt::format("ok rank={} size={} local={}/{} node={}", b.rank(), b.size(), b.local_rank(), b.local_size(),
                       b.node_id());
  return 0;
}

}  // namespace dp::testing_mp
