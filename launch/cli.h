// defines: run_cli, the dptrain command line (parsing, dispatch, error reporting).
#pragma once
#include "launch/exit_status.h"  // the exit statuses it returns

namespace dp::launch {
int run_cli(int argc, char** argv);
}
