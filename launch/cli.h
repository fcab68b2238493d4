// defines: run_cli, the dptrain command line (parsing, dispatch, error reporting).
#pragma once

namespace dp::launch {

// dptrain's exit status when a collective failed because of a peer or the network (a rank died,
// went silent or was cut off; collectives/communicator.h's CommunicationError). srun and
// dptrain --nproc pass it on.
inline constexpr int kExitCommunicationFailed = 3;
int run_cli(int argc, char** argv);
}
