// The check-macro family: messages hold the failing expression, file:line, "rank r/N on host"
// and the library's own error string. The CUDA-library checks need only the libraries' error
// strings, not a GPU, so they run everywhere CUDA is built.
#include <gtest/gtest.h>

#include <cerrno>
#include <regex>
#include <functional>

#include <unistd.h>

#include "runtime/cuda/check.h"
#include "base/error.h"

namespace dp {
namespace {

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const DpError& e) {
    return e.what();
  }
  return "<no error>";
}

TEST(Errors, CheckNamesExpressionLocationAndRank) {
  set_process_identity(3, 8);
  int x = 2;
  std::string m = message_of([&] { DP_CHECK(x == 3, "x is {}", x); });
  set_process_identity(0, 1);
  std::regex want(R"(check failed: x == 3 at .*tests/base/test_errors\.cpp:\d+ \[rank 3/8 on [^\]]+\]: x is 2)");
  EXPECT_TRUE(std::regex_match(m, want)) << m;
}

TEST(Errors, CheckSysCarriesErrno) {
  std::string m = message_of([] { CHECK_SYS(::close(-1)); });
  EXPECT_NE(m.find("system call failed: ::close(-1) at "), std::string::npos) << m;
  EXPECT_NE(m.find("Bad file descriptor (errno 9)"), std::string::npos) << m;
}

TEST(Errors, UserErrorIsPlainText) {
  std::string m = message_of([] { DP_THROW_USER("bad {} in {}", "key", "file"); });
  EXPECT_EQ(m, "bad key in file");
}

#ifdef DPTRAIN_HAVE_CUDA
TEST(Errors, CudaLibraryChecksQuoteTheLibrary) {
  std::string m = message_of([] { CHECK_CUDA(cudaErrorInvalidValue); });
  EXPECT_NE(m.find("CUDA error: cudaErrorInvalidValue at "), std::string::npos) << m;
  EXPECT_NE(m.find("invalid argument (1)"), std::string::npos) << m;
  // Out of memory is its own error (runtime/device_error.h), with what to lower.
  m = message_of([] { CHECK_CUDA(cudaErrorMemoryAllocation); });
  EXPECT_EQ(m.rfind("device out of memory on cuda:0 [" + identity_string() + "]: an allocation of unknown size failed "
                    "(cudaErrorMemoryAllocation at ", 0), 0u) << m;
  EXPECT_NE(m.find("; lower train.batch_size"), std::string::npos) << m;
  m = message_of([] { CHECK_CUDNN(CUDNN_STATUS_BAD_PARAM); });
  EXPECT_NE(m.find("cuDNN error: CUDNN_STATUS_BAD_PARAM at "), std::string::npos) << m;
  EXPECT_NE(m.find("CUDNN_STATUS_BAD_PARAM (2000)"), std::string::npos) << m;
  m = message_of([] { CHECK_CUBLAS(CUBLAS_STATUS_INVALID_VALUE); });
  EXPECT_NE(m.find("cuBLAS error: CUBLAS_STATUS_INVALID_VALUE at "), std::string::npos) << m;
  EXPECT_NE(m.find("(7)"), std::string::npos) << m;
  m = message_of([] { CHECK_NCCL(ncclRemoteError); });
  EXPECT_NE(m.find("NCCL error: ncclRemoteError at "), std::string::npos) << m;
  EXPECT_NE(m.find("hint: a peer failed or disconnected"), std::string::npos) << m;
}

TEST(Errors, NoDriverHint) {
  EXPECT_EQ(cuda_hint(cudaErrorInsufficientDriver),
            "no usable GPU on this host; run with train.device = \"cpu\" or check nvidia-smi");
  EXPECT_EQ(cuda_hint(cudaErrorInvalidValue), "");
}
#endif

}  // namespace
}  // namespace dp
