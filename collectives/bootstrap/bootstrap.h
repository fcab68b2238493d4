// defines: Bootstrap, how a process learns who it is (rank, size, local rank/size, node) and
// exchanges small blobs with its peers before any communicator exists. make_bootstrap
// (collectives/bootstrap/factory.h) picks an implementation: one file each in this folder.
#pragma once
#include <memory>
#include <string>
#include <vector>

namespace dp {

class Bootstrap {
 public:
  virtual ~Bootstrap() = default;
  virtual const char* kind() const = 0;  // "pmix", "pmi2", "env", "slurm", "file", "single"
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual int local_rank() const = 0;
  virtual int local_size() const = 0;
  virtual int node_id() const = 0;
  // Every rank contributes `mine` (any bytes, small: addresses, ids); returns all ranks' blobs
  // in rank order. Collective: every rank must call it, in the same order. Throws DpError naming
  // the missing ranks when peers do not arrive within the timeout.
  virtual std::vector<std::string> allgather(const std::string& mine) = 0;
  // The job's secret (collectives/bootstrap/job_token.h), the same on every rank once the
  // bootstrap is built: the ring's listeners ask every connection to prove it. "" for one process
  // (and for a bootstrap that has none: then the ring checks only its per-setup nonce).
  virtual const std::string& job_token() const;
  // `blob` from `root` to every rank (default: through allgather).
  virtual std::string broadcast(const std::string& blob, int root);
  virtual void barrier();
};

}  // namespace dp
