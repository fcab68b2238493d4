// diffckpt: compares the tensors of two checkpoints (or every replica in a folder).
//
//   diffckpt A B [--atol X] [--rtol Y]      two .safetensors files
//   diffckpt --all DIR [--atol X] [--rtol Y] every DIR/replica-rank<r>.safetensors against rank 0
//
// Element a of A and b of B are equal when their bytes are equal (so NaN == NaN with the same
// payload) or |a - b| <= atol + rtol * max(|a|, |b|) (symmetric, unlike numpy.isclose, so the
// order of A and B does not matter). Defaults: atol = rtol = 0, i.e. bitwise.
//
// Output, one line per finding, then a summary line:
//   differ: NAME DTYPE[SHAPE]: K of N elements, max abs E, max rel R
//   close: NAME DTYPE[SHAPE]: K of N elements not identical, max abs E, max rel R (within tolerance)
//   mismatch: NAME: F32[2, 3] in A, F32[3, 3] in B
//   only in A: NAME        only in B: NAME
//   note: metadata differs: KEY, KEY                  (informational; does not change the status)
//   identical: N tensors  |  within tolerance: N tensors  |  different: ...
// max rel = max |a - b| / max(|a|, |b|) over the elements (0 where both are 0).
//
// Exit status: 0 identical or within tolerance, 1 different (a differing, mismatching or
// one-sided tensor), 2 on a usage or file error.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include "base/error.h"
#include "runtime/checkpoint/safetensors.h"
#include "runtime/suggest.h"

namespace {

namespace fs = std::filesystem;

struct Tolerance {
  double atol = 0, rtol = 0;
};

double half_to_double(uint16_t h) {
  const int sign = h >> 15, exp = (h >> 10) & 0x1F, man = h & 0x3FF;
  double v;
  if (exp == 0) v = std::ldexp(man, -24);
  else if (exp == 31) v = man ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  else v = std::ldexp(man + 1024, exp - 25);
  return sign ? -v : v;
}

double bf16_to_double(uint16_t b) { return std::bit_cast<float>(static_cast<uint32_t>(b) << 16); }

// Element i of a CPU tensor as a double.
double element(const dp::Tensor& t, int64_t i) {
  const char* p = static_cast<const char*>(t.raw());
  switch (t.dtype()) {
    case dp::DType::F32: { float v; std::memcpy(&v, p + 4 * i, 4); return v; }
    case dp::DType::F64: { double v; std::memcpy(&v, p + 8 * i, 8); return v; }
    case dp::DType::F16: { uint16_t v; std::memcpy(&v, p + 2 * i, 2); return half_to_double(v); }
    case dp::DType::BF16: { uint16_t v; std::memcpy(&v, p + 2 * i, 2); return bf16_to_double(v); }
    case dp::DType::I32: { int32_t v; std::memcpy(&v, p + 4 * i, 4); return v; }
    case dp::DType::I64: { int64_t v; std::memcpy(&v, p + 8 * i, 8); return static_cast<double>(v); }
    case dp::DType::U8: return static_cast<unsigned char>(p[i]);
  }
  return 0;
}

std::string num(double x) { return fmt::format("{:.6g}", x); }

std::string type_of(const dp::SafetensorsFile::Info& i) {
  return std::string(dp::safetensors_dtype_name(i.dtype)) + dp::shape_str(i.shape);
}

// Prints the comparison of a and b; returns true when they count as equal.
bool compare(const dp::SafetensorsFile& a, const dp::SafetensorsFile& b, const Tolerance& tol) {
  int differ = 0, close = 0, mismatch = 0, only_a = 0, only_b = 0;
  for (const auto& name : a.names()) {
    if (!b.has(name)) {
      std::printf("only in A: %s\n", name.c_str());
      ++only_a;
      continue;
    }
    const auto &ia = a.info(name), &ib = b.info(name);
    if (ia.dtype != ib.dtype || ia.shape != ib.shape) {
      std::printf("mismatch: %s: %s in A, %s in B\n", name.c_str(), type_of(ia).c_str(), type_of(ib).c_str());
      ++mismatch;
      continue;
    }
    const dp::Tensor ta = a.get(name), tb = b.get(name);
    if (ta.nbytes() == 0 || std::memcmp(ta.raw(), tb.raw(), ta.nbytes()) == 0) continue;
    const int64_t n = ta.numel();
    const size_t es = dp::dtype_size(ta.dtype());
    int64_t beyond = 0, not_identical = 0;
    double max_abs = 0, max_rel = 0;
    for (int64_t i = 0; i < n; ++i) {
      if (std::memcmp(static_cast<const char*>(ta.raw()) + i * es, static_cast<const char*>(tb.raw()) + i * es, es) == 0)
        continue;
      ++not_identical;
      const double x = element(ta, i), y = element(tb, i);
      double d = std::fabs(x - y), scale = std::max(std::fabs(x), std::fabs(y));
      if (std::isnan(x) && std::isnan(y)) d = 0;  // different NaN payloads: no numeric difference
      else if (std::isnan(d)) d = std::numeric_limits<double>::infinity();
      const double rel = d == 0 ? 0 : (scale == 0 || std::isinf(scale) ? std::numeric_limits<double>::infinity() : d / scale);
      max_abs = std::max(max_abs, d);
      max_rel = std::max(max_rel, rel);
      if (!(d <= tol.atol + tol.rtol * scale)) ++beyond;
    }
    if (beyond > 0) {
      std::printf("differ: %s %s: %lld of %lld elements, max abs %s, max rel %s\n", name.c_str(), type_of(ia).c_str(),
                  static_cast<long long>(beyond), static_cast<long long>(n), num(max_abs).c_str(),
                  num(max_rel).c_str());
      ++differ;
    } else {
      std::printf("close: %s %s: %lld of %lld elements not identical, max abs %s, max rel %s (within tolerance)\n",
                  name.c_str(), type_of(ia).c_str(), static_cast<long long>(not_identical),
                  static_cast<long long>(n), num(max_abs).c_str(), num(max_rel).c_str());
      ++close;
    }
  }
  for (const auto& name : b.names())
    if (!a.has(name)) std::printf("only in B: %s\n", name.c_str()), ++only_b;

  std::vector<std::string> keys;
  for (const auto& [k, v] : a.metadata())
    if (!b.metadata().count(k) || b.metadata().at(k) != v) keys.push_back(k);
  for (const auto& [k, v] : b.metadata())
    if (!a.metadata().count(k)) keys.push_back(k);
  std::sort(keys.begin(), keys.end());
  if (!keys.empty()) std::printf("note: metadata differs: %s\n", dp::join(keys).c_str());

  const size_t na = a.names().size(), nb = b.names().size();
  if (differ + mismatch + only_a + only_b == 0) {
    if (close == 0) std::printf("identical: %zu tensors\n", na);
    else std::printf("within tolerance: %zu tensors (%d not bitwise identical)\n", na, close);
    return true;
  }
  std::printf("different: %d differ, %d mismatch, %d only in A, %d only in B (A has %zu tensors, B %zu)\n", differ,
              mismatch, only_a, only_b, na, nb);
  return false;
}

int usage(const std::string& msg) {
  std::fprintf(stderr,
               "diffckpt: error: %s\nusage: diffckpt A B [--atol X] [--rtol Y]\n"
               "       diffckpt --all DIR [--atol X] [--rtol Y]\n",
               msg.c_str());
  return 2;
}

// The replica-rank<r>.safetensors files of dir, by rank.
std::vector<std::pair<int, std::string>> replicas_in(const std::string& dir) {
  if (!fs::is_directory(dir)) DP_THROW_USER("'{}' is not a directory", dir);
  static const std::regex re(R"(replica-rank(\d+)\.safetensors)");
  std::vector<std::pair<int, std::string>> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    std::smatch m;
    const std::string name = e.path().filename().string();
    if (std::regex_match(name, m, re)) out.emplace_back(std::stoi(m[1].str()), e.path().string());
  }
  std::sort(out.begin(), out.end());
  if (out.empty()) DP_THROW_USER("no replica-rank<r>.safetensors files in '{}' (written with checkpoint.replicas = true)", dir);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  Tolerance tol;
  std::string all_dir;
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      std::printf("usage: diffckpt A B [--atol X] [--rtol Y]\n       diffckpt --all DIR [--atol X] [--rtol Y]\n"
                  "  lists tensors that differ (count, max abs/rel error) or exist on one side only.\n"
                  "  Exit 0 if identical (or within tolerance), 1 if different, 2 on errors.\n");
      return 0;
    }
    if (a == "--atol" || a == "--rtol" || a == "--all") {
      if (i + 1 >= argc) return usage(a + " needs a value");
      const std::string v = argv[++i];
      if (a == "--all") {
        all_dir = v;
        continue;
      }
      char* end = nullptr;
      const double x = std::strtod(v.c_str(), &end);
      if (v.empty() || *end != '\0' || !(x >= 0) || std::isinf(x))
        return usage(a + " = '" + v + "' is not a finite number >= 0");
      (a == "--atol" ? tol.atol : tol.rtol) = x;
    } else if (a.rfind("--", 0) == 0) {
      return usage("unknown option '" + a + "'");
    } else {
      files.push_back(a);
    }
  }
  if (all_dir.empty() && files.size() != 2) return usage("give two checkpoint files, or --all DIR");
  if (!all_dir.empty() && !files.empty()) return usage("--all DIR takes no other files");
  try {
    if (all_dir.empty()) {
      dp::SafetensorsFile a = dp::SafetensorsFile::open(files[0]), b = dp::SafetensorsFile::open(files[1]);
      std::printf("A: %s\nB: %s\n", files[0].c_str(), files[1].c_str());
      return compare(a, b, tol) ? 0 : 1;
    }
    const auto reps = replicas_in(all_dir);
    if (reps.size() == 1) {
      std::printf("1 replica (%s): nothing to compare\n", reps[0].second.c_str());
      return 0;
    }
    dp::SafetensorsFile ref = dp::SafetensorsFile::open(reps[0].second);
    std::vector<int> bad;
    for (size_t r = 1; r < reps.size(); ++r) {
      dp::SafetensorsFile other = dp::SafetensorsFile::open(reps[r].second);
      std::printf("== rank %d vs rank %d\nA: %s\nB: %s\n", reps[r].first, reps[0].first, reps[r].second.c_str(),
                  reps[0].second.c_str());
      if (!compare(other, ref, tol)) bad.push_back(reps[r].first);
    }
    if (bad.empty()) {
      std::printf("all %zu replicas match rank %d\n", reps.size(), reps[0].first);
      return 0;
    }
    std::vector<std::string> names;
    for (int r : bad) names.push_back(std::to_string(r));
    std::printf("replicas differ from rank %d: rank %s\n", reps[0].first, dp::join(names).c_str());
    return 1;
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "diffckpt: error: %s\n", e.what());
    return 2;
  }
}
