// defines: DatasetKind (data.dataset), the data sets dptrain reads, and its name table: the one
// list of data set names. The config schema takes its allowed values from it and
// launch/datasets.cpp opens each kind (a switch the compiler checks for a missing case).
#pragma once
#include <span>

#include "runtime/enum_names.h"

namespace dp::data {

// FashionMnist: the IDX files of Fashion-MNIST (runtime/data/idx.h); Idx: any MNIST-style IDX
// pair, plain or gzip; Cifar10: the binary batches (runtime/data/cifar10.h); Synthetic: random
// class-dependent samples generated in memory.
enum class DatasetKind { FashionMnist, Idx, Cifar10, Synthetic };

inline constexpr EnumName<DatasetKind> kDatasetKindNames[] = {{DatasetKind::FashionMnist, "fashion_mnist"},
                                                              {DatasetKind::Idx, "idx"},
                                                              {DatasetKind::Cifar10, "cifar10"},
                                                              {DatasetKind::Synthetic, "synthetic"}};
constexpr std::span<const EnumName<DatasetKind>> enum_names(DatasetKind) { return kDatasetKindNames; }

}  // namespace dp::data
