#include "core/peak.hpp"

#include <vector>

namespace evotune {

namespace {

struct Model {
  const char* match;  // a word of CUDA's device name, first match wins
  const char* label;
  double f16;  // dense fp16/bf16 tensor TFLOP/s, fp32 accumulation
  double f32;  // fp32 CUDA cores
};

// More specific names first ("H100 PCIe" before "H100", "L40S" before "L4").
const std::vector<Model>& models() {
  static const std::vector<Model> all = {
      {"H200 NVL", "H200 NVL", 835.5, 60.0}, {"H200", "H200 SXM", 989.4, 66.9}, {"H100 PCIe", "H100 PCIe", 756.5, 51.2},
      {"H100 NVL", "H100 NVL", 835.5, 60.0}, {"H100", "H100 SXM", 989.4, 66.9}, {"A100", "A100", 312.0, 19.5},
      {"L40S", "L40S", 362.1, 91.6},         {"L4", "L4", 121.0, 30.3},
  };
  return all;
}

// `word` occurs in `name` on word boundaries ("L4" is not in "L40S").
bool has_word(const std::string& name, const std::string& word) {
  for (size_t at = name.find(word); at != std::string::npos; at = name.find(word, at + 1)) {
    const size_t end = at + word.size();
    const bool left = at == 0 || name[at - 1] == ' ';
    const bool right = end == name.size() || name[end] == ' ' || name[end] == '-';
    if (left && right) return true;
  }
  return false;
}

}  // namespace

Peak peak_tflops(const std::string& device_name, const std::string& dtype) {
  for (const Model& m : models()) {
    if (!has_word(device_name, m.match)) continue;
    if (dtype == "fp16" || dtype == "bf16")
      return {m.f16, "dense " + dtype + " tensor math, NVIDIA's " + m.label + " datasheet"};
    if (dtype == "fp32") return {m.f32, std::string("fp32 CUDA cores, NVIDIA's ") + m.label + " datasheet"};
    return {};
  }
  return {};
}

}  // namespace evotune
