// defines: LayerSpec (a layer as written in a cfg or built by a preset), ArgSpec (what a layer
// type accepts), LayerArgs (validated arguments) and LayerRegistry (type name -> factory).
//
// Validation lives here, once, for every layer type: unknown keys (with the closest known key),
// wrong types, out-of-range values, missing required keys and unknown types (listing the known
// ones) all become one UserError line that names the cfg file and line.
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "runtime/layer.h"

namespace dp {

using ArgValue = std::variant<int64_t, double, bool, std::string>;

struct SourcePos {
  std::string file;  // empty for layers built in code
  int line = 0;
  std::string str() const;  // "model.cfg:12" or "<preset>"
};

struct LayerSpec {
  std::string type;
  std::string name;
  std::vector<std::string> inputs;  // empty: the previous layer (or the model input)
  std::map<std::string, ArgValue> args;
  SourcePos pos;                               // where the [[layer]] table starts
  std::map<std::string, SourcePos> arg_pos;    // where each key is
};

enum class ArgKind { Int, Float, Bool, String };

struct ArgSpec {
  std::string name;
  ArgKind kind = ArgKind::Int;
  std::optional<ArgValue> default_value;  // nullopt: required
  double min = -1e300, max = 1e300;       // for Int and Float
  std::vector<std::string> choices;       // for String
};

class LayerArgs {
 public:
  explicit LayerArgs(std::map<std::string, ArgValue> values) : values_(std::move(values)) {}
  int64_t i(const std::string& key) const;
  double f(const std::string& key) const;
  bool b(const std::string& key) const;
  const std::string& s(const std::string& key) const;

 private:
  const ArgValue& get(const std::string& key) const;
  std::map<std::string, ArgValue> values_;
};

using LayerFactory = std::function<std::unique_ptr<Layer>(const std::string& name, const LayerArgs& args)>;

class LayerRegistry {
 public:
  void add(const std::string& type, std::vector<ArgSpec> args, LayerFactory factory);
  bool has(const std::string& type) const { return entries_.count(type) != 0; }
  std::vector<std::string> types() const;
  const std::vector<ArgSpec>& arg_specs(const std::string& type) const;
  // Validates the spec (see above) and builds the layer.
  std::unique_ptr<Layer> create(const LayerSpec& spec) const;
  // Validation only: fills defaults, checks every key. Throws UserError.
  LayerArgs validate(const LayerSpec& spec) const;

 private:
  struct Entry {
    std::vector<ArgSpec> args;
    LayerFactory factory;
  };
  std::map<std::string, Entry> entries_;
};

}  // namespace dp
