// Oracle helper for tests/oracle/test_image_torchvision.py: runs dptrain's image decoding and
// transforms on files and writes the raw u8 results for Python to compare with PIL/torchvision.
//   image_dump <out_dir> < jobs.json
// jobs: a JSON list of {"file", "out", "op", ...}; op:
//   "decode"         the whole image, (H, W, 3)
//   "region"         "denom", "region": [x0, y0, x1, y1]: a partial/reduced decode, (h, w, 3); the
//                    answer line gives where it lies ("x0", "y0") and the reduced size
//   "center"         "resize", "size", "scaled": Resize(resize) + CenterCrop(size), (3, size, size)
//   "resized_crop"   "box": [top, left, height, width], "size", "scaled", (3, size, size)
//   "list_folder"    the image folder `file` as dptrain lists it: {"classes", "files", "labels"}
//   "npy"            "labels": a y .npy: the data set of x `file` + y, every sample as f32 (n, *shape)
// Prints one JSON object per job (shape, offsets) and writes <out_dir>/<out>.bin; a job that fails
// prints {"error": message}.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "runtime/data/image/decode.h"
#include "runtime/data/image/sample.h"
#include "runtime/data/image_folder.h"
#include "runtime/data/npy.h"

namespace img = dp::data::image;
using nlohmann::json;

namespace {

std::vector<uint8_t> slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot open " + path);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

void spill(const std::string& path, const std::vector<uint8_t>& v) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size()));
}

json run(const json& job, const std::string& dir) {
  const std::string file = job["file"], op = job["op"], out = dir + "/" + job["out"].get<std::string>() + ".bin";
  if (op == "list_folder") {
    const dp::data::FolderListing l = dp::data::list_image_folder(file);
    return {{"classes", l.classes}, {"files", l.files}, {"labels", l.labels}};
  }
  if (op == "npy") {
    auto ds = dp::data::open_npy(file, job["labels"]);
    std::vector<float> all(static_cast<size_t>(ds->size() * ds->sample_numel()));
    std::vector<int32_t> labels;
    for (int64_t i = 0; i < ds->size(); ++i) labels.push_back(ds->get(i, all.data() + i * ds->sample_numel()));
    const auto* p = reinterpret_cast<const uint8_t*>(all.data());
    spill(out, std::vector<uint8_t>(p, p + all.size() * sizeof(float)));
    return {{"shape", ds->sample_shape()}, {"labels", labels}, {"num_classes", ds->num_classes()},
            {"bytes", ds->holds_bytes()}};
  }
  const std::vector<uint8_t> bytes = slurp(file);
  json r;
  if (op == "decode" || op == "region") {
    img::DecodePlanner planner;
    if (op == "region") {
      planner = [&](int, int, bool) {
        img::DecodeRequest q;
        q.scale_denom = job["denom"];
        const auto reg = job["region"];
        q.region = img::Region{reg[0], reg[1], reg[2], reg[3]};
        return q;
      };
    }
    img::DecodedImage d = img::decode_image(bytes.data(), bytes.size(), file, planner);
    spill(out, d.rgb);
    r = {{"shape", {d.height, d.width, 3}}, {"x0", d.x0}, {"y0", d.y0}, {"full", {d.full_height, d.full_width}}};
    return r;
  }
  img::ImageCrop crop;
  crop.size = job["size"];
  crop.decode_scaled = job.value("scaled", false);
  img::CropBox box;
  if (op == "center") {
    crop.kind = img::ImageCrop::Kind::ResizeCenterCrop;
    crop.resize = job["resize"];
  } else if (op == "resized_crop") {
    crop.kind = img::ImageCrop::Kind::RandomResizedCrop;
    const auto b = job["box"];
    box = img::CropBox{b[0], b[1], b[2], b[3]};
  } else {
    throw std::runtime_error("unknown op " + op);
  }
  std::vector<uint8_t> sample(static_cast<size_t>(3) * crop.size * crop.size);
  img::make_sample(bytes.data(), bytes.size(), file, crop, nullptr, sample.data(), &box);
  spill(out, sample);
  return {{"shape", {3, crop.size, crop.size}}};
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: image_dump <out_dir> < jobs.json\n");
    return 2;
  }
  try {
    const json jobs = json::parse(std::cin);
    for (const auto& job : jobs) {
      json r;
      try {
        r = run(job, argv[1]);
      } catch (const std::exception& e) {
        r = {{"error", e.what()}};
      }
      std::cout << r.dump() << "\n";
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "image_dump: %s\n", e.what());
    return 1;
  }
  return 0;
}
