#include "runtime/tensor.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_map>
#include <unistd.h>

#include "base/pages.h"
#include "runtime/device_error.h"
#include "runtime/device_memory.h"
#include "runtime/memory_account.h"

namespace dp {

size_t host_memory_bytes() {
  static const size_t bytes = static_cast<size_t>(::sysconf(_SC_PHYS_PAGES)) * static_cast<size_t>(::sysconf(_SC_PAGE_SIZE));
  return bytes;
}

HostMemoryError::HostMemoryError(size_t b, size_t m)
    : DpError(fmt::format("out of host memory: one tensor of {} bytes ({:.1f} GiB) does not fit this machine's {:.1f} "
                          "GiB",
                          b, static_cast<double>(b) / (1u << 30), static_cast<double>(m) / (1u << 30))),
      bytes(b),
      machine_bytes(m) {}

namespace {
std::atomic<int64_t> g_allocations{0};
// Each live storage's category (runtime/memory_account.h), kept beside Storage so that tensor.h,
// included everywhere, does not change: charged at allocation, credited when freed.
std::mutex g_category_mu;
struct Charged {
  MemoryCategory category;
  int node;
};
std::unordered_map<const Storage*, Charged>& storage_categories() {
  static auto* m = new std::unordered_map<const Storage*, Charged>();
  return *m;
}
}  // namespace

int64_t Storage::allocations() { return g_allocations.load(std::memory_order_relaxed); }

std::shared_ptr<Storage> Storage::allocate(size_t bytes, Device device) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  void* p = nullptr;
  if (device.is_cpu()) {
    // Larger than the machine: refused at once (with overcommit, the allocation could succeed and
    // the memset below bring the OOM killer instead of an error).
    if (bytes > host_memory_bytes()) throw HostMemoryError(bytes, host_memory_bytes());
    size_t rounded = (bytes + 63) / 64 * 64;
    p = std::aligned_alloc(64, rounded == 0 ? 64 : rounded);
    if (p == nullptr) throw HostMemoryError(bytes, host_memory_bytes());
    std::memset(p, 0, rounded == 0 ? 64 : rounded);
  } else {
    p = device_alloc(bytes, device);
  }
  auto* s = new Storage(p, bytes, device);
  const Charged c{current_memory_category(), current_memory_owner()};
  {
    std::lock_guard<std::mutex> lock(g_category_mu);
    storage_categories()[s] = c;
  }
  memory_charge(c.category, c.node, bytes);
  return std::shared_ptr<Storage>(s);
}

std::shared_ptr<Storage> Storage::map_pages(size_t bytes) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (bytes > host_memory_bytes()) throw HostMemoryError(bytes, host_memory_bytes());
  void* p = dp::map_pages(bytes);
  if (p == nullptr) throw HostMemoryError(bytes, host_memory_bytes());
  auto* s = new Storage(p, bytes, Device::cpu(), true);
  memory_add_mapped(current_memory_category(), p, bytes);
  return std::shared_ptr<Storage>(s);
}

Storage::~Storage() {
  if (mapped_) {
    memory_remove_mapped(data_);
    unmap_pages(data_, bytes_);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(g_category_mu);
    auto& m = storage_categories();
    auto it = m.find(this);
    if (it != m.end()) {
      memory_credit(it->second.category, it->second.node, bytes_);
      m.erase(it);
    }
  }
  if (device_.is_cpu()) std::free(data_);
  else device_free(data_, device_);
}

Tensor Tensor::zeros(const Shape& shape, DType dtype, Device device) {
  for (auto d : shape) DP_CHECK(d >= 0, "negative dimension in shape {}", shape_str(shape));
  Tensor t;
  try {
    t.storage_ = Storage::allocate(bytes_of(shape, dtype), device);
  } catch (DeviceOutOfMemory& e) {
    e.set_allocation(fmt::format("a {} {} tensor", shape_str(shape), dtype_name(dtype)));
    throw;
  }
  t.shape_ = shape;
  t.dtype_ = dtype;
  return t;
}

Tensor Tensor::zeros_paged(const Shape& shape, DType dtype) {
  for (auto d : shape) DP_CHECK(d >= 0, "negative dimension in shape {}", shape_str(shape));
  Tensor t;
  t.storage_ = Storage::map_pages(bytes_of(shape, dtype));
  t.shape_ = shape;
  t.dtype_ = dtype;
  return t;
}

Tensor Tensor::view_of(std::shared_ptr<Storage> storage, size_t byte_offset, const Shape& shape, DType dtype) {
  DP_CHECK(storage != nullptr, "view of a null storage");
  DP_CHECK(byte_offset + bytes_of(shape, dtype) <= storage->bytes(),
           "view {} {} at byte {} overruns a storage of {} bytes", dtype_name(dtype), shape_str(shape),
           byte_offset, storage->bytes());
  Tensor t;
  t.storage_ = std::move(storage);
  t.offset_ = byte_offset;
  t.shape_ = shape;
  t.dtype_ = dtype;
  return t;
}

int64_t Tensor::dim(int i) const {
  int n = ndim();
  if (i < 0) i += n;
  DP_CHECK(i >= 0 && i < n, "dimension {} out of range for {}", i, describe());
  return shape_[i];
}

Tensor Tensor::reshape(const Shape& shape) const {
  DP_CHECK(shape_numel(shape) == numel(), "cannot reshape {} to {}", describe(), shape_str(shape));
  return view_of(storage_, offset_, shape, dtype_);
}

Tensor Tensor::slice_flat(int64_t begin, const Shape& shape) const {
  DP_CHECK(begin >= 0 && begin + shape_numel(shape) <= numel(), "slice [{}, +{}) out of {}", begin,
           shape_numel(shape), describe());
  return view_of(storage_, offset_ + begin * dtype_size(dtype_), shape, dtype_);
}

Tensor Tensor::narrow0(int64_t begin, int64_t count) const {
  DP_CHECK(ndim() >= 1 && begin >= 0 && begin + count <= shape_[0], "narrow0({}, {}) of {}", begin, count,
           describe());
  Shape s = shape_;
  s[0] = count;
  int64_t row = numel() / (shape_[0] == 0 ? 1 : shape_[0]);
  return slice_flat(begin * row, s);
}

Tensor Tensor::clone() const {
  Tensor t = zeros(shape_, dtype_, device());
  t.copy_from(*this);
  return t;
}

Tensor Tensor::on_host() const {
  if (device().is_cpu()) return *this;
  Tensor t = zeros(shape_, dtype_, Device::cpu());
  t.copy_from(*this);
  return t;
}

void Tensor::copy_from(const Tensor& src) const {
  DP_CHECK(src.shape_ == shape_ && src.dtype_ == dtype_, "copy {} into {}", src.describe(), describe());
  if (nbytes() == 0) return;
  if (device().is_cpu() && src.device().is_cpu()) std::memcpy(raw(), src.raw(), nbytes());
  else device_copy(raw(), device(), src.raw(), src.device(), nbytes());
}

void Tensor::zero_() const {
  if (nbytes() == 0) return;
  if (device().is_cpu()) std::memset(raw(), 0, nbytes());
  else device_memset_zero(raw(), device(), nbytes());
}

void Tensor::fill_(double v) const {
  DP_CHECK(device().is_cpu(), "fill_ on {}", describe());
  if (dtype_ == DType::F32) {
    float* p = data<float>();
    for (int64_t i = 0; i < numel(); ++i) p[i] = static_cast<float>(v);
  } else if (dtype_ == DType::F64) {
    double* p = data<double>();
    for (int64_t i = 0; i < numel(); ++i) p[i] = v;
  } else {
    DP_CHECK(false, "fill_ supports f32/f64, not {}", describe());
  }
}

std::string Tensor::describe() const {
  return fmt::format("{}{} on {}", dtype_name(dtype_), shape_str(shape_), device().str());
}

void Tensor::check_type(size_t elem_size, DType want) const {
  DP_CHECK(storage_ != nullptr, "access to an undefined tensor");
  DP_CHECK(dtype_size(dtype_) == elem_size && (dtype_ == want || elem_size == 2),
           "tensor is {}, accessed as {}", describe(), dtype_name(want));
}

}  // namespace dp
