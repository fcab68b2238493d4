// defines: DType (element types), their sizes and names (ours and safetensors').
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace dp {

enum class DType : uint8_t { F32, F16, BF16, F64, I32, I64, U8 };

size_t dtype_size(DType t);
// Short lower-case name used in configs and logs: "f32", "bf16", ...
const char* dtype_name(DType t);
// safetensors' spelling: "F32", "BF16", "I64", ...
const char* safetensors_dtype_name(DType t);
// Parse either spelling; throws UserError naming the allowed values.
DType parse_dtype(const std::string& s);
bool is_floating(DType t);

}  // namespace dp
