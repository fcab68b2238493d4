#include "runtime/data/tar_shards.h"

#include <algorithm>
#include <filesystem>

#include "runtime/data/brace.h"
#include "runtime/data/tar_index.h"
#include "runtime/log.h"

namespace dp::data {
namespace {

// Shards kept open for the whole run up to this many; beyond, each read opens its shard.
constexpr size_t kMaxOpenShards = 512;

struct Shard {
  std::string path;
  std::unique_ptr<RawFile> file;  // null when not kept open
};

class TarShardsDataset : public ImageDataset {
 public:
  TarShardsDataset(std::string pattern, std::vector<Shard> shards, std::vector<int32_t> shard_of,
                   std::vector<TarSample> samples, int num_classes, const ImageOptions& o, bool labeled)
      : ImageDataset(o, {}, labels_of(samples), labeled),
        pattern_(std::move(pattern)),
        shards_(std::move(shards)),
        shard_of_(std::move(shard_of)),
        samples_(std::move(samples)),
        num_classes_(num_classes) {}

  int num_classes() const override { return num_classes_; }
  std::string sample_name(int64_t i) const override {
    return shards_[shard_of_[i]].path + ":" + samples_[static_cast<size_t>(i)].key;
  }
  std::string describe() const override {
    return fmt::format("tar shards {} ({} shards): {} images, {} classes, samples {}", pattern_, shards_.size(),
                       size(), num_classes_, shape_str(sample_shape()));
  }

 protected:
  std::vector<uint8_t> read(int64_t i) const override {
    const TarSample& t = samples_[static_cast<size_t>(i)];
    const Shard& s = shards_[shard_of_[i]];
    const std::string what = "sample '" + t.key + "'";
    if (s.file) return s.file->read(t.offset, static_cast<size_t>(t.size), what);
    return RawFile(s.path).read(t.offset, static_cast<size_t>(t.size), what);
  }

 private:
  static std::vector<int32_t> labels_of(const std::vector<TarSample>& v) {
    std::vector<int32_t> out(v.size());
    for (size_t i = 0; i < v.size(); ++i) out[i] = v[i].label;
    return out;
  }
  std::string pattern_;
  std::vector<Shard> shards_;
  std::vector<int32_t> shard_of_;  // (samples): the shard of each sample
  std::vector<TarSample> samples_;
  int num_classes_;
};

// The index of every shard: loaded from index_dir when cached, else built and saved. Rank r of N
// starts at shard r * n / N, so that ranks indexing a new data set share the work.
std::vector<TarShardIndex> index_shards(const std::vector<std::string>& paths, const std::string& index_dir) {
  std::error_code ec;
  std::filesystem::create_directories(index_dir, ec);
  if (ec) DP_THROW_USER("{}: cannot create the tar index folder ({}); set data.index_dir", index_dir, ec.message());
  const size_t n = paths.size();
  const ProcessIdentity& me = process_identity();
  const size_t start = n * static_cast<size_t>(me.rank) / static_cast<size_t>(std::max(1, me.world_size));
  std::vector<TarShardIndex> out(n);
  size_t built = 0;
  auto lg = log::get("data");
  for (size_t k = 0; k < n; ++k) {
    const size_t s = (start + k) % n;
    const RawFile f(paths[s]);
    const std::string file = tar_index_path(index_dir, paths[s]);
    if (load_tar_index(file, f, out[s])) continue;
    out[s] = index_tar_shard(f);
    save_tar_index(file, f, out[s]);
    if (++built % 16 == 0) lg->info("indexed {} of {} tar shards ...", built, n);
  }
  if (built) lg->info("indexed {} tar shard(s) into {}", built, index_dir);
  return out;
}

}  // namespace

std::unique_ptr<ImageDataset> open_tar_shards(const std::string& pattern, const ImageOptions& options,
                                              const std::string& index_dir, bool labeled) {
  const std::vector<std::string> paths = expand_braces(pattern);
  for (const auto& p : paths)
    if (!std::filesystem::exists(p))
      DP_THROW_USER("{}: no such shard (from the pattern '{}', {} shard(s))", p, pattern, paths.size());
  std::vector<TarShardIndex> idx = index_shards(paths, index_dir);
  std::vector<Shard> shards;
  std::vector<int32_t> shard_of;
  std::vector<TarSample> samples;
  std::vector<std::string> problems;
  for (size_t s = 0; s < paths.size(); ++s) {
    shards.push_back(Shard{paths[s], paths.size() <= kMaxOpenShards ? std::make_unique<RawFile>(paths[s]) : nullptr});
    problems.insert(problems.end(), idx[s].problems.begin(), idx[s].problems.end());
    for (auto& t : idx[s].samples) {
      if (labeled && t.label < 0) {
        problems.push_back(fmt::format("{}: sample '{}': no label; expected a member {}.cls (a decimal integer) "
                                       "or {}.json with an integer \"label\"",
                                       paths[s], t.key, t.key, t.key));
        continue;
      }
      samples.push_back(std::move(t));
      shard_of.push_back(static_cast<int32_t>(s));
    }
  }
  if (!problems.empty()) {
    if (!options.skip_bad)
      DP_THROW_USER("{}{}; fix the shards, or set data.skip_bad = true to leave such samples out", problems[0],
                    problems.size() > 1 ? fmt::format(" (and {} more samples with problems)", problems.size() - 1) : "");
    log::get("data")->warn("{}: left out {} sample(s) (data.skip_bad = true), the first: {}", pattern, problems.size(),
                           problems[0]);
  }
  if (samples.empty()) DP_THROW_USER("{}: no samples in the {} shard(s)", pattern, paths.size());
  int32_t most = -1;
  for (const auto& t : samples) most = std::max(most, t.label);
  auto ds = std::make_unique<TarShardsDataset>(pattern, std::move(shards), std::move(shard_of), std::move(samples),
                                               most + 1, options, labeled);
  log::get("data")->info("{}", ds->describe());
  return ds;
}

}  // namespace dp::data
