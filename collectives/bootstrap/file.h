// defines: make_file_bootstrap, the rendezvous through a shared directory.
#pragma once
#include <memory>
#include <string>

#include "collectives/bootstrap/common.h"

namespace dp {

// Rendezvous through a directory every rank can see (file:///shared/dir): see bootstrap_file.cpp.
std::unique_ptr<Bootstrap> make_file_bootstrap(const std::string& dir, double timeout_s, const EnvLookup& env);

}  // namespace dp
