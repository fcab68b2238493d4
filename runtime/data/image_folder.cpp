#include "runtime/data/image_folder.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <set>
#include <utility>

#include "runtime/data/raw_file.h"
#include "runtime/log.h"
#include "runtime/suggest.h"

namespace dp::data {
namespace fs = std::filesystem;
namespace {

enum class Ext { None, Decoded, Unsupported };

// torchvision's IMG_EXTENSIONS, matched on the lower-cased name.
Ext extension_of(const std::string& name) {
  std::string low = name;
  std::transform(low.begin(), low.end(), low.begin(), [](unsigned char c) { return std::tolower(c); });
  auto ends = [&](const char* e) {
    const size_t n = std::strlen(e);
    return low.size() >= n && low.compare(low.size() - n, n, e) == 0;
  };
  for (const char* e : {".jpg", ".jpeg", ".png"})
    if (ends(e)) return Ext::Decoded;
  for (const char* e : {".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp"})
    if (ends(e)) return Ext::Unsupported;
  return Ext::None;
}

bool is_dir(const fs::path& p) {
  std::error_code ec;
  return fs::is_directory(p, ec);  // follows symlinks, as os.walk(followlinks=True) and is_dir()
}

// os.walk(top, followlinks=True) as (root, file names) pairs, roots spelled as os.walk joins them.
void walk(const std::string& root, int depth, std::vector<std::pair<std::string, std::vector<std::string>>>& out) {
  if (depth > 64) DP_THROW_USER("{}: folders nested more than 64 deep (a symlink loop?)", root);
  std::vector<std::string> files, dirs;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(root, ec)) {
    const std::string name = e.path().filename().string();
    (is_dir(e.path()) ? dirs : files).push_back(name);
  }
  if (ec) DP_THROW_USER("{}: cannot list ({})", root, ec.message());
  out.emplace_back(root, std::move(files));
  for (const auto& d : dirs) walk(root + "/" + d, depth + 1, out);
}

// The sorted files of one class folder, as torchvision's make_dataset lists them.
void list_class(const std::string& class_dir, int32_t label, FolderListing& l) {
  std::vector<std::pair<std::string, std::vector<std::string>>> tree;
  walk(class_dir, 0, tree);
  std::sort(tree.begin(), tree.end());
  bool any = false;
  for (auto& [root, files] : tree) {
    std::sort(files.begin(), files.end());
    for (const auto& f : files) {
      const Ext e = extension_of(f);
      if (e == Ext::Unsupported) l.unsupported.push_back(root + "/" + f);
      if (e != Ext::Decoded) continue;
      l.files.push_back(root + "/" + f);
      l.labels.push_back(label);
      any = true;
    }
  }
  if (!any) l.empty_classes.push_back(class_dir);
}

class FolderDataset : public ImageDataset {
 public:
  FolderDataset(const std::string& dir, FolderListing l, const ImageOptions& o, bool labeled)
      : ImageDataset(o, std::move(l.classes), std::move(l.labels), labeled), dir_(dir), files_(std::move(l.files)) {}
  std::string sample_name(int64_t index) const override { return files_.at(static_cast<size_t>(index)); }
  std::string describe() const override {
    return fmt::format("image folder {}: {} images, {} classes, samples {}", dir_, size(), num_classes(),
                       shape_str(sample_shape()));
  }

 protected:
  std::vector<uint8_t> read(int64_t index) const override { return read_whole_file(files_[index]); }

 private:
  std::string dir_;
  std::vector<std::string> files_;
};

std::string listed(const std::vector<std::string>& v, size_t most = 5) {
  std::vector<std::string> head(v.begin(), v.begin() + std::min(v.size(), most));
  return join(head) + (v.size() > most ? fmt::format(" and {} more", v.size() - most) : "");
}

}  // namespace

FolderListing list_image_folder(const std::string& dir) {
  if (!is_dir(dir))
    DP_THROW_USER("{}: no such folder; an image folder holds one subfolder per class with its images in it "
                  "(torchvision's ImageFolder layout: <dir>/<class>/<image>.jpg)",
                  dir);
  FolderListing l;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (is_dir(e.path())) l.classes.push_back(e.path().filename().string());
  if (ec) DP_THROW_USER("{}: cannot list ({})", dir, ec.message());
  if (l.classes.empty())
    DP_THROW_USER("{}: no class folders; an image folder holds one subfolder per class (<dir>/<class>/<image>.jpg)",
                  dir);
  std::sort(l.classes.begin(), l.classes.end());
  for (size_t c = 0; c < l.classes.size(); ++c) list_class(dir + "/" + l.classes[c], static_cast<int32_t>(c), l);
  return l;
}

std::unique_ptr<ImageDataset> open_image_folder(const std::string& dir, const ImageOptions& options) {
  FolderListing l = list_image_folder(dir);
  auto lg = log::get("data");
  if (!l.unsupported.empty()) {
    const std::string what = fmt::format("{} image(s) in a format dptrain does not decode (it reads .jpg, .jpeg and "
                                         ".png): {}",
                                         l.unsupported.size(), listed(l.unsupported));
    if (!options.skip_bad) DP_THROW_USER("{}: {}; convert them, or set data.skip_bad = true to leave them out", dir, what);
    lg->warn("{}: leaving out {} (data.skip_bad = true)", dir, what);
  }
  if (!l.empty_classes.empty()) {
    const std::string what = fmt::format("class folder(s) without a .jpg, .jpeg or .png image: {}", listed(l.empty_classes));
    if (!options.skip_bad)
      DP_THROW_USER("{}: {}; add images or remove the folder (or set data.skip_bad = true to keep the class "
                    "without samples)",
                    dir, what);
    lg->warn("{}: {} (kept as classes without samples: data.skip_bad = true)", dir, what);
  }
  if (l.files.empty()) DP_THROW_USER("{}: no .jpg, .jpeg or .png image in any class folder", dir);
  auto ds = std::make_unique<FolderDataset>(dir, std::move(l), options, true);
  lg->info("{}", ds->describe());
  return ds;
}

void check_same_classes(const Dataset& train, const std::string& train_dir, const Dataset& val,
                        const std::string& val_dir) {
  const std::vector<std::string> a = train.class_names(), b = val.class_names();
  if (a == b) return;
  const std::set<std::string> sa(a.begin(), a.end()), sb(b.begin(), b.end());
  std::vector<std::string> extra, missing;
  for (const auto& c : b)
    if (!sa.count(c)) extra.push_back(c);
  for (const auto& c : a)
    if (!sb.count(c)) missing.push_back(c);
  DP_THROW_USER("{} and {} have different classes, so their class indices would differ: {}{}{}; both need the "
                "same class folders",
                val_dir, train_dir, extra.empty() ? "" : fmt::format("only in {}: {}", val_dir, listed(extra, 10)),
                !extra.empty() && !missing.empty() ? "; " : "",
                missing.empty() ? "" : fmt::format("missing from {}: {}", val_dir, listed(missing, 10)));
}

std::unique_ptr<ImageDataset> open_unlabeled_images(const std::string& dir, const ImageOptions& options) {
  FolderListing l;
  if (!is_dir(dir)) {
    RawFile probe(dir);  // a single file (UserError naming it when missing)
    l.files.push_back(dir);
  } else {
    std::vector<std::pair<std::string, std::vector<std::string>>> tree;
    walk(dir, 0, tree);
    std::sort(tree.begin(), tree.end());
    for (auto& [root, files] : tree) {
      std::sort(files.begin(), files.end());
      for (const auto& f : files)
        if (extension_of(f) == Ext::Decoded) l.files.push_back(root + "/" + f);
    }
  }
  if (l.files.empty()) DP_THROW_USER("{}: no .jpg, .jpeg or .png image in this folder or below it", dir);
  l.labels.assign(l.files.size(), -1);
  return std::make_unique<FolderDataset>(dir, std::move(l), options, false);
}

}  // namespace dp::data
