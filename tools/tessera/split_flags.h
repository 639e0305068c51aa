#pragma once
// --split-mode and --tensor-split (llama.cpp's spellings; main.cpp turns -sm and -ts into them), shared by
// the commands that load a model with -ngl and --device: how the offloaded layers spread over the devices
// --device lists.
#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "tessera/llm/model.h"

namespace tessera::cli {

struct SplitFlags {
  std::string mode = "layer";
  std::vector<float> tensor_split;

  void add_to(CLI::App* cmd) {
    cmd->add_option("--split-mode", mode,
                    "with several devices in --device: layer (each takes a contiguous range of the "
                    "offloaded layers) or none (the first device only)")
        ->check(CLI::IsMember({"none", "layer"}));
    cmd->add_option("--tensor-split", tensor_split,
                    "each device's share of the offloaded layers, e.g. 3,1 (default: by device memory)")
        ->delimiter(',')
        ->check(CLI::NonNegativeNumber);
  }
  void apply(llm::LoadOptions& lo) const {
    lo.split_mode = mode == "none" ? llm::SplitMode::None : llm::SplitMode::Layer;
    lo.tensor_split = tensor_split;
  }
};

}  // namespace tessera::cli
