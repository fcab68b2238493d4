// defines: PresetKind (model.preset), the built-in models, and its name table: the one list of
// preset names. The config schema takes its allowed values from it, models/presets.cpp builds
// each kind (a switch the compiler checks for a missing case), dptrain --list-layers prints it.
#pragma once
#include <span>

#include "runtime/enum_names.h"

namespace dp {

// None ("") = no preset: the model is the cfg's [[layer]] list.
enum class PresetKind { None, Mlp, Cnn, Resnet18, Resnet50, CifarResnet18, Gpt2 };

inline constexpr EnumName<PresetKind> kPresetKindNames[] = {
    {PresetKind::None, ""},
    {PresetKind::Mlp, "mlp"},
    {PresetKind::Cnn, "cnn"},
    {PresetKind::Resnet18, "resnet18"},
    {PresetKind::Resnet50, "resnet50"},
    {PresetKind::CifarResnet18, "cifar_resnet18"},
    {PresetKind::Gpt2, "gpt2"}};
constexpr std::span<const EnumName<PresetKind>> enum_names(PresetKind) { return kPresetKindNames; }

}  // namespace dp
