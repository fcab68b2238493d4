// defines: helpers the launch tests share to set up a run and read what it left behind: temp_root
// (a fresh scratch folder), checkpoint_of_step (a run's checkpoint path), run_process (a child
// with its output in a log), read_file, tensors_of (every tensor's raw bytes, by name), differing
// (names whose bytes differ), max_abs_diff (largest |a - b| over two weight files' f32 tensors).
// Header-only; GoogleTest for the checks.
#pragma once
#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "runtime/checkpoint/safetensors.h"
#include "tests/bytes.h"

extern char** environ;

namespace dp::testutil {

// A fresh scratch folder <tmp>/dptrain_<prefix>_<tag>_<pid> (removed first if an earlier run left it).
inline std::string temp_root(const std::string& prefix, const std::string& tag) {
  const auto p = std::filesystem::temp_directory_path() /
                 ("dptrain_" + prefix + "_" + tag + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(p);
  return p.string();
}

// The checkpoint of `step` of the run named "r" under the run folder `root`.
inline std::string checkpoint_of_step(const std::string& root, int64_t step) {
  return fmt::format("{}/r/checkpoints/step-{:08}.safetensors", root, step);
}

// Runs `argv` (argv[0] a path) with `env` before the inherited environment, stdout and stderr
// appended to `log`; returns the wait status.
inline int run_process(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                       const std::string& log) {
  std::vector<char*> args, envp;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<std::string> env_all = env;
  for (char** e = environ; *e; ++e) env_all.emplace_back(*e);
  for (auto& e : env_all) envp.push_back(e.data());
  envp.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) ::dup2(fd, 1), ::dup2(fd, 2);
    ::execve(args[0], args.data(), envp.data());
    ::_exit(127);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return status;
}

inline std::string read_file(const std::string& path) { return test::file_bytes(path); }

// name -> raw bytes of every tensor in a safetensors file.
inline std::map<std::string, std::string> tensors_of(const std::string& path) {
  SafetensorsFile f = SafetensorsFile::open(path);
  std::map<std::string, std::string> out;
  for (const auto& n : f.names()) {
    Tensor t = f.get(n);
    out[n] = std::string(static_cast<const char*>(t.raw()), t.nbytes());
  }
  return out;
}

// Names of tensors whose bytes differ (or that only one side has).
inline std::vector<std::string> differing(const std::map<std::string, std::string>& a,
                                          const std::map<std::string, std::string>& b) {
  std::vector<std::string> out;
  for (const auto& [n, v] : a)
    if (!b.count(n) || b.at(n) != v) out.push_back(n);
  for (const auto& [n, v] : b)
    if (!a.count(n)) out.push_back(n);
  return out;
}

// Largest |a - b| over the f32 tensors of two files (names and shapes must agree: checked).
inline double max_abs_diff(const std::string& a, const std::string& b) {
  SafetensorsFile fa = SafetensorsFile::open(a), fb = SafetensorsFile::open(b);
  EXPECT_EQ(fa.names(), fb.names());
  double worst = 0;
  for (const auto& name : fa.names()) {
    Tensor x = fa.get(name), y = fb.get(name);
    EXPECT_EQ(x.shape(), y.shape()) << name;
    if (x.dtype() != DType::F32 || x.shape() != y.shape()) continue;
    for (int64_t i = 0; i < x.numel(); ++i)
      worst = std::max(worst, std::abs(static_cast<double>(x.data<float>()[i]) - y.data<float>()[i]));
  }
  return worst;
}

}  // namespace dp::testutil
