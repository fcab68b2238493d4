// defines: run_cli, the dptrain command line (parsing, dispatch, error reporting).
#pragma once

namespace dp::launch {

// dptrain's exit status when a collective failed because of a peer or the network (a rank died,
// went silent or was cut off; collectives/communicator.h's CommunicationError). srun and
// dptrain --nproc pass it on.
inline constexpr int kExitCommunicationFailed = 3;
// dptrain's exit status when the GPU ran out of memory (runtime/device_error.h's
// DeviceOutOfMemory): the error says what to lower; the last checkpoint is intact, and running
// again resumes from it. 1 is any other failure, 2 a bad cfg or input.
inline constexpr int kExitDeviceOutOfMemory = 4;
int run_cli(int argc, char** argv);
}
