// defines: CheckpointDir, the checkpoints/ folder of a run: step-<N>.safetensors files, the
// `latest` pointer, keeping the newest K, and resume_latest (newest good checkpoint, with
// fall-back over corrupt ones).
//
// Only rank 0 writes here. Each checkpoint file appears atomically (write_safetensors), then
// `latest` is rewritten atomically to name it, then older files beyond `keep` are deleted. A
// crash at any point leaves complete files only; resume takes the highest-numbered file that
// passes every check, which is the one `latest` names unless the crash fell between the two
// renames (`latest` is for people and tools: `ckptinfo <run>/checkpoints`).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "runtime/checkpoint/checkpoint.h"

namespace dp {

class CheckpointDir {
 public:
  explicit CheckpointDir(std::string dir);  // does not create it
  const std::string& path() const { return dir_; }
  // <dir>/step-00000012.safetensors (8 digits, more when the step needs them).
  std::string file_for(int64_t step) const;
  struct Entry {
    int64_t step;
    std::string path;
  };
  // The step-<N>.safetensors files, newest (highest step) first; other files are ignored.
  std::vector<Entry> list() const;
  // The file name `latest` holds ("" if there is none).
  std::string latest() const;
  // After file_for(step) is in place: creates nothing, points `latest` at it (atomically, with
  // fsync), then deletes all but the newest `keep` checkpoints (keep = 0: delete none).
  void commit(int64_t step, int64_t keep) const;
  // Creates the folder and deletes leftovers of an interrupted write (*.tmp).
  void prepare() const;
  // Deletes every checkpoint and `latest` (starting over); returns how many files went.
  int remove_all() const;
  // Moves the checkpoints numbered above `step` into the subfolder `sub` (created), so that the
  // newest number is again the newest position: a run resumed at another world size renumbers its
  // steps (launch/train_setup.h step_at_position), and the earlier run's higher numbers would
  // otherwise shadow its new checkpoints. Returns the file names moved.
  std::vector<std::string> move_above(int64_t step, const std::string& sub) const;

 private:
  std::string dir_;
};

// Why a checkpoint was passed over, for the caller's messages.
struct SkippedCheckpoint {
  std::string path, reason;
};
struct ResumePoint {
  std::string path;
  CheckpointMeta meta;
  std::vector<SkippedCheckpoint> skipped;  // newer checkpoints that failed their checks
};

// Loads the newest checkpoint of `dir` that passes load_checkpoint's checks into model and
// opt (pieces: load_checkpoint's, the elements whose state opt holds; empty: all), logging a
// warning for each newer one that does not. Returns nullopt when the folder holds no checkpoint;
// throws UserError (with the newest one's reason) when none is usable.
std::optional<ResumePoint> resume_latest(const CheckpointDir& dir, Graph& model, optim::Optimizer& opt,
                                         const std::vector<optim::ArenaPiece>& pieces = {});

}  // namespace dp
