#include "kernels/cpu/onednn.h"

#include <cstdlib>
#include <memory>

namespace dp::kernels::cpu::onednn {

dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

dnnl::stream& stream() {
  thread_local dnnl::stream s(engine());
  return s;
}

memory::desc act_md(int64_t n, int64_t c, int64_t h, int64_t w, bool nhwc) {
  return memory::desc({n, c, h, w}, memory::data_type::f32, nhwc ? Tag::nhwc : Tag::nchw);
}

memory::desc plain_md(const memory::dims& dims, Tag tag) { return memory::desc(dims, memory::data_type::f32, tag); }

memory unbound(const memory::desc& md) { return memory(md, engine(), DNNL_MEMORY_NONE); }

memory owned(const memory::desc& md) { return memory(md, engine()); }

const memory& scratch(memory& m, Slot slot) {
  struct Free {
    void operator()(void* p) const { std::free(p); }
  };
  struct Buffer {
    std::unique_ptr<void, Free> p;
    size_t size = 0;
  };
  thread_local Buffer bufs[4];
  Buffer& b = bufs[static_cast<int>(slot)];
  const size_t want = m.get_desc().get_size();
  if (want > b.size) {
    b.size = (want + 4095) / 4096 * 4096;
    b.p.reset(std::aligned_alloc(64, b.size));
    DP_CHECK(b.p != nullptr, "out of host memory allocating a {} byte oneDNN scratch buffer", b.size);
  }
  m.set_data_handle(b.p.get());
  return m;
}

dnnl::primitive_attr scratch_attr(bool relu) {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  if (relu) {
    dnnl::post_ops ops;
    ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
    attr.set_post_ops(ops);
  }
  return attr;
}

void execute(const dnnl::primitive& p, const std::unordered_map<int, memory>& args) {
  onednn_call(fmt::format("oneDNN primitive (kind {})", static_cast<int>(p.get_kind())), [&] {
    p.execute(stream(), args);
    stream().wait();
  });
}

Reorder::Reorder(const memory::desc& from, const memory::desc& to, bool accumulate) {
  if (from == to && !accumulate) return;
  dnnl::primitive_attr attr;
  if (accumulate) {
    dnnl::post_ops ops;
    ops.append_sum(1.0f);
    attr.set_post_ops(ops);
  }
  prim_ = dnnl::reorder(dnnl::reorder::primitive_desc(engine(), from, engine(), to, attr));
  made_ = true;
}

void Reorder::operator()(const memory& from, const memory& to) const {
  DP_CHECK(made_, "an empty oneDNN reorder was run");
  execute(prim_, {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}});
}

const memory& weights_for(const Reorder& r, memory& user, memory& prim, const void* data) {
  bind(user, data);
  if (r) r(user, prim);
  else bind(prim, data);
  return prim;
}

void add_into(float* dst, const memory& src, int64_t n) {
  const float* s = static_cast<const float*>(src.get_data_handle());
  for (int64_t i = 0; i < n; ++i) dst[i] += s[i];
}

}  // namespace dp::kernels::cpu::onednn
