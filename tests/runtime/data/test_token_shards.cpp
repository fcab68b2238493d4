// Tests for llm.c's token shards (runtime/data/token_shard.h), their windows (token_windows.h), the
// data set over them (token_dataset.h), shard patterns (shard_paths.h), the loader's token batches
// (loader.h), make-shards (byte_shards.h), and every bad input's exact message. The numpy oracle
// (tests/oracle/test_tokens_numpy.py) checks the same against shards written by llm.c's
// write_datafile.
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>

#include "runtime/data/byte_shards.h"
#include "runtime/data/loader.h"
#include "runtime/data/sampler.h"
#include "runtime/data/shard_paths.h"
#include "runtime/data/token_dataset.h"
#include "runtime/data/token_shard.h"
#include "runtime/data/token_windows.h"
#include "tests/runtime/data/data_test_util.h"

namespace dp::data {
namespace {

using testing::TempDir;
using testing::user_error;

// The bytes of a shard as write_datafile writes it: header (magic, version, count, 253 zeros), tokens.
std::vector<uint8_t> shard_bytes(const std::vector<uint16_t>& tokens, int32_t magic = kTokenShardMagic,
                                 int32_t version = kTokenShardVersion, int64_t count = INT64_MIN) {
  std::vector<uint8_t> b(kTokenShardHeaderBytes + 2 * tokens.size(), 0);
  const int32_t h[3] = {magic, version, static_cast<int32_t>(count == INT64_MIN ? static_cast<int64_t>(tokens.size()) : count)};
  std::memcpy(b.data(), h, sizeof(h));
  std::memcpy(b.data() + kTokenShardHeaderBytes, tokens.data(), 2 * tokens.size());
  return b;
}

std::vector<uint16_t> iota_tokens(size_t n, uint16_t first) {
  std::vector<uint16_t> t(n);
  std::iota(t.begin(), t.end(), first);
  return t;
}

std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

TEST(TokenShard, WriterMatchesWriteDatafileByteForByte) {
  TempDir d;
  const auto tokens = iota_tokens(300, 65000);  // wraps past 65535: every uint16 bit pattern kind
  write_token_shard(d / "s.bin", tokens);
  EXPECT_EQ(read_file(d / "s.bin"), shard_bytes(tokens));
  MappedTokenShard s(d / "s.bin");
  ASSERT_EQ(s.num_tokens(), 300);
  EXPECT_EQ(std::vector<uint16_t>(s.tokens(), s.tokens() + 300), tokens);
}

TEST(TokenShard, BadHeadersAreErrorsNamingTheFile) {
  TempDir d;
  const std::string p = d / "x.bin";
  testing::write(p, shard_bytes({1, 2, 3}, 12345));
  EXPECT_EQ(user_error([&] { MappedTokenShard s(p); }),
            p + ": not a token shard: magic 12345 where 20240520 was expected (llm.c's token shards: 256 int32 (magic "
                "20240520, version 1, token count), then uint16 tokens; write them with dev/data/data_common.py's "
                "write_datafile or dptrain make-shards)");
  testing::write(p, shard_bytes({1, 2, 3}, kTokenShardMagic, 7));
  EXPECT_EQ(user_error([&] { MappedTokenShard s(p); }), p + ": token shard version 7, expected 1 (uint16 tokens)");
  testing::write(p, shard_bytes({1, 2, 3}, kTokenShardMagic, 2));
  EXPECT_EQ(user_error([&] { MappedTokenShard s(p); }),
            p + ": token shard version 2, expected 1 (uint16 tokens); version 2 holds the bytes of text, not tokens: "
                "tokenize it into a version 1 shard");
  testing::write(p, shard_bytes({1, 2, 3}, kTokenShardMagic, 1, 5));  // 5 tokens announced, 3 there
  EXPECT_EQ(user_error([&] { MappedTokenShard s(p); }),
            p + ": truncated token shard: the header gives 5 tokens (1034 bytes with the header) but the file has 1030 "
                "bytes (3 whole tokens); copy the shard again or rewrite it");
  testing::write(p, shard_bytes({1, 2, 3}, kTokenShardMagic, 1, 2));  // 2 announced, 3 there
  EXPECT_EQ(user_error([&] { MappedTokenShard s(p); }),
            p + ": token shard of 1030 bytes where its header's 2 tokens take 1028: 2 bytes after the last token (not "
                "a shard of this format, or a header not updated after appending)");
  testing::write(p, shard_bytes({1, 2, 3}, kTokenShardMagic, 1, -4));
  EXPECT_EQ(user_error([&] { MappedTokenShard s(p); }), p + ": token shard header gives a negative token count -4");
  testing::write(p, std::vector<uint8_t>(100, 0));
  EXPECT_EQ(user_error([&] { MappedTokenShard s(p); }),
            p + ": not a token shard: 100 bytes, shorter than the 1024-byte header (llm.c's token shards: 256 int32 "
                "(magic 20240520, version 1, token count), then uint16 tokens; write them with "
                "dev/data/data_common.py's write_datafile or dptrain make-shards)");
  EXPECT_EQ(user_error([&] { MappedTokenShard s(d / "missing.bin"); }),
            d / "missing.bin" + ": cannot open token shard (No such file or directory)");
}

TEST(TokenWindows, CountAndPlaceFollowTheBlockSize) {
  EXPECT_EQ(windows_in_shard(0, 4), 0);
  EXPECT_EQ(windows_in_shard(4, 4), 0);  // T tokens: no room for the last target
  EXPECT_EQ(windows_in_shard(5, 4), 1);
  EXPECT_EQ(windows_in_shard(8, 4), 1);
  EXPECT_EQ(windows_in_shard(9, 4), 2);
  EXPECT_EQ(windows_in_shard(100, 1), 99);
  const WindowIndex idx({9, 5, 3, 13}, 4);  // 2 + 1 + 0 + 3 windows
  ASSERT_EQ(idx.size(), 6);
  const std::vector<std::pair<int32_t, int64_t>> want = {{0, 0}, {0, 4}, {1, 0}, {3, 0}, {3, 4}, {3, 8}};
  for (int64_t w = 0; w < idx.size(); ++w) {
    EXPECT_EQ(idx.place(w).shard, want[w].first) << w;
    EXPECT_EQ(idx.place(w).offset, want[w].second) << w;
  }
  EXPECT_EQ(idx.windows_of(2), 0);
}

// Two shards: 0..20 (21 tokens: 5 windows of T = 4) and 100..108 (9 tokens: 2 windows).
struct TwoShards {
  TempDir d;
  TwoShards() {
    write_token_shard(d / "train_000000.bin", iota_tokens(21, 0));
    write_token_shard(d / "train_000001.bin", iota_tokens(9, 100));
  }
  std::unique_ptr<Dataset> open(const std::string& pattern, int64_t T = 4, int64_t vocab = 256) const {
    return open_token_shards(pattern, {T, vocab, "data.path"});
  }
};

TEST(TokenDataset, WindowsInFileOrderNeverCrossShards) {
  TwoShards s;
  auto ds = s.open(s.d / "train_00000{0,1}.bin");
  ASSERT_TRUE(ds->holds_tokens());
  EXPECT_EQ(ds->size(), 7);
  EXPECT_EQ(ds->sample_shape(), (Shape{4}));
  EXPECT_EQ(ds->window_tokens(), 5);
  EXPECT_EQ(ds->num_classes(), 256);
  std::vector<uint16_t> w(5);
  const std::vector<uint16_t> first[] = {{0, 1, 2, 3, 4},      {4, 5, 6, 7, 8},         {8, 9, 10, 11, 12},
                                         {12, 13, 14, 15, 16}, {16, 17, 18, 19, 20},    {100, 101, 102, 103, 104},
                                         {104, 105, 106, 107, 108}};
  for (int64_t i = 0; i < 7; ++i) {
    ds->get_tokens(i, w.data());
    EXPECT_EQ(w, first[i]) << i;
  }
  EXPECT_EQ(ds->sample_name(5), s.d / "train_000001.bin" + "@0");
  EXPECT_EQ(ds->describe(), "token shards " + s.d / "train_00000{0,1}.bin" +
                                " (2 shards, 30 tokens): 7 windows of 4 + 1 tokens, vocabulary 256");
  float f[4];
  EXPECT_THROW(ds->get(0, f), DpError);
}

TEST(TokenDataset, GlobsAreSortedAndBracesKeepTheirOrder) {
  TwoShards s;
  std::vector<uint16_t> w(5);
  auto glob = s.open(s.d / "train_*.bin");
  ASSERT_EQ(glob->size(), 7);
  glob->get_tokens(6, w.data());
  EXPECT_EQ(w[0], 104);
  auto reversed = s.open(s.d / "train_00000{1,0}.bin");  // braces: the pattern's order
  reversed->get_tokens(0, w.data());
  EXPECT_EQ(w[0], 100);
  EXPECT_EQ(shard_paths(s.d / "train_000001.bin", "data.path"), std::vector<std::string>{s.d / "train_000001.bin"});
}

TEST(TokenDataset, BadPatternsAndShardsAreErrorsNamingTheKeyOrFile) {
  TwoShards s;
  EXPECT_EQ(user_error([&] { shard_paths("", "data.val_path"); }),
            "data.val_path is empty: give the shard files (a file, a brace pattern such as "
            "\"train_{000001..000009}.bin\" or a glob such as \"train_*.bin\")");
  EXPECT_EQ(user_error([&] { s.open(s.d / "val_*.bin"); }),
            "data.path = \"" + s.d / "val_*.bin" + "\": no file matches '" + s.d / "val_*.bin" + "'");
  EXPECT_EQ(user_error([&] { s.open(s.d / "train_00000{0..2}.bin"); }),
            "data.path = \"" + s.d / "train_00000{0..2}.bin" + "\": " + s.d / "train_000002.bin" + ": no such shard");
  EXPECT_EQ(user_error([&] { s.open(s.d.path.string()); }),
            "data.path = \"" + s.d.path.string() + "\": " + s.d.path.string() + ": no such shard (a folder)");
  // block_size larger than a shard: 9 tokens hold no window of 9 + 1.
  EXPECT_EQ(user_error([&] { s.open(s.d / "train_*.bin", 9); }),
            s.d / "train_000001.bin" + ": 9 tokens, fewer than model.block_size + 1 = 10: not one window of the "
                                       "model's context fits in this shard (windows never cross shards); lower "
                                       "model.block_size to at most 8 or leave the shard out of data.path");
  EXPECT_EQ(user_error([&] { s.open(s.d / "train_*.bin", 4, 70000); }),
            "model.vocab_size = 70000: token shards hold uint16 tokens, so the vocabulary must be 1..65536");
}

// Tokens are checked against the vocabulary as each window is read (lazily), and by --check's scan.
TEST(TokenDataset, ATokenOutsideTheVocabularyIsAnErrorNamingFileAndPosition) {
  TwoShards s;
  auto ds = s.open(s.d / "train_*.bin", 4, 105);  // tokens 105..108 of the second shard are too large
  std::vector<uint16_t> w(5);
  ds->get_tokens(4, w.data());  // the first shard is fine
  EXPECT_EQ(user_error([&] { ds->get_tokens(5, w.data()); }), "no error");  // 100..104
  EXPECT_EQ(user_error([&] { ds->get_tokens(6, w.data()); }),
            s.d / "train_000001.bin" + ": token 108 at token 8 of the shard (window 6 of the data set) is not below "
                                       "model.vocab_size = 105: the shards were made with a larger vocabulary; set "
                                       "model.vocab_size to at least 109 (or the tokenizer's vocabulary size)");
  EXPECT_EQ(user_error([&] { scan_token_vocabulary(*ds); }),
            s.d / "train_000001.bin" + ": token 108 at token 8 of the shard (window 6 of the data set) is not below "
                                       "model.vocab_size = 105: the shards were made with a larger vocabulary; set "
                                       "model.vocab_size to at least 109 (or the tokenizer's vocabulary size)");
}

TEST(TokenLoader, BatchesHoldInputsAndNextTokenTargets) {
  TwoShards s;
  auto ds = s.open(s.d / "train_*.bin");
  const std::vector<int64_t> order = {6, 0, 3};
  Loader host(*ds, order, 2, false, Transform{}, 0, 0, 3, BatchFormat::Tokens);
  Batch b;
  ASSERT_TRUE(host.next(b));
  ASSERT_EQ(b.x.shape(), (Shape{2, 4}));
  ASSERT_EQ(b.y.shape(), (Shape{2, 4}));
  EXPECT_EQ(std::vector<int32_t>(b.x.data<int32_t>(), b.x.data<int32_t>() + 8),
            (std::vector<int32_t>{104, 105, 106, 107, 0, 1, 2, 3}));
  EXPECT_EQ(std::vector<int32_t>(b.y.data<int32_t>(), b.y.data<int32_t>() + 8),
            (std::vector<int32_t>{105, 106, 107, 108, 1, 2, 3, 4}));
  EXPECT_EQ(b.x.nbytes() + b.y.nbytes(), batch_bytes(BatchFormat::Tokens, 4, 2));
  ASSERT_TRUE(host.next(b));
  EXPECT_EQ(b.x.dim(0), 1);
  EXPECT_EQ(b.y.data<int32_t>()[3], 16);
  EXPECT_FALSE(host.next(b));

  Loader raw(*ds, order, 3, false, Transform{}, 0, 0, 3, BatchFormat::RawTokens, 2);
  ASSERT_TRUE(raw.next(b));
  ASSERT_EQ(b.x.shape(), (Shape{3, 10}));  // 5 uint16 tokens as bytes
  EXPECT_FALSE(b.y.defined());
  EXPECT_EQ(b.x.nbytes(), batch_bytes(BatchFormat::RawTokens, 4, 3));
  const auto* t = reinterpret_cast<const uint16_t*>(b.x.data<uint8_t>());
  EXPECT_EQ(std::vector<uint16_t>(t, t + 15),
            (std::vector<uint16_t>{104, 105, 106, 107, 108, 0, 1, 2, 3, 4, 12, 13, 14, 15, 16}));
  EXPECT_EQ(raw_format_of(*ds), BatchFormat::RawTokens);
  EXPECT_EQ(host_format_of(*ds), BatchFormat::Tokens);
}

TEST(TokenLoader, WrongFormatOrATransformIsAnError) {
  TwoShards s;
  auto ds = s.open(s.d / "train_*.bin");
  EXPECT_EQ(user_error([&] { Loader l(*ds, {0}, 1, false, Transform{}, 0, 0); }),
            ds->describe() + " holds token windows: load it with Tokens or RawTokens batches (data::host_format_of "
                             "and raw_format_of pick the right one)");
  Transform t;
  t.hflip = true;
  EXPECT_EQ(user_error([&] { Loader l(*ds, {0}, 1, false, t, 0, 0, 3, BatchFormat::Tokens); }),
            "data.mean, data.std, data.crop_padding and data.hflip do not apply to token windows (" + ds->describe() +
                "); leave them out of the cfg");
  Batch b;
  auto small = s.open(s.d / "train_*.bin", 4, 10);  // window 0 (tokens 0..4) is below 10, window 3 (12..16) not
  Loader late(*small, {0, 3}, 1, false, Transform{}, 0, 0, 3, BatchFormat::Tokens);
  EXPECT_NO_THROW(late.next(b));
  EXPECT_THROW(late.next(b), UserError);  // window 3 is 12..16: the worker's error reaches next()
}

// The sampler is the image data sets' DistributedSampler over window numbers: 2 ranks see disjoint
// windows that together are the epoch's windows (7: rank 1 gets the padding, window order[0] again).
TEST(TokenLoader, TwoRanksShareTheEpochsWindowsAsDistributedSampler) {
  TwoShards s;
  auto ds = s.open(s.d / "train_*.bin");
  const std::vector<int64_t> perm = sampler_permutation(ds->size(), 5, 2, Permutation::Torch);
  std::vector<int64_t> seen;
  for (int r = 0; r < 2; ++r) {
    const auto idx = sampler_indices(ds->size(), 2, r, true, 5, 2, false, Permutation::Torch);
    ASSERT_EQ(idx.size(), 4u);
    for (size_t k = 0; k < idx.size(); ++k) EXPECT_EQ(idx[k], perm[(2 * k + r) % 7]) << r << " " << k;
    Loader l(*ds, idx, 4, false, Transform{}, 0, 2, 3, BatchFormat::Tokens);
    Batch b;
    ASSERT_TRUE(l.next(b));
    for (int64_t k = 0; k < 4; ++k) {
      std::vector<uint16_t> w(5);
      ds->get_tokens(idx[k], w.data());
      EXPECT_EQ(b.x.data<int32_t>()[k * 4], w[0]);
      EXPECT_EQ(b.y.data<int32_t>()[k * 4 + 3], w[4]);
    }
    seen.insert(seen.end(), idx.begin(), idx.end());
  }
  std::sort(seen.begin(), seen.end());
  seen.erase(std::unique(seen.begin(), seen.end()), seen.end());
  EXPECT_EQ(seen, (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6}));
}

TEST(ByteShards, EveryByteIsATokenTheLastTenthEvaluates) {
  TempDir d;
  std::vector<uint8_t> text(2500);
  for (size_t i = 0; i < text.size(); ++i) text[i] = static_cast<uint8_t>((i * 37 + 11) % 256);
  testing::write(d / "in.txt", text);
  const ByteShards r = make_byte_shards(d / "in.txt", d / "out", {.val_fraction = 0.1, .shard_tokens = 1000});
  EXPECT_EQ(r.train_tokens, 2250);
  EXPECT_EQ(r.val_tokens, 250);
  ASSERT_EQ(r.train, (std::vector<std::string>{d / "out/train_000000.bin", d / "out/train_000001.bin",
                                               d / "out/train_000002.bin"}));
  ASSERT_EQ(r.val, (std::vector<std::string>{d / "out/val_000000.bin"}));
  // Read back byte for byte: each shard is the header and its bytes widened to uint16.
  const size_t bounds[] = {0, 1000, 2000, 2250};
  for (int k = 0; k < 3; ++k) {
    std::vector<uint16_t> want(text.begin() + bounds[k], text.begin() + bounds[k + 1]);
    EXPECT_EQ(read_file(r.train[k]), shard_bytes(want)) << k;
  }
  EXPECT_EQ(read_file(r.val[0]), shard_bytes(std::vector<uint16_t>(text.begin() + 2250, text.end())));
  auto ds = open_token_shards(d / "out/val_*.bin", {8, 256, "data.val_path"});
  EXPECT_EQ(ds->size(), (250 - 1) / 8);
}

TEST(ByteShards, BadInputsAreErrorsNamingTheFileOrOption) {
  TempDir d;
  testing::write(d / "one.txt", {65});
  EXPECT_EQ(user_error([&] { make_byte_shards(d / "one.txt", d / "out"); }),
            d / "one.txt" + ": 1 bytes, too few for a training and an evaluation split with --val-fraction 0.1 (each "
                            "needs at least one byte, and a model of block size T needs T + 1 per shard)");
  EXPECT_EQ(user_error([&] { make_byte_shards(d / "one.txt", d / "out", {.val_fraction = 1.0}); }),
            "--val-fraction 1: the evaluation split's share of the bytes must be between 0 and 1 (e.g. 0.1)");
  EXPECT_EQ(user_error([&] { make_byte_shards(d / "none.txt", d / "out"); }),
            d / "none.txt" + ": cannot open (No such file or directory)");
  EXPECT_FALSE(std::filesystem::exists(d / "out"));
}

}  // namespace
}  // namespace dp::data
