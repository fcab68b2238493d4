// defines: the data section's choices, with their name tables: DatasetKind (data.dataset), the data
// sets dptrain reads (the one list of data set names); SyntheticDevice (data.synthetic_device), where
// synthetic batches are made; Permutation (data.permutation), the sampler's shuffle. The config
// schema takes its allowed values from here (the runtime core, beneath the data library
// runtime/data/); launch/datasets.cpp opens each kind (a switch the compiler checks for a missing
// case) and runtime/data/sampler.h draws each permutation.
#pragma once
#include <span>

#include "runtime/enum_names.h"

namespace dp::data {

// FashionMnist: the IDX files of Fashion-MNIST (runtime/data/idx.h); Idx: any MNIST-style IDX
// pair, plain or gzip, any class count, gray or colour; Cifar10: the binary batches
// (runtime/data/cifar10.h); Synthetic: random class-dependent samples generated in memory;
// ImageFolder: <path>/train/<class>/<image> and <path>/val/... (runtime/data/image_folder.h);
// TarShards: WebDataset tar shards (runtime/data/tar_shards.h); Npy: .npy arrays
// (runtime/data/npy.h); Tokens: llm.c's token shards, samples are windows of model.block_size + 1
// tokens (runtime/data/token_dataset.h).
enum class DatasetKind { FashionMnist, Idx, Cifar10, Synthetic, ImageFolder, TarShards, Npy, Tokens };

inline constexpr EnumName<DatasetKind> kDatasetKindNames[] = {{DatasetKind::FashionMnist, "fashion_mnist"},
                                                              {DatasetKind::Idx, "idx"},
                                                              {DatasetKind::Cifar10, "cifar10"},
                                                              {DatasetKind::Synthetic, "synthetic"},
                                                              {DatasetKind::ImageFolder, "image_folder"},
                                                              {DatasetKind::TarShards, "tar_shards"},
                                                              {DatasetKind::Npy, "npy"},
                                                              {DatasetKind::Tokens, "tokens"}};
constexpr std::span<const EnumName<DatasetKind>> enum_names(DatasetKind) { return kDatasetKindNames; }

// Cpu: the loader's threads compute synthetic samples and the input pipeline uploads them (the
// end-to-end path every data set takes). Cuda: a kernel computes each batch on the GPU, the same
// values, in the compute dtype and layout (launch/synthetic_input.h): no loader, no copy, as
// PyTorch benchmarks with inputs resident on the GPU.
enum class SyntheticDevice { Cpu, Cuda };

inline constexpr EnumName<SyntheticDevice> kSyntheticDeviceNames[] = {{SyntheticDevice::Cpu, "cpu"},
                                                                      {SyntheticDevice::Cuda, "cuda"}};
constexpr std::span<const EnumName<SyntheticDevice>> enum_names(SyntheticDevice) { return kSyntheticDeviceNames; }

// The sampler's permutation (runtime/data/sampler.h). Philox: Fisher-Yates (Knuth, TAOCP vol. 2,
// Algorithm P) over [0, n) driven by keyed_rng(seed, kStreamShuffle, id = epoch): every (seed,
// epoch) pair is its own Philox stream, so unlike torch's seed + epoch, (seed 1, epoch 0) and
// (seed 0, epoch 1) differ.
// Torch: torch's CPU randperm: an MT19937 seeded with the low 32 bits of seed + epoch, then for
// i = 0 .. n-2 swap p[i] with p[i + next() % (n - i)] (n below 2^32 / 20, as torch's own path).
enum class Permutation { Philox, Torch };
// data.permutation's words.
inline constexpr EnumName<Permutation> kPermutationNames[] = {{Permutation::Philox, "philox"},
                                                              {Permutation::Torch, "torch"}};
constexpr std::span<const EnumName<Permutation>> enum_names(Permutation) { return kPermutationNames; }

}  // namespace dp::data
