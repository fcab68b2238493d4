#include "models/weights_import.h"

#include <regex>

namespace dp::models {

namespace {

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// Hugging Face's Conv1D layout: some c_attn.weight stored (C, 3C) instead of nn.Linear's (3C, C).
bool conv1d_layout(const std::vector<TensorSig>& file) {
  for (const auto& s : file)
    if (ends_with(s.name, ".attn.c_attn.weight") && s.shape.size() == 2 && s.shape[1] == 3 * s.shape[0]) return true;
  return false;
}

}  // namespace

WeightsTranslation gpt2_translation(const std::vector<TensorSig>& file) {
  WeightsTranslation t;
  bool gpt = false;
  for (const auto& s : file) gpt = gpt || s.name == "wte.weight" || s.name == "transformer.wte.weight";
  if (!gpt) return t;
  static const std::regex mask_buffer(R"(^(transformer\.)?h\.[0-9]+\.attn\.(bias|masked_bias)$)");
  const bool conv1d = conv1d_layout(file);
  bool renamed = false;
  for (const auto& s : file) {
    if (std::regex_match(s.name, mask_buffer)) {
      t.ignore.insert(s.name);
      continue;
    }
    if (s.name.rfind("transformer.", 0) != 0 && s.name.rfind("lm_head.", 0) != 0) {
      t.rename[s.name] = "transformer." + s.name;
      renamed = true;
    }
    for (const char* w : {".attn.c_attn.weight", ".attn.c_proj.weight", ".mlp.c_fc.weight", ".mlp.c_proj.weight"})
      if (conv1d && ends_with(s.name, w)) t.transpose.insert(s.name);
  }
  if (conv1d) t.kind = "Hugging Face GPT-2 (Conv1D weights transposed)";
  else if (renamed) t.kind = "GPT state_dict without the 'transformer.' prefix";
  else if (!t.ignore.empty()) t.kind = "GPT state_dict";
  if (!t.kind.empty() && !t.ignore.empty()) t.kind += ", its attention-mask buffers ignored";
  return t;
}

WeightsTranslator weights_translator(const ModelConfig& m) {
  if (m.preset != PresetKind::Gpt2) return {};
  return gpt2_translation;
}

}  // namespace dp::models
