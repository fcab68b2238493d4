// defines: run_cli, the dptrain command line (parsing, dispatch, error reporting).
#pragma once

namespace dp::launch {
int run_cli(int argc, char** argv);
}
