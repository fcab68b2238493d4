// defines: dptrain's exit statuses (what srun, dptrain --nproc and a script see): 0 done, 1 any
// other failure, kExitUserError, kExitCommunicationFailed, kExitDeviceOutOfMemory, 128 + n for a
// stop by signal n (SIGTERM, SIGINT) or a death by it.
#pragma once

namespace dp::launch {

// A bad cfg, command line or input file (a UserError): the same on every attempt, so
// dptrain --nproc --max-restarts never restarts a job for it (launch/restart_policy.h).
inline constexpr int kExitUserError = 2;
// A collective failed because of a peer or the network (a rank died, went silent or was cut
// off; collectives/communicator.h's CommunicationError). srun and dptrain --nproc pass it on.
inline constexpr int kExitCommunicationFailed = 3;
// The GPU ran out of memory (runtime/device_error.h's DeviceOutOfMemory): the error says what
// to lower; the last checkpoint is intact, and running again resumes from it.
inline constexpr int kExitDeviceOutOfMemory = 4;

}  // namespace dp::launch
