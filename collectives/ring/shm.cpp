#include "collectives/ring/shm.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "base/error.h"

namespace dp::ring {

size_t ShmFifo::readable() const {
  return ctl_->head.load(std::memory_order_acquire) - ctl_->tail.load(std::memory_order_relaxed);
}

size_t ShmFifo::writable() const {
  return cap_ - (ctl_->head.load(std::memory_order_relaxed) - ctl_->tail.load(std::memory_order_acquire));
}

size_t ShmFifo::write(const char* src, size_t n) {
  const uint64_t head = ctl_->head.load(std::memory_order_relaxed);
  const uint64_t tail = ctl_->tail.load(std::memory_order_acquire);
  n = std::min(n, cap_ - static_cast<size_t>(head - tail));
  if (n == 0) return 0;
  const size_t pos = head % cap_;
  const size_t first = std::min(n, cap_ - pos);
  std::memcpy(data_ + pos, src, first);
  std::memcpy(data_, src + first, n - first);
  ctl_->head.store(head + n, std::memory_order_release);
  return n;
}

size_t ShmFifo::read(char* dst, size_t n) {
  const uint64_t tail = ctl_->tail.load(std::memory_order_relaxed);
  const uint64_t head = ctl_->head.load(std::memory_order_acquire);
  n = std::min(n, static_cast<size_t>(head - tail));
  if (n == 0) return 0;
  const size_t pos = tail % cap_;
  const size_t first = std::min(n, cap_ - pos);
  std::memcpy(dst, data_ + pos, first);
  std::memcpy(dst + first, data_, n - first);
  ctl_->tail.store(tail + n, std::memory_order_release);
  return n;
}

const char* ShmFifo::peek(size_t* n) const {
  const uint64_t tail = ctl_->tail.load(std::memory_order_relaxed);
  const uint64_t head = ctl_->head.load(std::memory_order_acquire);
  const size_t pos = tail % cap_;
  *n = std::min(static_cast<size_t>(head - tail), cap_ - pos);
  return data_ + pos;
}

void ShmFifo::release(size_t n) {
  ctl_->tail.store(ctl_->tail.load(std::memory_order_relaxed) + n, std::memory_order_release);
}

namespace {
long futex(std::atomic<uint32_t>* addr, int op, uint32_t val, const timespec* ts) {
  return syscall(SYS_futex, reinterpret_cast<uint32_t*>(addr), op, val, ts, nullptr, 0);
}
}  // namespace

void Doorbell::ring() const {
  w_->seq.fetch_add(1, std::memory_order_seq_cst);
  const uint32_t state = w_->sleeping.load(std::memory_order_seq_cst);
  if (state == kFutex) {
    futex(&w_->seq, FUTEX_WAKE, INT32_MAX, nullptr);
  } else if (state == kPolling && kick_fd_ >= 0) {
    const char kick = 'k';
    (void)!::send(kick_fd_, &kick, 1, MSG_DONTWAIT | MSG_NOSIGNAL);  // full or closed: a kick is waiting anyway
  }
}

bool Doorbell::begin_poll(uint32_t seen) const {
  w_->sleeping.store(kPolling, std::memory_order_seq_cst);
  if (w_->seq.load(std::memory_order_seq_cst) != seen) {
    w_->sleeping.store(kAwake, std::memory_order_relaxed);
    return false;
  }
  return true;
}

void Doorbell::sleep(uint32_t seen, Clock::time_point deadline) const {
  // Dekker with ring(): we publish `sleeping` then re-read seq; the ringer bumps seq then reads
  // `sleeping`. One of us sees the other, so a ring is never lost.
  w_->sleeping.store(kFutex, std::memory_order_seq_cst);
  if (w_->seq.load(std::memory_order_seq_cst) == seen) {
    auto left = deadline - Clock::now();
    if (left > Clock::duration::zero()) {
      auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(left).count();
      timespec ts{static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
      futex(&w_->seq, FUTEX_WAIT, seen, &ts);  // EAGAIN (rung already), ETIMEDOUT, EINTR: all fine
    }
  }
  w_->sleeping.store(kAwake, std::memory_order_relaxed);
}

ShmSegment::ShmSegment(ShmSegment&& o) noexcept
    : name_(std::move(o.name_)),
      base_(std::exchange(o.base_, nullptr)),
      bytes_(std::exchange(o.bytes_, 0)),
      owner_(std::exchange(o.owner_, false)) {}

ShmSegment& ShmSegment::operator=(ShmSegment&& o) noexcept {
  if (this != &o) {
    this->~ShmSegment();
    new (this) ShmSegment(std::move(o));
  }
  return *this;
}

namespace {
// Maps `bytes` of the shared-memory object open as fd, read-write and shared, and closes fd
// (the mapping keeps the object).
char* map_and_close(int fd, size_t bytes, const std::string& name) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  int err = errno;
  ::close(fd);
  if (p == MAP_FAILED)
    throw DpError(fmt::format("ring: cannot map shared memory {} [{}]: {}", name, identity_string(),
                              std::strerror(err)));
  return static_cast<char*>(p);
}
}  // namespace

ShmSegment::~ShmSegment() {
  if (owner_) unlink();
  if (base_) munmap(base_, bytes_);
  base_ = nullptr;
}

void ShmSegment::unlink() {
  if (owner_ && !name_.empty()) shm_unlink(name_.c_str());
  owner_ = false;
}

ShmSegment ShmSegment::create(const std::string& name, size_t bytes) {
  int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0)
    throw DpError(fmt::format("ring: cannot create shared memory {} [{}]: {}", name, identity_string(),
                              std::strerror(errno)));
  ShmSegment s;
  s.name_ = name;
  s.owner_ = true;
  // Reserve the pages now: a tmpfs that is too small fails here rather than with SIGBUS later.
  int rc = posix_fallocate(fd, 0, static_cast<off_t>(bytes));
  if (rc != 0) {
    ::close(fd);
    throw DpError(fmt::format("ring: cannot reserve {} MiB of shared memory in /dev/shm [{}]: {} (make /dev/shm "
                              "larger, e.g. docker --shm-size, or lower DPTRAIN_RING_SHM_BYTES)",
                              bytes >> 20, identity_string(), std::strerror(rc)));
  }
  s.base_ = map_and_close(fd, bytes, name);
  s.bytes_ = bytes;
  new (s.base_) BellWord();
  return s;
}

ShmSegment ShmSegment::open(const std::string& name, size_t bytes) {
  int fd = shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0)
    throw DpError(fmt::format("ring: cannot open shared memory {} [{}]: {}", name, identity_string(),
                              std::strerror(errno)));
  struct stat st {};
  if (fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) < bytes) {
    ::close(fd);
    throw DpError(fmt::format("ring: shared memory {} is smaller than expected [{}]", name, identity_string()));
  }
  ShmSegment s;
  s.name_ = name;
  s.base_ = map_and_close(fd, bytes, name);
  s.bytes_ = bytes;
  return s;
}

}  // namespace dp::ring
