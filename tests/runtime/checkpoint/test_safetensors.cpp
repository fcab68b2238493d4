// Tests for runtime/safetensors: round trips of every dtype, the exact byte layout, atomic
// writes, and one test per malformed-file check with the message it gives.
#include "runtime/checkpoint/safetensors.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

namespace dp {
namespace {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::HasSubstr;

class Safetensors : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "dp_safetensors_XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string path(const std::string& name) const { return (fs::path(dir_) / name).string(); }

  static std::string read_bytes(const std::string& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  static void write_bytes(const std::string& p, const std::string& bytes) {
    std::ofstream out(p, std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  // A hand-made file: 8-byte length (header.size() unless given), header, data.
  std::string make_file(const std::string& header, const std::string& data, int64_t header_len = -1) {
    uint64_t n = header_len < 0 ? header.size() : static_cast<uint64_t>(header_len);
    std::string bytes(reinterpret_cast<const char*>(&n), 8);
    bytes += header + data;
    std::string p = path("hand.safetensors");
    write_bytes(p, bytes);
    return p;
  }
  // Opens `p` (and reads every tensor), expecting a UserError whose message contains `parts`.
  template <typename... M>
  void expect_open_error(const std::string& p, M... parts) {
    try {
      auto f = SafetensorsFile::open(p);
      for (const auto& n : f.names()) f.get(n);
      FAIL() << "expected an error opening " << p;
    } catch (const UserError& e) {
      EXPECT_THAT(std::string(e.what()), AllOf(HasSubstr(p), HasSubstr(parts)...));
    }
  }

  std::string dir_;
};

template <typename T>
Tensor filled(const Shape& shape, DType dt, T start, T step) {
  Tensor t = Tensor::zeros(shape, dt);
  T* p = static_cast<T*>(t.raw());
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<T>(start + step * static_cast<T>(i));
  return t;
}

void expect_same_bytes(const Tensor& a, const Tensor& b) {
  ASSERT_EQ(a.dtype(), b.dtype());
  ASSERT_EQ(a.shape(), b.shape());
  ASSERT_EQ(a.nbytes(), b.nbytes());
  if (a.nbytes() > 0) {
    EXPECT_EQ(std::memcmp(a.raw(), b.raw(), a.nbytes()), 0) << a.describe();
  }
}

TEST_F(Safetensors, RoundTripEveryDtype) {
  std::vector<std::pair<std::string, Tensor>> ts = {
      {"f32", filled<float>({2, 3}, DType::F32, -1.5f, 0.25f)},
      {"f16", filled<uint16_t>({4}, DType::F16, 0x3c00, 0x0101)},      // raw halves from 1.0
      {"bf16", filled<uint16_t>({2, 2}, DType::BF16, 0xbf80, 0x0011)},  // raw bf16 from -1.0
      {"f64", filled<double>({3}, DType::F64, 1e300, -1e299)},
      {"i32", filled<int32_t>({5}, DType::I32, -2147483647, 1000000)},
      {"i64", filled<int64_t>({2, 1}, DType::I64, int64_t{1} << 62, -(int64_t{1} << 40))},
      {"u8", filled<uint8_t>({7}, DType::U8, 250, 1)},  // wraps past 255
      {"scalar", filled<float>({}, DType::F32, 42.0f, 0.0f)},
      {"empty", Tensor::zeros({0, 3}, DType::F32)},
  };
  std::map<std::string, std::string> meta = {{"step", "17"}, {"config", "[model]\nname = \"mlp\"\n"}, {"empty", ""}};
  const std::string p = path("all.safetensors");
  write_safetensors(p, ts, meta);

  auto f = SafetensorsFile::open(p);
  EXPECT_EQ(f.metadata(), meta);
  std::vector<std::string> want_names;
  for (const auto& [n, t] : ts) want_names.push_back(n);
  EXPECT_EQ(f.names(), want_names);  // written in the order given, so file order is that order
  size_t offset = 0;
  for (const auto& [n, t] : ts) {
    ASSERT_TRUE(f.has(n));
    const auto& info = f.info(n);
    EXPECT_EQ(info.dtype, t.dtype()) << n;
    EXPECT_EQ(info.shape, t.shape()) << n;
    EXPECT_EQ(info.begin, offset) << n;
    EXPECT_EQ(info.end, offset + t.nbytes()) << n;
    offset += t.nbytes();
    Tensor back = f.get(n);
    EXPECT_TRUE(back.device().is_cpu());
    EXPECT_NE(back.storage(), t.storage());
    expect_same_bytes(back, t);
  }
  EXPECT_FALSE(f.has("nope"));
  EXPECT_FALSE(fs::exists(p + ".tmp"));
}

TEST_F(Safetensors, ExactBytesOfATinyFile) {
  const std::string p = path("tiny.safetensors");
  write_safetensors(p, {{"a", filled<float>({2}, DType::F32, 1.0f, 1.0f)}}, {{"k", "v"}});
  // 79 bytes of JSON + 1 space of padding = 80 = 0x50; then 1.0f, 2.0f little-endian.
  const std::string json = R"({"__metadata__":{"k":"v"},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}} )";
  ASSERT_EQ(json.size(), 80u);
  std::string want("\x50\0\0\0\0\0\0\0", 8);
  want += json;
  want += std::string("\x00\x00\x80\x3f\x00\x00\x00\x40", 8);
  EXPECT_EQ(read_bytes(p), want);
}

TEST_F(Safetensors, NoMetadataMeansNoMetadataEntry) {
  const std::string p = path("nometa.safetensors");
  write_safetensors(p, {{"b", Tensor::zeros({1}, DType::U8)}});
  const std::string json = R"({"b":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})";  // 53 bytes -> pad 3
  ASSERT_EQ(json.size(), 53u);
  std::string want("\x38\0\0\0\0\0\0\0", 8);
  want += json + "   " + std::string(1, '\0');
  EXPECT_EQ(read_bytes(p), want);
  EXPECT_TRUE(SafetensorsFile::open(p).metadata().empty());
}

TEST_F(Safetensors, OverwriteIsAtomicAndLeavesNoTemporary) {
  const std::string p = path("ckpt.safetensors");
  write_safetensors(p, {{"x", filled<float>({3}, DType::F32, 1.0f, 1.0f)}});
  write_safetensors(p, {{"y", filled<int64_t>({2}, DType::I64, 5, 1)}});
  auto f = SafetensorsFile::open(p);
  EXPECT_EQ(f.names(), std::vector<std::string>{"y"});
  EXPECT_EQ(f.get("y").data<int64_t>()[1], 6);
  EXPECT_FALSE(fs::exists(p + ".tmp"));
}

TEST_F(Safetensors, ReaderKeepsItsFileAcrossARename) {
  // A reader opened before a checkpoint is replaced keeps reading the file it opened.
  const std::string p = path("ckpt.safetensors");
  write_safetensors(p, {{"x", filled<float>({3}, DType::F32, 1.0f, 1.0f)}});
  auto f = SafetensorsFile::open(p);
  write_safetensors(p, {{"x", filled<float>({3}, DType::F32, 7.0f, 1.0f)}});
  EXPECT_EQ(f.get("x").data<float>()[0], 1.0f);
  EXPECT_EQ(SafetensorsFile::open(p).get("x").data<float>()[0], 7.0f);
}

TEST_F(Safetensors, WriterErrors) {
  const std::string missing_dir = path("no/such/dir/x.safetensors");
  try {
    write_safetensors(missing_dir, {{"x", Tensor::zeros({1})}});
    FAIL() << "expected an error";
  } catch (const UserError& e) {
    EXPECT_THAT(e.what(), AllOf(HasSubstr("x.safetensors.tmp"), HasSubstr("No such file or directory")));
  }
  const std::string p = path("dup.safetensors");
  try {
    write_safetensors(p, {{"x", Tensor::zeros({1})}, {"x", Tensor::zeros({2})}});
    FAIL() << "expected an error";
  } catch (const UserError& e) {
    EXPECT_THAT(e.what(), AllOf(HasSubstr(p), HasSubstr("'x' given twice")));
  }
  EXPECT_THROW(write_safetensors(p, {{"__metadata__", Tensor::zeros({1})}}), UserError);
  EXPECT_THROW(write_safetensors(p, {{"", Tensor::zeros({1})}}), UserError);
  EXPECT_FALSE(fs::exists(p));
  EXPECT_FALSE(fs::exists(p + ".tmp"));
}

TEST_F(Safetensors, MissingFile) {
  expect_open_error(path("absent.safetensors"), "cannot open safetensors file", "No such file or directory");
}

TEST_F(Safetensors, ShorterThanTheLengthField) {
  const std::string p = path("short.safetensors");
  write_bytes(p, "abc");
  expect_open_error(p, "is 3 bytes, shorter than the 8-byte header length");
}

TEST_F(Safetensors, HeaderLengthBeyondTheFile) {
  std::string p = make_file("{}", "", 1000);
  expect_open_error(p, "header length 1000 is beyond the file (2 bytes after the length field)");
}

TEST_F(Safetensors, InvalidJson) {
  expect_open_error(make_file(R"({"a": {"dtype": )", ""), "header is not valid JSON");
  expect_open_error(make_file(R"([1, 2])", ""), "header is a JSON array, not an object");
  // A number beyond double's range (found by fuzz_safetensors_header): nlohmann throws out_of_range,
  // which escaped as an uncaught exception.
  expect_open_error(make_file(R"({"a": 9999999999999999999999999999999990001024700000000000000000004E0000999999})", ""),
                    "header is not valid JSON", "number overflow");
}

TEST_F(Safetensors, UnknownDtype) {
  std::string p = make_file(R"({"w":{"dtype":"Q4","shape":[1],"data_offsets":[0,1]}})", "x");
  expect_open_error(p, "tensor 'w'", "unknown dtype 'Q4' (supported: F32, F16, BF16, F64, I32, I64, U8)");
}

TEST_F(Safetensors, MissingOrMistypedFields) {
  expect_open_error(make_file(R"({"w":{"dtype":"F32","shape":[1]}})", "abcd"), "tensor 'w'",
                    "missing \"data_offsets\"");
  expect_open_error(make_file(R"({"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", "abcd"), "tensor 'w'",
                    "not a non-negative integer");
  expect_open_error(make_file(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0]}})", "abcd"), "tensor 'w'",
                    "is not a pair of non-negative integers");
  expect_open_error(make_file(R"({"__metadata__":{"step":3}})", ""), "__metadata__ value 'step' is a JSON number");
}

TEST_F(Safetensors, OffsetsOutsideTheDataArea) {
  std::string p = make_file(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", "abcd");
  expect_open_error(p, "tensor 'w'", "data_offsets [0, 8] are outside the data area of 4 bytes");
  p = make_file(R"({"w":{"dtype":"U8","shape":[0],"data_offsets":[4,2]}})", "abcd");
  expect_open_error(p, "tensor 'w'", "data_offsets [4, 2] are outside the data area");
}

TEST_F(Safetensors, OffsetsNotMatchingDtypeTimesShape) {
  std::string p = make_file(R"({"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,12]}})", std::string(16, 'x'));
  expect_open_error(p, "tensor 'w'", "data_offsets [0, 12] hold 12 bytes but F32 [2,2] needs 16");
  p = make_file(R"({"w":{"dtype":"F64","shape":[4294967296,4294967296],"data_offsets":[0,8]}})", std::string(8, 'x'));
  expect_open_error(p, "tensor 'w'", "needs more than 2^64");
}

TEST_F(Safetensors, OverlappingTensors) {
  std::string p = make_file(
      R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},"b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})",
      std::string(16, 'x'));
  expect_open_error(p, "tensors 'a' [0, 16) and 'b' [8, 16) overlap");
  // A tensor nested in an earlier, longer one is caught even with a disjoint one between them.
  p = make_file(
      R"({"a":{"dtype":"U8","shape":[10],"data_offsets":[0,10]},"b":{"dtype":"U8","shape":[2],"data_offsets":[2,4]},)"
      R"("c":{"dtype":"U8","shape":[2],"data_offsets":[6,8]}})",
      std::string(10, 'x'));
  expect_open_error(p, "overlap");
  // Zero-byte tensors overlap nothing.
  p = make_file(
      R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"z":{"dtype":"F32","shape":[0],"data_offsets":[2,2]}})",
      std::string(4, 'x'));
  EXPECT_EQ(SafetensorsFile::open(p).names(), (std::vector<std::string>{"a", "z"}));
}

TEST_F(Safetensors, NamesAreInDataOrderNotHeaderOrder) {
  std::string p = make_file(
      R"({"late":{"dtype":"U8","shape":[1],"data_offsets":[1,2]},"early":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})",
      "\x05\x06");
  auto f = SafetensorsFile::open(p);
  EXPECT_EQ(f.names(), (std::vector<std::string>{"early", "late"}));
  EXPECT_EQ(f.get("late").data<uint8_t>()[0], 6);
}

TEST_F(Safetensors, MissingTensorListsSomeNames) {
  std::vector<std::pair<std::string, Tensor>> ts;
  for (int i = 0; i < 12; ++i) ts.emplace_back(fmt::format("layer{}.weight", i), Tensor::zeros({1}));
  const std::string p = path("many.safetensors");
  write_safetensors(p, ts);
  auto f = SafetensorsFile::open(p);
  try {
    f.get("layer3.wieght");
    FAIL() << "expected an error";
  } catch (const UserError& e) {
    EXPECT_THAT(e.what(), AllOf(HasSubstr(p), HasSubstr("no tensor 'layer3.wieght'"),
                                HasSubstr("did you mean 'layer3.weight'?"),
                                HasSubstr("it has 12 tensors: layer0.weight, layer1.weight"),
                                HasSubstr("... (4 more)")));
  }
  EXPECT_THROW(f.info("nothing"), UserError);
}

}  // namespace
}  // namespace dp
