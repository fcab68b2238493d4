#include "runtime/layer_registry.h"

#include <cmath>

#include "runtime/suggest.h"

namespace dp {

std::string SourcePos::str() const { return file.empty() ? "<preset>" : fmt::format("{}:{}", file, line); }

namespace {
const char* kind_name(ArgKind k) {
  switch (k) {
    case ArgKind::Int: return "an integer";
    case ArgKind::Float: return "a number";
    case ArgKind::Bool: return "true or false";
    case ArgKind::String: return "a string";
  }
  return "?";
}

const char* value_kind(const ArgValue& v) {
  switch (v.index()) {
    case 0: return "an integer";
    case 1: return "a float";
    case 2: return "a boolean";
    default: return "a string";
  }
}

std::string value_str(const ArgValue& v) {
  switch (v.index()) {
    case 0: return std::to_string(std::get<int64_t>(v));
    case 1: return fmt::format("{}", std::get<double>(v));
    case 2: return std::get<bool>(v) ? "true" : "false";
    default: return "\"" + std::get<std::string>(v) + "\"";
  }
}

std::string fmt_num(double x) { return fmt::format("{}", x); }
}  // namespace

const ArgValue& LayerArgs::get(const std::string& key) const {
  auto it = values_.find(key);
  DP_CHECK(it != values_.end(), "layer argument '{}' was not declared", key);
  return it->second;
}
int64_t LayerArgs::i(const std::string& key) const { return std::get<int64_t>(get(key)); }
double LayerArgs::f(const std::string& key) const {
  const auto& v = get(key);
  if (v.index() == 0) return static_cast<double>(std::get<int64_t>(v));
  return std::get<double>(v);
}
bool LayerArgs::b(const std::string& key) const { return std::get<bool>(get(key)); }
const std::string& LayerArgs::s(const std::string& key) const { return std::get<std::string>(get(key)); }

void LayerRegistry::add(const std::string& type, std::vector<ArgSpec> args, LayerFactory factory) {
  DP_CHECK(!has(type), "layer type '{}' registered twice", type);
  entries_[type] = Entry{std::move(args), std::move(factory)};
}

std::vector<std::string> LayerRegistry::types() const {
  std::vector<std::string> out;
  for (const auto& [k, v] : entries_) out.push_back(k);
  return out;
}

const std::vector<ArgSpec>& LayerRegistry::arg_specs(const std::string& type) const { return entries_.at(type).args; }

LayerArgs LayerRegistry::validate(const LayerSpec& spec) const {
  const std::string where = spec.pos.str();
  auto it = entries_.find(spec.type);
  if (it == entries_.end()) {
    std::string near = closest_match(spec.type, types());
    DP_THROW_USER("{}: layer '{}': unknown layer type '{}'{}; known types: {}", where, spec.name, spec.type,
                  near.empty() ? "" : fmt::format(" (did you mean '{}'?)", near), join(types()));
  }
  const auto& specs = it->second.args;
  std::vector<std::string> known;
  for (const auto& a : specs) known.push_back(a.name);
  auto pos_of = [&](const std::string& key) {
    auto p = spec.arg_pos.find(key);
    return p == spec.arg_pos.end() ? where : p->second.str();
  };
  for (const auto& [key, value] : spec.args) {
    bool found = false;
    for (const auto& a : specs) found = found || a.name == key;
    if (!found) {
      std::string near = closest_match(key, known);
      DP_THROW_USER("{}: layer '{}' ({}): unknown key '{}'{}; valid keys: {}", pos_of(key), spec.name, spec.type, key,
                    near.empty() ? "" : fmt::format(" (did you mean '{}'?)", near),
                    known.empty() ? std::string("none") : join(known));
    }
  }
  std::map<std::string, ArgValue> values;
  for (const auto& a : specs) {
    auto v = spec.args.find(a.name);
    if (v == spec.args.end()) {
      if (!a.default_value)
        DP_THROW_USER("{}: layer '{}' ({}): missing required key '{}' ({})", where, spec.name, spec.type, a.name,
                      kind_name(a.kind));
      values[a.name] = *a.default_value;
      continue;
    }
    ArgValue val = v->second;
    bool ok = (a.kind == ArgKind::Int && val.index() == 0) || (a.kind == ArgKind::Float && val.index() <= 1) ||
              (a.kind == ArgKind::Bool && val.index() == 2) || (a.kind == ArgKind::String && val.index() == 3);
    if (!ok)
      DP_THROW_USER("{}: layer '{}' ({}): key '{}' must be {}, got {} ({})", pos_of(a.name), spec.name, spec.type,
                    a.name, kind_name(a.kind), value_kind(val), value_str(val));
    if (a.kind == ArgKind::Int || a.kind == ArgKind::Float) {
      double x = val.index() == 0 ? static_cast<double>(std::get<int64_t>(val)) : std::get<double>(val);
      if (!(x >= a.min && x <= a.max))
        DP_THROW_USER("{}: layer '{}' ({}): key '{}' = {} is out of range [{}, {}]", pos_of(a.name), spec.name,
                      spec.type, a.name, value_str(val), fmt_num(a.min),
                      a.max >= 1e300 ? std::string("inf") : fmt_num(a.max));
    }
    if (a.kind == ArgKind::String && !a.choices.empty()) {
      bool in = false;
      for (const auto& c : a.choices) in = in || c == std::get<std::string>(val);
      if (!in)
        DP_THROW_USER("{}: layer '{}' ({}): key '{}' = {} is not allowed; use one of: {}", pos_of(a.name), spec.name,
                      spec.type, a.name, value_str(val), join(a.choices));
    }
    values[a.name] = val;
  }
  return LayerArgs(std::move(values));
}

std::unique_ptr<Layer> LayerRegistry::create(const LayerSpec& spec) const {
  LayerArgs args = validate(spec);
  return entries_.at(spec.type).factory(spec.name, args);
}

}  // namespace dp
