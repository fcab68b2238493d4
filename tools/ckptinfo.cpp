// ckptinfo: a checkpoint's metadata and tensor table, with every tensor's CRC-32C checked.
//
//   ckptinfo FILE            a .safetensors file (a checkpoint, a replica, final.safetensors)
//   ckptinfo DIR             the file DIR/latest names (DIR = a run's checkpoints/ folder, or
//                            the run directory itself)
//   ckptinfo --config FILE   also print the resolved config stored in the checkpoint
//
// The metadata's `epoch` is stored 0-based (runtime/checkpoint/checkpoint.h); ckptinfo shows it
// with the 1-based number every log line uses.
//
// Exit status: 0 when every stored CRC matches (or the file stores none), 1 when a tensor
// fails its check, 2 on a usage or file error (the message says which).
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "runtime/checkpoint/checkpoint.h"
#include "base/error.h"

namespace {

namespace fs = std::filesystem;

int usage(const char* msg) {
  std::fprintf(stderr, "ckptinfo: error: %s\nusage: ckptinfo [--config] FILE|DIR\n", msg);
  return 2;
}

// FILE as is; DIR through its `latest` (or DIR/checkpoints/latest).
std::string resolve(const std::string& arg) {
  if (!fs::is_directory(arg)) return arg;
  for (const std::string& dir : {arg, arg + "/checkpoints"}) {
    std::ifstream in(dir + "/latest");
    std::string name;
    if (in && std::getline(in, name) && !name.empty()) return dir + "/" + name;
  }
  DP_THROW_USER("'{}' is a directory without a 'latest' file (nor checkpoints/latest); give a .safetensors file", arg);
}

int run(const std::string& arg, bool print_config) {
  const std::string path = resolve(arg);
  dp::SafetensorsFile f = dp::SafetensorsFile::open(path);
  const auto& md = f.metadata();
  std::printf("file: %s\n", path.c_str());
  auto fmt_it = md.find("format");
  if (fmt_it != md.end() && fmt_it->second == dp::kCheckpointFormat && md.count("format_version") &&
      md.at("format_version") != std::to_string(dp::kCheckpointVersion))
    std::printf("note: format_version %s; this ckptinfo knows version %d\n", md.at("format_version").c_str(),
                dp::kCheckpointVersion);
  std::printf("metadata:\n");
  for (const auto& [k, v] : md) {
    if (k == "config") {
      size_t lines = 0;
      for (char c : v) lines += c == '\n';
      std::printf("  config: %zu lines%s\n", lines, print_config ? " (below)" : " (--config prints them)");
    } else if (k == "epoch" && v.find_first_not_of("0123456789") == std::string::npos && !v.empty()) {
      // Stored 0-based (the epoch's index); people and the log count from 1.
      std::printf("  epoch: %s (stored 0-based: epoch %lld in the log)\n", v.c_str(), std::stoll(v) + 1);
    } else if (k == "crc32c") {
      std::printf("  crc32c: one per tensor (checked below)\n");
    } else {
      std::printf("  %s: %s\n", k.c_str(), v.c_str());
    }
  }

  const auto crcs = dp::check_crcs(f);  // reads every tensor
  const bool have_crcs = md.count("crc32c") != 0;
  size_t width = 4, total = 0;
  for (const auto& c : crcs) width = std::max(width, c.name.size());
  std::printf("tensors: %zu\n", crcs.size());
  std::printf("  %-*s  %-5s %-20s %-8s  %s\n", static_cast<int>(width), "name", "dtype", "shape", "crc32c", "check");
  int bad = 0;
  for (const auto& c : crcs) {
    const auto& info = f.info(c.name);
    total += info.end - info.begin;
    std::string check = "-";
    if (have_crcs) {
      if (!c.stored) check = "NO CRC STORED", ++bad;
      else if (!c.ok()) check = "BAD (stored " + dp::crc_hex(c.expected) + ")", ++bad;
      else check = "ok";
    }
    std::printf("  %-*s  %-5s %-20s %s  %s\n", static_cast<int>(width), c.name.c_str(),
                dp::safetensors_dtype_name(info.dtype), dp::shape_str(info.shape).c_str(),
                dp::crc_hex(c.actual).c_str(), check.c_str());
  }
  std::printf("data: %zu bytes\n", total);
  if (auto it = md.find(dp::kMetadataCrcKey); it != md.end()) {
    const std::string got = dp::crc_hex(dp::metadata_crc(md));
    if (got == it->second) {
      std::printf("check: the metadata matches its CRC-32C\n");
    } else {
      std::printf("check: the metadata FAILS its CRC-32C (stored %s, computed %s): edited or damaged\n",
                  it->second.c_str(), got.c_str());
      ++bad;
    }
  }
  if (!have_crcs) std::printf("check: no CRCs stored in this file (not a dptrain checkpoint)\n");
  else if (bad == 0) std::printf("check: all %zu tensors match their CRC-32C\n", crcs.size());
  else std::printf("check: %d of %zu tensors FAIL their CRC-32C: the file is corrupt\n", bad, crcs.size());
  if (print_config && md.count("config")) std::printf("config:\n%s", md.at("config").c_str());
  return bad == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  bool print_config = false;
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--config") print_config = true;
    else if (a == "-h" || a == "--help") {
      std::printf("usage: ckptinfo [--config] FILE|DIR\n"
                  "  a checkpoint's metadata and tensor table (name, dtype, shape, CRC-32C, check);\n"
                  "  DIR: the checkpoint its 'latest' file names. Exit 0 if all CRCs (tensors, metadata) match, 1 if not, 2 on errors.\n");
      return 0;
    } else if (a.rfind("--", 0) == 0) {
      return usage(("unknown option '" + a + "'").c_str());
    } else {
      args.push_back(a);
    }
  }
  if (args.size() != 1) return usage("give exactly one checkpoint file or directory");
  try {
    return run(args[0], print_config);
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "ckptinfo: error: %s\n", e.what());
    return 2;
  }
}
