// defines: EnumName and the lookups over a choice enum's name table (enum_name, enum_from_name,
// enum_name_list): the one place where the words of a config choice are spelled.
//
// A choice enum declares its table next to itself, with an ADL hook that returns it:
//   enum class Precision { Fp32, Bf16, Fp16 };
//   inline constexpr EnumName<Precision> kPrecisionNames[] = {{Precision::Fp32, "fp32"}, ...};
//   constexpr std::span<const EnumName<Precision>> enum_names(Precision) { return kPrecisionNames; }
// The config schema (runtime/config.cpp) takes a choice key's allowed values, its error
// messages, the resolved TOML and the reference from that table, once; the code that acts on the
// choice switches on the enum (without a default, so the compiler names a case left out).
#pragma once
#include <concepts>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace dp {

template <class E>
struct EnumName {
  E value;
  std::string_view name;
};

// E has a name table (found by argument-dependent lookup in E's namespace).
template <class E>
concept NamedEnum = std::is_enum_v<E> && requires(E e) {
  { enum_names(e) } -> std::convertible_to<std::span<const EnumName<E>>>;
};

// The word for `v`; "?" for a value outside the table (a cast from a bad integer: a bug).
template <NamedEnum E>
constexpr std::string_view enum_name(E v) {
  for (const auto& n : enum_names(E{}))
    if (n.value == v) return n.name;
  return "?";
}

// The value spelled `word`; nullopt when no entry is (the caller words the error).
template <NamedEnum E>
constexpr std::optional<E> enum_from_name(std::string_view word) {
  for (const auto& n : enum_names(E{}))
    if (n.name == word) return n.value;
  return std::nullopt;
}

// The words in table order; an empty word (a "none of these" entry such as model.preset = "")
// only with keep_empty.
template <NamedEnum E>
std::vector<std::string> enum_name_list(bool keep_empty = false) {
  std::vector<std::string> out;
  for (const auto& n : enum_names(E{}))
    if (keep_empty || !n.name.empty()) out.emplace_back(n.name);
  return out;
}

}  // namespace dp
