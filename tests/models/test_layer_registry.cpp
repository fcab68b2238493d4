// The built-in layer registry: the registered types and their arguments, and the exact
// messages LayerRegistry::validate gives for each kind of mistake in a cfg file.
#include <gtest/gtest.h>

#include "models/registry.h"

namespace dp::models {
namespace {

LayerSpec spec_at(const std::string& type, const std::string& name, std::map<std::string, ArgValue> args) {
  LayerSpec s;
  s.type = type;
  s.name = name;
  s.args = std::move(args);
  s.pos = {"m.cfg", 7};
  int line = 8;
  for (const auto& [k, v] : s.args) s.arg_pos[k] = {"m.cfg", line++};  // keys in map order, one per line
  return s;
}

std::string validate_error(const LayerSpec& s) {
  try {
    layer_registry().validate(s);
  } catch (const UserError& e) {
    return e.what();
  }
  return "<no error>";
}

TEST(LayerRegistry, RegistersEveryLayerType) {
  EXPECT_EQ(layer_registry().types(),
            (std::vector<std::string>{"add", "avgpool2d", "batchnorm2d", "causal_self_attention", "conv2d", "dropout",
                                      "embedding", "flatten", "gelu", "global_avgpool", "layernorm", "linear",
                                      "maxpool2d", "position_embedding", "relu"}));
}

TEST(LayerRegistry, ArgumentNamesAndDefaults) {
  auto names = [](const std::string& type) {
    std::vector<std::string> out;
    for (const auto& a : layer_registry().arg_specs(type)) out.push_back(a.name);
    return out;
  };
  EXPECT_EQ(names("linear"),
            (std::vector<std::string>{"out_features", "bias", "init_std", "tie_weight", "pad_out_to"}));
  EXPECT_EQ(names("embedding"), (std::vector<std::string>{"num_embeddings", "embedding_dim", "init_std"}));
  EXPECT_EQ(names("position_embedding"), (std::vector<std::string>{"num_positions", "init_std"}));
  EXPECT_EQ(names("layernorm"), (std::vector<std::string>{"eps", "bias"}));
  EXPECT_EQ(names("gelu"), (std::vector<std::string>{"approximate"}));
  EXPECT_EQ(names("causal_self_attention"), (std::vector<std::string>{"n_head", "bias", "dropout", "resid_dropout",
                                                                      "init_std", "proj_init_std", "sdpa"}));
  EXPECT_EQ(names("conv2d"),
            (std::vector<std::string>{"out_channels", "kernel", "stride", "padding", "groups", "bias", "init"}));
  EXPECT_EQ(names("batchnorm2d"), (std::vector<std::string>{"momentum", "eps"}));
  EXPECT_EQ(names("maxpool2d"), (std::vector<std::string>{"kernel", "stride", "padding"}));
  EXPECT_EQ(names("avgpool2d"), (std::vector<std::string>{"kernel", "stride", "padding"}));
  EXPECT_EQ(names("dropout"), (std::vector<std::string>{"p"}));
  for (const char* t : {"relu", "global_avgpool", "flatten", "add"}) EXPECT_TRUE(names(t).empty()) << t;

  LayerArgs conv = layer_registry().validate(spec_at("conv2d", "c1", {{"out_channels", int64_t{8}}, {"kernel", int64_t{3}}}));
  EXPECT_EQ(conv.i("stride"), 1);
  EXPECT_EQ(conv.i("padding"), 0);
  EXPECT_EQ(conv.i("groups"), 1);
  EXPECT_TRUE(conv.b("bias"));
  EXPECT_EQ(conv.s("init"), "default");
  LayerArgs bn = layer_registry().validate(spec_at("batchnorm2d", "bn", {}));
  EXPECT_DOUBLE_EQ(bn.f("momentum"), 0.1);
  EXPECT_DOUBLE_EQ(bn.f("eps"), 1e-5);
  EXPECT_DOUBLE_EQ(layer_registry().validate(spec_at("dropout", "d", {})).f("p"), 0.5);
  EXPECT_EQ(layer_registry().validate(spec_at("maxpool2d", "p", {{"kernel", int64_t{2}}})).i("stride"), 0);
}

TEST(LayerRegistry, UnknownTypeListsKnownTypes) {
  EXPECT_EQ(validate_error(spec_at("conv", "c1", {})),
            "m.cfg:7: layer 'c1': unknown layer type 'conv' (did you mean 'conv2d'?); known types: add, avgpool2d, "
            "batchnorm2d, causal_self_attention, conv2d, dropout, embedding, flatten, gelu, global_avgpool, layernorm, "
            "linear, maxpool2d, position_embedding, relu");
  EXPECT_EQ(validate_error(spec_at("transformer", "t", {})),
            "m.cfg:7: layer 't': unknown layer type 'transformer'; known types: add, avgpool2d, batchnorm2d, "
            "causal_self_attention, conv2d, dropout, embedding, flatten, gelu, global_avgpool, layernorm, linear, "
            "maxpool2d, position_embedding, relu");
}

TEST(LayerRegistry, UnknownKeySuggestsClosest) {
  EXPECT_EQ(validate_error(spec_at("conv2d", "c1", {{"kernel", int64_t{3}}, {"out_channels", int64_t{8}},
                                                     {"strid", int64_t{2}}})),
            "m.cfg:10: layer 'c1' (conv2d): unknown key 'strid' (did you mean 'stride'?); valid keys: out_channels, "
            "kernel, stride, padding, groups, bias, init");
}

TEST(LayerRegistry, WrongType) {
  EXPECT_EQ(validate_error(spec_at("conv2d", "c1", {{"kernel", std::string("3")}, {"out_channels", int64_t{8}}})),
            "m.cfg:8: layer 'c1' (conv2d): key 'kernel' must be an integer, got a string (\"3\")");
  EXPECT_EQ(validate_error(spec_at("linear", "fc", {{"bias", int64_t{1}}, {"out_features", int64_t{10}}})),
            "m.cfg:8: layer 'fc' (linear): key 'bias' must be true or false, got an integer (1)");
}

TEST(LayerRegistry, OutOfRange) {
  EXPECT_EQ(validate_error(spec_at("conv2d", "c1", {{"kernel", int64_t{3}}, {"out_channels", int64_t{8}},
                                                     {"stride", int64_t{0}}})),
            "m.cfg:10: layer 'c1' (conv2d): key 'stride' = 0 is out of range [1, inf]");
  EXPECT_EQ(validate_error(spec_at("dropout", "d", {{"p", 1.0}})),
            "m.cfg:8: layer 'd' (dropout): key 'p' = 1 is out of range [0, 0.999999]");
  EXPECT_EQ(validate_error(spec_at("batchnorm2d", "bn", {{"momentum", 1.5}})),
            "m.cfg:8: layer 'bn' (batchnorm2d): key 'momentum' = 1.5 is out of range [0, 1]");
  EXPECT_EQ(validate_error(spec_at("batchnorm2d", "bn", {{"eps", 0.0}})),
            "m.cfg:8: layer 'bn' (batchnorm2d): key 'eps' = 0 is out of range [1e-12, inf]");
}

TEST(LayerRegistry, MissingRequiredKey) {
  EXPECT_EQ(validate_error(spec_at("conv2d", "c1", {{"out_channels", int64_t{8}}})),
            "m.cfg:7: layer 'c1' (conv2d): missing required key 'kernel' (an integer)");
  EXPECT_EQ(validate_error(spec_at("linear", "fc", {})),
            "m.cfg:7: layer 'fc' (linear): missing required key 'out_features' (an integer)");
}

TEST(LayerRegistry, StringChoice) {
  EXPECT_EQ(validate_error(spec_at("conv2d", "c1", {{"init", std::string("xavier")}, {"kernel", int64_t{3}},
                                                     {"out_channels", int64_t{8}}})),
            "m.cfg:8: layer 'c1' (conv2d): key 'init' = \"xavier\" is not allowed; use one of: default, "
            "kaiming_normal_fan_out");
}

}  // namespace
}  // namespace dp::models
