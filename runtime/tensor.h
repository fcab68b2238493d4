// defines: Storage (owning bytes) and Tensor (a typed view into a Storage); Device and Shape
// come from base/.
//
// Tensors are contiguous row-major views: (storage, byte offset, shape, dtype). Many tensors can
// view one Storage; that is how the flat parameter and gradient arenas (runtime/arena.h) work.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/device.h"
#include "base/dtype.h"
#include "base/error.h"
#include "base/shape.h"

namespace dp {

// A host allocation that cannot be made: larger than the machine's memory, or refused. Callers
// that know which setting made the tensor that large catch it and name it (launch/train_setup.h,
// with_size_context).
class HostMemoryError : public DpError {
 public:
  HostMemoryError(size_t bytes, size_t machine_bytes);
  size_t bytes = 0, machine_bytes = 0;
};
// This machine's physical memory, bytes.
size_t host_memory_bytes();


// Owns one allocation. CPU memory is 64-byte aligned and zero-filled.
class Storage {
 public:
  static std::shared_ptr<Storage> allocate(size_t bytes, Device device);
  // Host memory on an anonymous page mapping of its own (base/pages.h: page-aligned, zero, nothing
  // resident until written, its pages can be given back with release_pages). The memory account
  // measures it instead of charging it (runtime/memory_account.h, memory_add_mapped): ZeRO stage
  // 2's gradient arena.
  static std::shared_ptr<Storage> map_pages(size_t bytes);
  bool mapped() const { return mapped_; }
  // How many storages this process has allocated (any device): the counting allocator the
  // graph's memory-plan test reads (no allocation per step after the first).
  static int64_t allocations();
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  Device device() const { return device_; }

 private:
  Storage(void* data, size_t bytes, Device device, bool mapped = false)
      : data_(data), bytes_(bytes), device_(device), mapped_(mapped) {}
  void* data_;
  size_t bytes_;
  Device device_;
  bool mapped_;
};

class Tensor {
 public:
  Tensor() = default;
  // A new, zero-filled tensor with its own storage.
  static Tensor zeros(const Shape& shape, DType dtype = DType::F32, Device device = Device::cpu());
  // The same on the host, in a Storage::map_pages mapping (its pages can be given back).
  static Tensor zeros_paged(const Shape& shape, DType dtype = DType::F32);
  // A view of `storage` starting at `byte_offset`.
  static Tensor view_of(std::shared_ptr<Storage> storage, size_t byte_offset, const Shape& shape, DType dtype);

  bool defined() const { return storage_ != nullptr; }
  // Defined, and of this shape, dtype and device: a buffer kept from an earlier call still fits.
  bool fits(const Shape& shape, DType dtype, Device device) const {
    return defined() && shape_ == shape && dtype_ == dtype && this->device() == device;
  }
  const Shape& shape() const { return shape_; }
  int ndim() const { return static_cast<int>(shape_.size()); }
  int64_t dim(int i) const;  // negative i counts from the end
  int64_t numel() const { return shape_numel(shape_); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype_); }
  DType dtype() const { return dtype_; }
  Device device() const { return storage_ ? storage_->device() : Device::cpu(); }
  const std::shared_ptr<Storage>& storage() const { return storage_; }
  size_t byte_offset() const { return offset_; }

  void* raw() const { return static_cast<char*>(storage_->data()) + offset_; }
  template <typename T>
  T* data() const {
    check_type(sizeof(T), type_tag<T>());
    return static_cast<T*>(raw());
  }

  // Same storage, new shape with the same number of elements.
  Tensor reshape(const Shape& shape) const;
  // Elements [begin, begin + numel(shape)) of this tensor, as a new view.
  Tensor slice_flat(int64_t begin, const Shape& shape) const;
  // Rows [begin, begin+count) along dim 0.
  Tensor narrow0(int64_t begin, int64_t count) const;
  // A copy with its own storage (same device).
  Tensor clone() const;
  // This tensor on the CPU: itself there, else a host copy of it (what a writer of its bytes reads).
  Tensor on_host() const;
  // Copy contents from `src` (same shape and dtype; any devices).
  void copy_from(const Tensor& src) const;  // data methods are const: a Tensor is a handle
  void zero_() const;
  // CPU float (f32/f64) helpers used by tests and tools.
  void fill_(double v) const;
  std::string describe() const;  // "f32[2, 3] on cpu"

 private:
  template <typename T>
  static DType type_tag();
  void check_type(size_t elem_size, DType want) const;
  std::shared_ptr<Storage> storage_;
  size_t offset_ = 0;
  Shape shape_;
  DType dtype_ = DType::F32;
};

template <> inline DType Tensor::type_tag<float>() { return DType::F32; }
template <> inline DType Tensor::type_tag<double>() { return DType::F64; }
template <> inline DType Tensor::type_tag<int32_t>() { return DType::I32; }
template <> inline DType Tensor::type_tag<int64_t>() { return DType::I64; }
template <> inline DType Tensor::type_tag<uint8_t>() { return DType::U8; }
template <> inline DType Tensor::type_tag<uint16_t>() { return DType::BF16; }  // raw 16-bit access

// `t` itself when it already fits (shape, dtype, device: its values as they are), else a new
// zero-filled tensor in its place: a buffer kept across calls, reallocated only when the shape
// changes (a new batch size, a last partial batch).
inline Tensor& ensure_tensor(Tensor& t, const Shape& shape, DType dtype = DType::F32, Device device = Device::cpu()) {
  if (!t.fits(shape, dtype, device)) t = Tensor::zeros(shape, dtype, device);
  return t;
}

// As ensure_tensor, for a buffer its caller allocated itself (never a view of another's storage):
// when the shape changes but the storage holds the new shape's bytes (a smaller batch: the last
// partial one, an evaluation's), `t` becomes a view of that storage in the new shape, its values
// as they are; only a larger shape, another dtype or device allocates. So a buffer sized once for
// the largest batch serves every smaller one: on a GPU a free is a device synchronisation
// (runtime/device_memory_cuda.cpp), and a partial batch must not reallocate the world.
inline Tensor& ensure_capacity(Tensor& t, const Shape& shape, DType dtype, Device device) {
  if (t.fits(shape, dtype, device)) return t;
  if (t.defined() && t.dtype() == dtype && t.device() == device && t.byte_offset() == 0 &&
      t.storage()->bytes() >= bytes_of(shape, dtype))
    t = Tensor::view_of(t.storage(), 0, shape, dtype);
  else
    t = Tensor::zeros(shape, dtype, device);
  return t;
}

}  // namespace dp
