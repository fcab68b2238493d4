// defines: PimplPtr<T>, the owner of an object's private state whose type is defined in one
// source file only: a layer's GPU state (defined in its <op>_cuda.cpp), a class's CUDA-side
// scratch. The deleter is bound by emplace(), where T is complete, so a header can hold a
// PimplPtr<T> of an incomplete T, and the holder's destructor and moves can be the implicit ones
// in every build: in a build without CUDA nothing emplaces, and the pointer stays empty.
#pragma once
#include <utility>

namespace dp {

template <typename T>
class PimplPtr {
 public:
  PimplPtr() = default;
  ~PimplPtr() { reset(); }
  PimplPtr(PimplPtr&& o) noexcept : p_(std::exchange(o.p_, nullptr)), delete_(std::exchange(o.delete_, nullptr)) {}
  PimplPtr& operator=(PimplPtr&& o) noexcept {
    if (this != &o) {
      reset();
      p_ = std::exchange(o.p_, nullptr);
      delete_ = std::exchange(o.delete_, nullptr);
    }
    return *this;
  }
  PimplPtr(const PimplPtr&) = delete;
  PimplPtr& operator=(const PimplPtr&) = delete;

  // Makes a new T(args...) (T complete here) and then destroys the one held before, if any.
  template <typename... Args>
  T& emplace(Args&&... args) {
    T* p = new T(std::forward<Args>(args)...);
    reset();
    p_ = p;
    delete_ = [](T* q) noexcept { delete q; };
    return *p_;
  }
  void reset() noexcept {
    if (p_) delete_(p_);
    p_ = nullptr;
    delete_ = nullptr;
  }

  T* get() const { return p_; }
  T& operator*() const { return *p_; }
  T* operator->() const { return p_; }
  explicit operator bool() const { return p_ != nullptr; }

 private:
  T* p_ = nullptr;
  void (*delete_)(T*) noexcept = nullptr;
};

}  // namespace dp
