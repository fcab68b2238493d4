// defines: make_pmi2_bootstrap (PMI2, loaded at run time) and the base64url coding of its values.
#pragma once
#include <memory>
#include <optional>
#include <string>

#include "collectives/bootstrap/bootstrap.h"

namespace dp {

// PMIx and PMI2, loaded at run time (dlopen), so the binary runs where they are absent
// (DPTRAIN_PMIX_LIB / DPTRAIN_PMI2_LIB name the library file when it is elsewhere).
std::unique_ptr<Bootstrap> make_pmi2_bootstrap(double timeout_s);
// PMI2 values are short strings: blobs travel as base64url without padding (RFC 4648 s. 5).
std::string base64url_encode(const std::string& bytes);
std::optional<std::string> base64url_decode(const std::string& text);  // nullopt when malformed

}  // namespace dp
