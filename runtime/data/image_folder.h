// defines: list_image_folder (torchvision's ImageFolder listing: classes, samples, their order),
// open_image_folder (a folder as an ImageDataset), check_same_classes (val against train), and
// open_unlabeled_images (every image under a folder, without labels, for prediction).
//
// torchvision's datasets.folder.ImageFolder, reproduced: the classes are the sorted names of the
// folder's subdirectories (symlinks followed, hidden ones included), class index = position; a
// class's samples are the files under its folder (recursively, symlinks followed) whose names end
// in an image extension (case-insensitive), ordered by sorted(os.walk(...)) then sorted file names.
// So sample i and its label are those of torchvision's ImageFolder(dir).samples[i].
//
// dptrain decodes .jpg/.jpeg/.png; files with torchvision's other image extensions (.bmp .pgm
// .ppm .tif .tiff .webp) are an error naming them, or, with skip_bad, left out (then the indices
// after them differ from torchvision's). A class folder without images is an error (torchvision:
// "Found no valid file for the classes ..."), or with skip_bad a class without samples.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "runtime/data/image_dataset.h"

namespace dp::data {

struct FolderListing {
  std::vector<std::string> classes;        // sorted subfolder names
  std::vector<std::string> files;          // the samples, in torchvision's order
  std::vector<int32_t> labels;             // (files): index into classes
  std::vector<std::string> empty_classes;  // class folders without a decodable image
  std::vector<std::string> unsupported;    // files with an image extension we do not decode
};

// The listing of `dir` (no errors for empty classes or unsupported files: the caller decides).
// Throws UserError when dir is not a folder or has no subfolder.
FolderListing list_image_folder(const std::string& dir);

// dir's listing as a data set; empty classes and unsupported files are errors naming them unless
// options.skip_bad (then warnings). `what` names the split in messages ("train", "val").
std::unique_ptr<ImageDataset> open_image_folder(const std::string& dir, const ImageOptions& options);

// UserError naming the differences when val's classes are not train's (same names, same order).
void check_same_classes(const Dataset& train, const std::string& train_dir, const Dataset& val,
                        const std::string& val_dir);

// Every .jpg/.jpeg/.png under `dir` (recursively, sorted as the folder listing), or the one file
// `dir` names; unlabeled (labels -1, no classes). For prediction: sample_name(i) is the file.
std::unique_ptr<ImageDataset> open_unlabeled_images(const std::string& dir, const ImageOptions& options);

}  // namespace dp::data
