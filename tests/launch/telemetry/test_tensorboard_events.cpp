// TensorBoard event files: the record framing and Event encoding byte for byte against what
// TensorBoard's own Python code produces (golden hex from tensorboard.compat.proto.event_pb2 and
// tensorboard.compat.tensorflow_stub.pywrap_tensorflow.masked_crc32c), a writer/reader round trip,
// and that every corrupt byte is caught. The Python reader's view: tests/oracle/test_tb_events_py.py.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "base/error.h"
#include "launch/telemetry/tensorboard_event.h"
#include "launch/telemetry/tensorboard_record.h"
#include "launch/telemetry/tensorboard_writer.h"
#include "tests/bytes.h"

namespace dp::metrics {
namespace {

std::string hex(const std::string& b) {
  std::string out;
  for (unsigned char c : b) out += fmt::format("{:02x}", c);
  return out;
}

class TbDir : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("dptrain_tb_" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

TEST(TbRecord, MaskedCrcMatchesTensorBoard) {
  EXPECT_EQ(masked_crc32c("hello", 5), 0x191c1fbbu);
  const std::string len5("\x05\0\0\0\0\0\0\0", 8);
  EXPECT_EQ(masked_crc32c(len5.data(), 8), 0x3e04b2eau);
}

TEST(TbRecord, FrameIsLengthCrcDataCrc) {
  EXPECT_EQ(hex(frame_record("hello")), "0500000000000000" "eab2043e" "68656c6c6f" "bb1f1c19");
  const auto back = read_records(frame_record("hello") + frame_record(""), "mem");
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[0], "hello");
  EXPECT_EQ(back[1], "");
}

TEST(TbEvent, EncodingMatchesTensorBoardProtobuf) {
  EXPECT_EQ(hex(encode_event({.wall_time = 1.5, .step = 7, .file_version = {}, .scalars = {{"a/b", 0.25f}}})),
            "09000000000000f83f10072a0c0a0a0a03612f62150000803e");
  EXPECT_EQ(hex(encode_event({.wall_time = 1700000000.25, .step = 0, .file_version = "brain.Event:2", .scalars = {}})),
            "0900001040fc54d9411a0d627261696e2e4576656e743a32");
  EXPECT_EQ(hex(encode_event({.wall_time = 2.0, .step = -1, .file_version = {}, .scalars = {}})),
            "09000000000000004010ffffffffffffffffff01");
}

TEST(TbEvent, DecodeSkipsUnknownFieldsAndNonScalarValues) {
  // Event{wall_time=1.5, step=7, summary{value{tag="a/b" simple_value=0.25}, value{tag="img" image(4){}}}}
  // plus an unknown Event field 9 (varint 1).
  std::string summary_value_img = std::string("\x0a\x03img\x22\x00", 7);
  std::string summary = std::string("\x0a\x0a\x0a\x03" "a/b" "\x15\x00\x00\x80\x3e", 12) + "\x0a" +
                        std::string(1, static_cast<char>(summary_value_img.size())) + summary_value_img;
  std::string ev = std::string("\x09\x00\x00\x00\x00\x00\x00\xf8\x3f\x10\x07", 11) + "\x48\x01" + "\x2a" +
                   std::string(1, static_cast<char>(summary.size())) + summary;
  const Event e = decode_event(ev, "mem");
  EXPECT_EQ(e.wall_time, 1.5);
  EXPECT_EQ(e.step, 7);
  ASSERT_EQ(e.scalars.size(), 1u);
  EXPECT_EQ(e.scalars[0].tag, "a/b");
  EXPECT_EQ(e.scalars[0].value, 0.25f);
}

TEST(TbEvent, TruncatedFieldIsAnExactError) {
  try {
    decode_event(std::string("\x09\x00\x00", 3), "f: record 1");
    FAIL();
  } catch (const DpError& e) {
    EXPECT_STREQ(e.what(), "f: record 1: malformed event at byte 1 of the record: truncated fixed-size field");
  }
}

TEST_F(TbDir, WriterRoundTripKeepsTagsStepsAndValues) {
  std::string path;
  {
    TbWriter tb(dir_.string());
    path = tb.path();
    tb.add_scalars(0, {{"train/loss", 2.3}, {"train/lr", 1e-3}}, 1000.5);
    for (int64_t step = 50; step <= 500; step += 50) tb.add_scalar("train/loss", 2.3 / static_cast<double>(step), step);
    tb.add_scalar("eval/accuracy", 0.9125, 500, 2000.0);
  }
  const std::string name = std::filesystem::path(path).filename().string();
  EXPECT_EQ(name.rfind("events.out.tfevents.", 0), 0u) << name;
  EXPECT_EQ(name.substr(name.size() - process_identity().host.size()), process_identity().host);

  const auto events = read_event_file(path);
  ASSERT_EQ(events.size(), 13u);
  EXPECT_EQ(events[0].file_version, "brain.Event:2");
  EXPECT_TRUE(events[0].scalars.empty());
  EXPECT_GT(events[0].wall_time, 1.6e9);
  EXPECT_EQ(events[1].wall_time, 1000.5);
  EXPECT_EQ(events[1].step, 0);
  ASSERT_EQ(events[1].scalars.size(), 2u);
  EXPECT_EQ(events[1].scalars[0].tag, "train/loss");
  EXPECT_EQ(events[1].scalars[0].value, 2.3f);
  EXPECT_EQ(events[1].scalars[1].tag, "train/lr");
  EXPECT_EQ(events[1].scalars[1].value, 1e-3f);
  for (int i = 0; i < 10; ++i) {
    const int64_t step = 50 * (i + 1);
    EXPECT_EQ(events[2 + i].step, step);
    ASSERT_EQ(events[2 + i].scalars.size(), 1u);
    EXPECT_EQ(events[2 + i].scalars[0].value, static_cast<float>(2.3 / static_cast<double>(step)));
  }
  EXPECT_EQ(events[12].scalars[0].tag, "eval/accuracy");
  EXPECT_EQ(events[12].scalars[0].value, 0.9125f);
  EXPECT_EQ(events[12].wall_time, 2000.0);
}

TEST_F(TbDir, EachCallIsOnDiskAtOnce) {
  TbWriter tb(dir_.string());
  tb.add_scalar("x", 1.0, 1);
  EXPECT_EQ(read_event_file(tb.path()).size(), 2u);  // read while the writer is still open
}

TEST_F(TbDir, TwoWritersInOneSecondGetTwoFiles) {
  TbWriter a(dir_.string()), b(dir_.string());
  EXPECT_NE(a.path(), b.path());
}

TEST_F(TbDir, EveryCorruptByteIsDetected) {
  std::string path;
  {
    TbWriter tb(dir_.string());
    path = tb.path();
    tb.add_scalar("loss", 0.5, 3, 10.0);
  }
  const std::string good = test::file_bytes(path);
  // Flip one bit in every byte in turn: the reader must throw every time, never misread.
  for (size_t i = 0; i < good.size(); ++i) {
    std::string bad = good;
    bad[i] = static_cast<char>(bad[i] ^ 0x10);
    std::ofstream(path, std::ios::binary | std::ios::trunc) << bad;
    EXPECT_THROW(read_event_file(path), DpError) << "flipped byte " << i;
  }
  // The exact message for a flipped data byte of the second record.
  const size_t first = 12 + encode_event({.wall_time = 0, .step = 0, .file_version = "brain.Event:2", .scalars = {}})
                                .size() + 4;
  std::string bad = good;
  bad[first + 12] = static_cast<char>(bad[first + 12] ^ 1);
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bad;
  try {
    read_event_file(path);
    FAIL();
  } catch (const DpError& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.rfind(path + ": record 1 at byte " + std::to_string(first) + ": data CRC mismatch (stored 0x", 0), 0u)
        << msg;
    EXPECT_NE(msg.find("): the file is corrupt"), std::string::npos) << msg;
  }
  // A truncated file (a writer killed mid-record).
  std::ofstream(path, std::ios::binary | std::ios::trunc) << good.substr(0, good.size() - 2);
  try {
    read_event_file(path);
    FAIL();
  } catch (const DpError& e) {
    EXPECT_EQ(std::string(e.what()), path + ": record 1 at byte " + std::to_string(first) + ": truncated data (" +
                                         std::to_string(good.size() - first - 16) + " bytes + CRC announced, " +
                                         std::to_string(good.size() - 2 - first - 12) +
                                         " present): the file is truncated (a writer killed mid-record?)");
  }
}

TEST_F(TbDir, FileWithoutVersionIsRejected) {
  std::filesystem::create_directories(dir_);
  const std::string path = (dir_ / "events.out.tfevents.1.h").string();
  std::ofstream(path, std::ios::binary) << frame_record(encode_event({.wall_time = 1, .step = 1, .file_version = {},
                                                                      .scalars = {{"a", 1.f}}}));
  try {
    read_event_file(path);
    FAIL();
  } catch (const DpError& e) {
    EXPECT_EQ(std::string(e.what()), path + ": not a TensorBoard event file: the first record has no file_version "
                                            "\"brain.Event:<n>\" (found \"\")");
  }
}

}  // namespace
}  // namespace dp::metrics
