// defines: make_pmix_bootstrap (PMIx, loaded at run time).
#pragma once
#include <memory>

#include "collectives/bootstrap/bootstrap.h"

namespace dp {

// PMIx and PMI2, loaded at run time (dlopen), so the binary runs where they are absent
// (DPTRAIN_PMIX_LIB / DPTRAIN_PMI2_LIB name the library file when it is elsewhere).
std::unique_ptr<Bootstrap> make_pmix_bootstrap(double timeout_s);

}  // namespace dp
