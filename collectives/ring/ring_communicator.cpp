#include "collectives/ring/ring_communicator.h"

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <optional>
#include <mutex>
#include <thread>

#include "collectives/collective_tag.h"
#include "collectives/device_staging.h"
#include "collectives/ring/algorithms.h"
#include "collectives/ring/control.h"
#include "collectives/ring/mesh.h"
#include "collectives/ring/transport.h"
#include "base/error.h"
#include "runtime/log.h"

namespace dp {
namespace {

using ring::Algo;
using ring::Kind;
using kernels::cpu::ReduceKind;

ReduceKind kind_of(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Avg: return ReduceKind::Sum;
    case ReduceOp::Max: return ReduceKind::Max;
    case ReduceOp::Min: return ReduceKind::Min;
  }
  return ReduceKind::Sum;
}

// A ring collective's Work: described from its CollectiveInfo when first asked.
class RingWork final : public Work {
 public:
  explicit RingWork(const ring::CollectiveInfo& info) : Work(info.seq), info_(info) {}

 private:
  std::string describe() const override { return info_.description(); }
  const ring::CollectiveInfo info_;
};

class RingCommunicator final : public Communicator {
 public:
  RingCommunicator(Bootstrap& bs, const RingOptions& opt)
      : rank_(bs.rank()), size_(bs.size()), opt_(opt), topology_(ring::exchange_topology(bs)),
        flight_(opt.flight_records) {
    std::string host = opt.listen_host.empty() ? ring::ring_listen_host(bs, opt.iface) : opt.listen_host;
    ring::Mesh mesh = ring::connect_mesh(bs, host, opt.socket_buffer_bytes, opt.shm_fifo_bytes, opt.timeout_s);
    // The control plane rings our doorbell on every event, so that a collective asleep on shared
    // memory hears about failures too.
    ring::Doorbell bell = mesh.shm.own_bell;
    control_ = std::make_unique<ring::ControlPlane>(rank_, size_, std::move(mesh.control), [bell] {
      if (bell.valid()) bell.ring();
    });
    // The spin yields: fine with more ranks than cores too (ring_communicator.h).
    transport_ = std::make_unique<ring::Transport>(rank_, size_, std::move(mesh.data), std::move(mesh.shm), *control_,
                                                   opt.timeout_s, opt.spin_us,
                                                   bs.local_size() <= static_cast<int>(std::thread::hardware_concurrency()));
    transport_->set_topology(&topology_);
    hierarchical_ = opt.hierarchical && topology_.hierarchical();
    worker_ = std::thread([this] { loop(); });
    log::get("coll")->debug("ring communicator up: {} ranks, listening on {}, {} peers over shared memory{}", size_,
                            host, transport_->shm_peers(),
                            hierarchical_ ? fmt::format(", hierarchical all-reduce ({} leaders)", topology_.nodes())
                                          : "");
  }

  ~RingCommunicator() override {
    bool in_flight;
    {
      std::lock_guard lock(mu_);
      stop_ = true;
      // Issued but not finished: not busy_, which the worker clears only after the Work it
      // finished has woken its waiter, who may be here already (a false alarm that broke the
      // peers' last collective under load).
      in_flight = finished_ != seq_;
    }
    if (in_flight)  // give up on them rather than wait
      control_->fail(ring::Failure{-1, rank_, 0,
                                   fmt::format("rank {} destroyed its communicator with collectives in flight", rank_)});
    cv_.notify_all();
    worker_.join();
    control_.reset();  // BYE to every peer first, so that a peer reading our closed data
    transport_.reset();  // sockets knows we left cleanly
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const char* backend() const override { return "ring"; }

  WorkPtr allreduce_async(const Tensor& t, ReduceOp op) override { return allreduce_impl(t, op, false, nullptr); }
  WorkPtr allreduce_stream_async(const Tensor& t, ReduceOp op, void* stream) override {
    check_stream_tensor(t, backend(), "allreduce_stream_async");
    return allreduce_impl(t, op, false, stream);
  }
  WorkPtr broadcast_async(const Tensor& t, int root) override { return broadcast_impl(t, root, false); }
  WorkPtr allgather_async(const Tensor& in, const Tensor& out) override { return allgather_impl(in, out, false); }
  WorkPtr reduce_scatter_async(const Tensor& in, const Tensor& out, ReduceOp op) override {
    return reduce_scatter_impl(in, out, op, false);
  }
  WorkPtr barrier_async() override { return barrier_impl(false); }
  WorkPtr reduce_scatter_blocks_async(const Tensor& t, ReduceOp op) override {
    return reduce_scatter_blocks_impl(t, op, nullptr);
  }
  WorkPtr reduce_scatter_blocks_stream_async(const Tensor& t, ReduceOp op, void* stream) override {
    check_stream_tensor(t, backend(), "reduce_scatter_blocks_stream_async");
    return reduce_scatter_blocks_impl(t, op, stream);
  }
  // A device tensor: only block rank() travels in (what this rank sends first) and every block
  // comes back out (the others' blocks; block rank() comes back as it went).
  WorkPtr allgather_blocks_async(const Tensor& t) override {
    check_collective_dtype(t, "ring allgather_blocks");
    const Algo algo = size_ == 1 || t.numel() == 0 ? Algo::Local : Algo::Ring;
    DeviceStaging::LeasePtr lease = algo == Algo::Local ? nullptr : lease_for(t, t.nbytes());
    if (lease) {
      const ring::Block mine = ring::ring_block(t.numel(), size_, rank_);
      if (mine.len > 0)
        lease->copy_in(t.slice_flat(mine.begin, {mine.len}), static_cast<size_t>(mine.begin) * dtype_size(t.dtype()),
                       nullptr);
    }
    return submit(false, Kind::Allgather, t.dtype(), std::nullopt, algo, t.numel(), -1, [this, t, algo, lease] {
      if (algo != Algo::Ring) return;
      char* buf = lease ? lease->host() : static_cast<char*>(t.raw());
      if (lease) lease->wait_in();
      ring::ring_allgather_blocks(*transport_, buf, t.numel(), t.dtype(), opt_.piece_bytes);
      if (lease) lease->copy_out(0, t);
    });
  }
  void allreduce(const Tensor& t, ReduceOp op) override { allreduce_impl(t, op, true, nullptr)->wait(); }
  void broadcast(const Tensor& t, int root) override { broadcast_impl(t, root, true)->wait(); }
  void allgather(const Tensor& in, const Tensor& out) override { allgather_impl(in, out, true)->wait(); }
  void reduce_scatter(const Tensor& in, const Tensor& out, ReduceOp op) override {
    reduce_scatter_impl(in, out, op, true)->wait();
  }
  void barrier() override { barrier_impl(true)->wait(); }

  void abort(const std::string& reason) override {
    const ring::Failure f = control_->fail(ring::Failure{-1, rank_, 0,
                                                         fmt::format("rank {} aborted the communicator: {}", rank_,
                                                                     reason.empty() ? "abort() called" : reason)});
    write_flight_record_once(f.reason);
  }

  FlightRecorder* flight_recorder() override { return &flight_; }
  void write_flight_record(const std::string& why) override { flight_.write(flight_context(), why); }
  std::vector<int> shared_memory_peers() const override {
    std::vector<int> peers;
    for (int p = 0; p < size_; ++p)
      if (p != rank_ && transport_->shm_link(p)) peers.push_back(p);
    return peers;
  }
  std::vector<std::string> rank_hosts() const override { return topology_.hosts(); }

 private:
  // Device tensors go through pinned host memory (collectives/device_staging.h): a lease of
  // `bytes` for a collective on t's device, or null for host tensors and empty ones. The copy in
  // is issued here, on the issuing thread (on `stream`, or the staging stream: the caller's data
  // is ready by the contract), by the callers below; the collective's executor waits for it.
  DeviceStaging::LeasePtr lease_for(const Tensor& t, size_t bytes) {
    if (!t.device().is_cuda() || bytes == 0) return nullptr;
    return staging_.acquire(bytes, t.device().index);
  }

  // here: the caller blocks on the result (a blocking form), so run it on this thread if nothing
  // is queued or running. stream: the stream-ordered form's stream (null otherwise).
  WorkPtr allreduce_impl(const Tensor& t, ReduceOp op, bool here, void* stream) {
    check_collective_dtype(t, "ring allreduce");
    const size_t bytes = t.nbytes();
    Algo algo = size_ == 1 || t.numel() == 0 ? Algo::Local
                : hierarchical_              ? Algo::Hierarchical
                : bytes <= opt_.small_bytes  ? Algo::RecursiveDoubling
                                             : Algo::Ring;
    DeviceStaging::LeasePtr lease = lease_for(t, bytes);
    if (lease) lease->copy_in(t, 0, stream);
    return submit(here, Kind::Allreduce, t.dtype(), op, algo, t.numel(), -1, [this, t, op, algo, lease] {
      const int divisor = op == ReduceOp::Avg ? size_ : 0;
      char* buf = lease ? lease->host() : static_cast<char*>(t.raw());
      if (lease) lease->wait_in();
      if (algo == Algo::RecursiveDoubling)
        ring::recursive_doubling_allreduce(*transport_, buf, t.numel(), t.dtype(), kind_of(op), divisor);
      else if (algo == Algo::Ring)
        ring::ring_allreduce(*transport_, buf, t.numel(), t.dtype(), kind_of(op), divisor, opt_.piece_bytes);
      else if (algo == Algo::Hierarchical)
        ring::hierarchical_allreduce(*transport_, topology_, buf, t.numel(), t.dtype(), kind_of(op), divisor,
                                     opt_.small_bytes, opt_.piece_bytes);
      if (lease) lease->copy_out(0, t);
    });
  }

  // ZeRO's in-place block reduce-scatter. Where the all-reduce would not run the flat ring
  // (recursive doubling for small tensors, hierarchical over nodes, one rank) its order is not
  // the ring's: then the whole all-reduce runs, so that block rank() has exactly its bits either
  // way. A device tensor: all of it travels in, block rank() comes back out (stream: as
  // allreduce_impl's).
  WorkPtr reduce_scatter_blocks_impl(const Tensor& t, ReduceOp op, void* stream) {
    check_collective_dtype(t, "ring reduce_scatter_blocks");
    if (size_ == 1 || t.numel() == 0 || hierarchical_ || t.nbytes() <= opt_.small_bytes)
      return allreduce_impl(t, op, false, stream);
    DeviceStaging::LeasePtr lease = lease_for(t, t.nbytes());
    if (lease) lease->copy_in(t, 0, stream);
    return submit(false, Kind::ReduceScatter, t.dtype(), op, Algo::Ring, t.numel(), -1, [this, t, op, lease] {
      char* buf = lease ? lease->host() : static_cast<char*>(t.raw());
      if (lease) lease->wait_in();
      ring::ring_reduce_scatter_blocks(*transport_, buf, t.numel(), t.dtype(), kind_of(op),
                                       op == ReduceOp::Avg ? size_ : 0, opt_.piece_bytes);
      const ring::Block mine = ring::ring_block(t.numel(), size_, rank_);
      if (lease && mine.len > 0)
        lease->copy_out(static_cast<size_t>(mine.begin) * dtype_size(t.dtype()), t.slice_flat(mine.begin, {mine.len}));
    });
  }

  WorkPtr broadcast_impl(const Tensor& t, int root, bool here) {
    check_collective_dtype(t, "ring broadcast");
    DP_CHECK(root >= 0 && root < size_, "ring broadcast: root {} is not a rank of a world of {}", root, size_);
    Algo algo = size_ == 1 || t.numel() == 0  ? Algo::Local
                : t.nbytes() <= opt_.small_bytes ? Algo::BinomialTree
                                                 : Algo::Chain;
    // A device tensor: only the root's data travels, so only the root copies it in; one rank
    // has nothing to do.
    DeviceStaging::LeasePtr lease = algo == Algo::Local ? nullptr : lease_for(t, t.nbytes());
    if (lease && rank_ == root) lease->copy_in(t, 0, nullptr);
    return submit(here, Kind::Broadcast, t.dtype(), std::nullopt, algo, t.numel(), root, [this, t, root, algo, lease] {
      char* buf = lease ? lease->host() : static_cast<char*>(t.raw());
      if (lease) lease->wait_in();
      if (algo == Algo::BinomialTree) ring::binomial_broadcast(*transport_, buf, t.nbytes(), root);
      else if (algo == Algo::Chain)
        ring::chain_broadcast(*transport_, buf, t.nbytes(), root, opt_.piece_bytes);
      if (lease && rank_ != root) lease->copy_out(0, t);
    });
  }

  WorkPtr allgather_impl(const Tensor& in, const Tensor& out, bool here) {
    check_allgather_shapes(in, out, size_, "ring allgather");
    Algo algo = size_ == 1 || in.numel() == 0 ? Algo::Local : Algo::Ring;
    // Device tensors: one staging buffer holds in (first) and out (after it).
    DeviceStaging::LeasePtr lease = algo == Algo::Local ? nullptr : lease_for(in, in.nbytes() + out.nbytes());
    if (lease) lease->copy_in(in, 0, nullptr);
    return submit(here, Kind::Allgather, in.dtype(), std::nullopt, algo, out.numel(), -1, [this, in, out, algo, lease] {
      if (algo == Algo::Ring) {
        if (lease) lease->wait_in();
        const char* src = lease ? lease->host() : static_cast<const char*>(in.raw());
        char* dst = lease ? lease->host() + in.nbytes() : static_cast<char*>(out.raw());
        ring::ring_allgather(*transport_, src, dst, in.numel(), in.dtype(), opt_.piece_bytes);
        if (lease) lease->copy_out(in.nbytes(), out);
      } else if (in.numel() > 0) {
        out.reshape(in.shape()).copy_from(in);  // host or device: one rank's gather is a copy
      }
    });
  }

  WorkPtr reduce_scatter_impl(const Tensor& in, const Tensor& out, ReduceOp op, bool here) {
    check_reduce_scatter_shapes(in, out, size_, "ring reduce_scatter");
    Algo algo = size_ == 1 || out.numel() == 0 ? Algo::Local : Algo::Ring;
    // Device tensors: one staging buffer holds in (first) and out (after it).
    DeviceStaging::LeasePtr lease = algo == Algo::Local ? nullptr : lease_for(in, in.nbytes() + out.nbytes());
    if (lease) lease->copy_in(in, 0, nullptr);
    return submit(here, Kind::ReduceScatter, in.dtype(), op, algo, in.numel(), -1, [this, in, out, op, algo, lease] {
      if (algo == Algo::Ring) {
        if (lease) lease->wait_in();
        const char* src = lease ? lease->host() : static_cast<const char*>(in.raw());
        char* dst = lease ? lease->host() + in.nbytes() : static_cast<char*>(out.raw());
        ring::ring_reduce_scatter(*transport_, src, dst, out.numel(), in.dtype(), kind_of(op),
                                  op == ReduceOp::Avg ? size_ : 0, opt_.piece_bytes);
        if (lease) lease->copy_out(in.nbytes(), out);
      } else if (out.numel() > 0)
        out.reshape(in.shape()).copy_from(in);  // one rank: the average of one value is itself
    });
  }

  WorkPtr barrier_impl(bool here) {
    Algo algo = size_ == 1 ? Algo::Local : Algo::Dissemination;
    return submit(here, Kind::Barrier, DType::U8, std::nullopt, algo, 0, -1, [this, algo] {
      if (algo == Algo::Dissemination) ring::dissemination_barrier(*transport_);
    });
  }

  struct Task {
    WorkPtr work;
    ring::CollectiveInfo info;
    std::function<void()> run;
  };

  // Numbers the collective and queues it for the worker; or, with `here` and nothing queued or
  // running, runs it on the calling thread (returning its finished Work). One executor at a time
  // either way (busy_), in issue order.
  WorkPtr submit(bool here, Kind kind, DType dtype, std::optional<ReduceOp> op, Algo algo, int64_t count, int root,
                 std::function<void()> run) {
    const CollectiveTag tag = current_collective_tag();
    std::unique_lock lock(mu_);
    ring::CollectiveInfo info;
    info.seq = ++seq_;
    info.kind = kind;
    info.dtype = dtype;
    info.op = op ? static_cast<uint8_t>(*op) + 1 : 0;
    info.algo = algo;
    info.count = count;
    info.root = root;
    info.bucket = tag.bucket;
    info.history = history_ = ring::desync_hash(history_, info);
    flight_.issued(flight_record(info, tag));
    auto work = std::make_shared<RingWork>(info);
    Task task{work, std::move(info), std::move(run)};
    if (here && queue_.empty() && !busy_) {
      busy_ = true;
      lock.unlock();
      execute(task);
      lock.lock();
      busy_ = false;
      if (!queue_.empty() || stop_) cv_.notify_all();  // issued by another thread meanwhile
      return work;
    }
    queue_.push_back(std::move(task));
    cv_.notify_all();
    return work;
  }

  // Runs one collective (its executor holds busy_). Never throws: the error goes to its Work,
  // and the first one breaks the communicator for every later collective.
  void execute(Task& task) {
    control_->entered(task.info.seq, ring::signature_of(task.info));
    flight_.started(task.info.seq);
    std::exception_ptr error;
    try {
      if (!broken_.empty())
        throw DpError(fmt::format("{} [{}]: not run: the communicator is broken since an earlier error: {}",
                                  task.info.description(), identity_string(), broken_));
      transport_->begin(task.info);
      task.run();
    } catch (const std::exception& e) {
      const bool first = broken_.empty();
      if (first) broken_ = e.what();
      error = dynamic_cast<const DpError*>(&e)
                  ? std::current_exception()
                  : std::make_exception_ptr(DpError(fmt::format("{} [{}]: {}", task.info.description(),
                                                                identity_string(), e.what())));
      flight_.ended(task.info.seq, false);
      if (first) write_flight_record_once(e.what());
    }
    if (!error) flight_.ended(task.info.seq, true);
    control_->completed(task.info.seq);
    {
      std::lock_guard lock(mu_);
      finished_ = task.info.seq;  // before the waiter wakes (issue order: the latest finished)
    }
    task.work->finish(error);
  }

  // The first failure (an error in a collective, or abort()) writes the record; later ones
  // only repeat it. SIGUSR2 writes it again whenever asked (write_flight_record).
  void write_flight_record_once(const std::string& why) {
    if (flight_written_.exchange(true)) return;
    flight_.write(flight_context(), why);
  }

  FlightRecord flight_record(const ring::CollectiveInfo& info, const CollectiveTag& tag) const {
    FlightRecord r;
    r.seq = info.seq;
    r.op = ring::kind_name(info.kind);
    r.reduce = info.op > 0 ? reduce_op_name(static_cast<ReduceOp>(info.op - 1)) : "";
    r.algorithm = ring::algo_name(info.algo);
    r.dtype = info.dtype;
    r.count = info.count;
    r.bytes = info.kind == Kind::Barrier ? 0 : info.count * static_cast<int64_t>(dtype_size(info.dtype));
    r.root = info.root;
    r.tag = tag;
    return r;
  }

  // What this rank knows about its peers now: the collective in flight, whose data arrived,
  // whose it awaits, and the last status query's answers.
  FlightContext flight_context() const {
    FlightContext c;
    c.rank = rank_;
    c.size = size_;
    c.hosts = topology_.hosts();
    c.backend = "ring";
    const uint64_t entered = flight_.last_entered(), completed = flight_.last_completed();
    c.in_flight = entered > completed ? entered : 0;
    // The answers count only when asked about the collective in flight: an earlier question (a
    // routine mismatch probe while everyone was alive) says nothing about who is silent now.
    uint64_t asked_about = 0;
    std::vector<ring::PeerStatus> st = control_->last_status(&asked_about);
    if (c.in_flight == 0 || asked_about != c.in_flight) st.clear();
    for (int p = 0; p < size_; ++p) {
      if (p == rank_) continue;
      FlightPeer fp;
      fp.rank = p;
      fp.heard = c.in_flight > 0 && transport_->heard_from(p);
      fp.awaited = c.in_flight > 0 && transport_->awaiting(p);
      const ring::PeerStatus now = control_->peer_state(p);
      fp.closed = now.closed && !now.said_bye;
      // A peer that had left when asked could not answer: that is no silence.
      if (static_cast<size_t>(p) < st.size() && !st[p].closed) {
        fp.queried = true;
        fp.answered = st[p].answered;
        fp.entered = st[p].entered;
        fp.completed = st[p].completed;
      }
      c.peers.push_back(fp);
    }
    return c;
  }

  // The worker: runs the queued collectives in issue order, never beside a blocking form
  // that runs on its caller's thread (busy_).
  void loop() {
    while (true) {
      Task task;
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [&] { return (stop_ && !busy_) || (!queue_.empty() && !busy_); });
        if (queue_.empty()) return;
        task = std::move(queue_.front());
        queue_.pop_front();
        busy_ = true;
      }
      execute(task);
      {
        std::lock_guard lock(mu_);
        busy_ = false;
      }
      cv_.notify_all();
    }
  }

  const int rank_;
  const int size_;
  const RingOptions opt_;
  const ring::RingTopology topology_;
  bool hierarchical_ = false;  // all-reduce hierarchically (RingOptions::hierarchical and the topology)
  FlightRecorder flight_;
  std::atomic<bool> flight_written_{false};
  std::unique_ptr<ring::ControlPlane> control_;
  std::unique_ptr<ring::Transport> transport_;
  // Pinned buffers for device tensors. Declared before the queue: queued tasks hold leases.
  DeviceStaging staging_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Task> queue_;
  uint64_t seq_ = 0;
  uint64_t history_ = 0;  // the desync hash of every collective issued so far
  bool stop_ = false;
  bool busy_ = false;
  uint64_t finished_ = 0;  // the seq of the last collective whose Work was finished (mu_)
  std::string broken_;  // the first error (its executor's: whoever holds busy_)
  std::thread worker_;
};

}  // namespace

RingOptions ring_options_from_tunables(const Tunables& t, double timeout_s) {
  RingOptions o;
  o.timeout_s = timeout_s;
  o.small_bytes = static_cast<size_t>(t.integer(Tunable::RingSmallBytes));
  o.piece_bytes = static_cast<size_t>(t.integer(Tunable::RingPieceBytes));
  o.socket_buffer_bytes = static_cast<int>(t.integer(Tunable::RingSocketBuffer));
  o.shm_fifo_bytes = static_cast<size_t>(t.integer(Tunable::RingShmBytes));
  o.spin_us = t.number(Tunable::RingSpinUs);
  o.listen_host = t.text(Tunable::RingHost);
  o.hierarchical = t.integer(Tunable::RingHierarchical) != 0;
  o.flight_records = static_cast<size_t>(t.integer(Tunable::FlightRecords));
  return o;
}

RingOptions ring_options_from_env(double timeout_s) { return ring_options_from_tunables(tunables(), timeout_s); }

std::unique_ptr<Communicator> make_ring_communicator(Bootstrap& bs, double timeout_s) {
  return make_ring_communicator(bs, ring_options_from_env(timeout_s));
}

std::unique_ptr<Communicator> make_ring_communicator(Bootstrap& bs, const RingOptions& options) {
  DP_CHECK(options.timeout_s > 0, "ring: timeout {} s must be positive", options.timeout_s);
  return std::make_unique<RingCommunicator>(bs, options);
}

}  // namespace dp
