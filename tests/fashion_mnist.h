// defines: where the tests find Fashion-MNIST. First the directory named by the environment
// variable DPTRAIN_FASHION_MNIST_DIR (the GPU runbook, tools/gpu/run_all.sh, exports it to the
// copy it carries to a machine without Debian's package), then Debian's dataset-fashion-mnist
// path (runtime/data/dataset.h kFashionMnistDir). A directory counts when it holds the training
// images (train-images-idx3-ubyte.gz). Every test that reads Fashion-MNIST takes its directory
// from here and passes it on as data.path (fashion_mnist_override, fashion_mnist_set), so what
// it checks for is what it reads.
#pragma once
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "runtime/data/dataset.h"

namespace dp::test {

inline constexpr const char* kFashionMnistEnv = "DPTRAIN_FASHION_MNIST_DIR";

inline bool holds_fashion_mnist(const std::string& dir) {
  return !dir.empty() && std::filesystem::exists(std::filesystem::path(dir) / "train-images-idx3-ubyte.gz");
}

// The directory to read Fashion-MNIST from, or "" when neither place holds it.
inline std::string fashion_mnist_dir() {
  const char* env = std::getenv(kFashionMnistEnv);
  if (env != nullptr && holds_fashion_mnist(env)) return env;
  if (holds_fashion_mnist(data::kFashionMnistDir)) return data::kFashionMnistDir;
  return "";
}

// A file of it: fashion_mnist_file("t10k-images-idx3-ubyte.gz").
inline std::string fashion_mnist_file(const std::string& name) {
  return (std::filesystem::path(fashion_mnist_dir()) / name).string();
}

// The skip reason when it is nowhere: where the test looked and what to do.
inline std::string fashion_mnist_missing() {
  const char* env = std::getenv(kFashionMnistEnv);
  return std::string("Fashion-MNIST not found in $") + kFashionMnistEnv + " (" + (env ? env : "unset") + ") nor " +
         data::kFashionMnistDir + ": apt-get install dataset-fashion-mnist, or point " + kFashionMnistEnv +
         " at a directory holding {train,t10k}-{images-idx3,labels-idx1}-ubyte.gz";
}

// The config override that makes a run read it: `data.path="DIR"` (load_config's overrides, or
// one argument after --set).
inline std::string fashion_mnist_override() { return "data.path=\"" + fashion_mnist_dir() + "\""; }

// The same for a shell command line: ` --set 'data.path="DIR"'` (leading space included).
inline std::string fashion_mnist_set() { return " --set '" + fashion_mnist_override() + "'"; }

}  // namespace dp::test

// Skips the calling test (or SetUp) when Fashion-MNIST is in neither place.
#define SKIP_WITHOUT_FASHION_MNIST()                                \
  if (::dp::test::fashion_mnist_dir().empty()) GTEST_SKIP() << ::dp::test::fashion_mnist_missing()
