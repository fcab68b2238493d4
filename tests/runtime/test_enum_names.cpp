// Name tables of the config's choice enums (runtime/enum_names.h): every entry round-trips
// between word and value, no word or value is listed twice, and the config schema parses each
// choice key into its enum from exactly those words.
#include <gtest/gtest.h>

#include <set>

#include "runtime/config.h"

namespace dp {
namespace {

template <NamedEnum E>
void expect_table_round_trips() {
  std::set<std::string_view> words;
  std::set<E> values;
  for (const auto& n : enum_names(E{})) {
    EXPECT_TRUE(words.insert(n.name).second) << "word listed twice: " << n.name;
    EXPECT_TRUE(values.insert(n.value).second) << "value listed twice: " << n.name;
    EXPECT_EQ(enum_name(n.value), n.name);
    ASSERT_TRUE(enum_from_name<E>(n.name).has_value()) << n.name;
    EXPECT_EQ(*enum_from_name<E>(n.name), n.value);
  }
  EXPECT_FALSE(enum_from_name<E>("no such word").has_value());
}

TEST(EnumNames, EveryChoiceTableRoundTrips) {
  expect_table_round_trips<LogLevel>();
  expect_table_round_trips<data::DatasetKind>();
  expect_table_round_trips<data::Permutation>();
  expect_table_round_trips<PresetKind>();
  expect_table_round_trips<optim::OptimizerKind>();
  expect_table_round_trips<optim::ScheduleKind>();
  expect_table_round_trips<cuda::DeviceRequest>();
  expect_table_round_trips<Precision>();
  expect_table_round_trips<CollectiveBackend>();
  expect_table_round_trips<GradCompress>();
}

TEST(EnumNames, ListsKeepTheTableOrderAndDropTheEmptyWordUnlessAsked) {
  EXPECT_EQ(enum_name_list<Precision>(), (std::vector<std::string>{"fp32", "bf16", "fp16"}));
  EXPECT_EQ(enum_name_list<PresetKind>(),
            (std::vector<std::string>{"mlp", "cnn", "resnet18", "resnet50", "cifar_resnet18", "gpt2"}));
  EXPECT_EQ(enum_name_list<PresetKind>(/*keep_empty=*/true).front(), "");
  EXPECT_EQ(enum_name(static_cast<Precision>(42)), "?");
}

TEST(EnumNames, TheSchemaParsesEveryChoiceKeyIntoItsEnum) {
  const Config c = parse_config(
      "[run]\nlog_level = \"debug\"\n[data]\ndataset = \"cifar10\"\npermutation = \"torch\"\nmean = [0.5, 0.5, 0.5]\n"
      "std = [0.25, 0.25, 0.25]\n[model]\npreset = \"cifar_resnet18\"\n[train]\noptimizer = \"sgd\"\n"
      "schedule = \"step\"\ndevice = \"cpu\"\nprecision = \"bf16\"\n[dist]\nbackend = \"nccl\"\ncompress = \"fp16\"\n",
      "m.cfg");
  EXPECT_EQ(c.run.log_level, LogLevel::Debug);
  EXPECT_EQ(c.data.dataset, data::DatasetKind::Cifar10);
  EXPECT_EQ(c.data.permutation, data::Permutation::Torch);
  EXPECT_EQ(c.model.preset, PresetKind::CifarResnet18);
  EXPECT_EQ(c.train.optimizer, optim::OptimizerKind::Sgd);
  EXPECT_EQ(c.train.schedule, optim::ScheduleKind::Step);
  EXPECT_EQ(c.train.device, cuda::DeviceRequest::Cpu);
  EXPECT_EQ(c.train.precision, Precision::Bf16);
  EXPECT_EQ(c.dist.backend, CollectiveBackend::Nccl);
  EXPECT_EQ(c.dist.compress, GradCompress::Fp16);
  // And the resolved config writes the words back.
  const std::string toml = to_toml(c);
  for (const char* line : {"log_level = 'debug'", "dataset = 'cifar10'", "permutation = 'torch'",
                           "preset = 'cifar_resnet18'", "optimizer = 'sgd'", "schedule = 'step'", "device = 'cpu'",
                           "precision = 'bf16'", "backend = 'nccl'", "compress = 'fp16'"})
    EXPECT_NE(toml.find(std::string("\n") + line + "\n"), std::string::npos) << line << " missing from\n" << toml;
}

TEST(EnumNames, AChoiceKeyTakesAStringAndOnlyItsWords) {
  auto error_of = [](const std::string& text, const std::vector<std::string>& ov = {}) -> std::string {
    try {
      parse_config(text, "m.cfg", ov);
    } catch (const UserError& e) {
      return e.what();
    }
    return "<no error>";
  };
  EXPECT_EQ(error_of("[model]\npreset = \"mlp\"\n[train]\nprecision = 16\n"),
            "m.cfg:4: train.precision must be a string, got an integer (16)");
  EXPECT_EQ(error_of("[model]\npreset = \"mlp\"\n", {"dist.compress=bf8"}),
            "--set dist.compress=bf8: dist.compress = \"bf8\" is not allowed (did you mean \"bf16\"?); use one of: "
            "none, bf16, fp16");
  EXPECT_EQ(error_of("[model]\npreset = \"mlp\"\n[data]\ndataset = \"cifar\"\n"),
            "m.cfg:4: data.dataset = \"cifar\" is not allowed (did you mean \"cifar10\"?); use one of: fashion_mnist, "
            "idx, cifar10, synthetic, image_folder, tar_shards, npy, tokens");
}

}  // namespace
}  // namespace dp
