// defines: the shared-memory pieces of the ring transport between processes of one node:
// ShmSegment (a POSIX shared memory object, mapped; RAII), ShmFifo (a single-producer single-
// consumer byte FIFO inside one) and Doorbell (a futex word a rank sleeps on and its peers ring).
//
// Every rank owns one segment holding its doorbell and one inbound FIFO per other rank of its
// node; the writer is that peer, the reader the owner. Layout (64-byte aligned):
//     BellWord | FifoControl x L | data x L (capacity bytes each)      L = ranks on the node
// A FIFO moves bytes of the same streams the TCP sockets carry (transport.h): the writer copies
// in and publishes `head`, the reader copies out and publishes `tail`, each rings the other's
// doorbell so that a sleeping side wakes (futex(2) on a shared mapping, so across processes).
// The memory is reserved with posix_fallocate when the segment is made: a /dev/shm too small
// for it is an error there (the caller then keeps TCP), never a SIGBUS later.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

#include "collectives/ring/socket.h"

namespace dp::ring {

struct alignas(64) BellWord {
  std::atomic<uint32_t> seq;       // bumped by every ring
  std::atomic<uint32_t> sleeping;  // kAwake, kFutex (in futex_wait) or kPolling (in poll(2))
};
enum : uint32_t { kAwake = 0, kFutex = 1, kPolling = 2 };

struct alignas(64) FifoControl {
  std::atomic<uint64_t> head;  // bytes ever written (the writer's)
  char pad[56];
  std::atomic<uint64_t> tail;  // bytes ever read (the reader's)
  char pad2[56];
};

class ShmFifo {
 public:
  ShmFifo() = default;
  ShmFifo(FifoControl* ctl, char* data, size_t capacity) : ctl_(ctl), data_(data), cap_(capacity) {}
  bool valid() const { return ctl_ != nullptr; }
  // Non-blocking: copy as much as fits / is there; return the bytes moved.
  size_t write(const char* src, size_t n);
  size_t read(char* dst, size_t n);
  size_t readable() const;
  size_t writable() const;
  // Zero-copy reading: the readable bytes that lie contiguously at the read position (up to the
  // wrap), then release() what was used.
  const char* peek(size_t* n) const;
  void release(size_t n);

 private:
  FifoControl* ctl_ = nullptr;
  char* data_ = nullptr;
  size_t cap_ = 0;
};

// A rank that waits on TCP sockets and shared memory at once sleeps in poll(2), not on the
// futex: it marks itself kPolling, and a ringer then also writes one "kick" byte to the TCP data
// socket of the pair (unused for data between shared-memory peers), which that poll watches.
class Doorbell {
 public:
  Doorbell() = default;
  // kick_fd: the ringer's data socket to the bell's owner (-1: none, e.g. ringing one's own).
  explicit Doorbell(BellWord* w, int kick_fd = -1) : w_(w), kick_fd_(kick_fd) {}
  bool valid() const { return w_ != nullptr; }
  void ring() const;
  // The value to pass to sleep(): read it before looking for work, so that a ring in between
  // makes sleep() return at once.
  uint32_t seen() const { return w_->seq.load(std::memory_order_acquire); }
  // Sleeps until rung after `seen` or until the deadline.
  void sleep(uint32_t seen, Clock::time_point deadline) const;
  // Around a poll(2) that watches the kick sockets: begin_poll returns false (and the caller
  // must not sleep) when a ring came after `seen`.
  bool begin_poll(uint32_t seen) const;
  void end_poll() const { w_->sleeping.store(kAwake, std::memory_order_relaxed); }

 private:
  BellWord* w_ = nullptr;
  int kick_fd_ = -1;
};

// A mapped POSIX shared memory object. create() makes and reserves it; open() maps another
// rank's. unlink() removes the name (the mappings stay valid): the owner calls it once every
// peer has mapped the segment, so that nothing is left in /dev/shm even if a process dies.
class ShmSegment {
 public:
  ShmSegment() = default;
  ShmSegment(ShmSegment&& o) noexcept;
  ShmSegment& operator=(ShmSegment&& o) noexcept;
  ShmSegment(const ShmSegment&) = delete;
  ShmSegment& operator=(const ShmSegment&) = delete;
  ~ShmSegment();

  // Throws DpError (with the errno string and a hint) when it cannot.
  static ShmSegment create(const std::string& name, size_t bytes);
  static ShmSegment open(const std::string& name, size_t bytes);
  void unlink();
  char* base() const { return base_; }
  size_t bytes() const { return bytes_; }
  explicit operator bool() const { return base_ != nullptr; }

 private:
  std::string name_;
  char* base_ = nullptr;
  size_t bytes_ = 0;
  bool owner_ = false;
};

// Byte offsets inside one rank's segment for `local` ranks and FIFOs of `capacity` bytes.
struct SegmentLayout {
  size_t fifo_capacity;
  int local;
  size_t bell_offset() const { return 0; }
  size_t control_offset(int slot) const { return 64 + static_cast<size_t>(slot) * sizeof(FifoControl); }
  size_t data_offset(int slot) const {
    return 64 + static_cast<size_t>(local) * sizeof(FifoControl) + static_cast<size_t>(slot) * fifo_capacity;
  }
  size_t bytes() const { return data_offset(local); }
};

}  // namespace dp::ring
