#include "engine/ncu.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <sstream>

#include "core/error.hpp"
#include "core/strings.hpp"
#include "engine/child_process.hpp"
#include "engine/cuda_tools.hpp"

namespace evotune {

namespace {

// One CSV record: quoted fields with "" for a quote, separated by commas.
std::vector<std::string> csv_fields(const std::string& line) {
  std::vector<std::string> out;
  std::string cur;
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        cur += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        cur += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      out.push_back(cur);
      cur.clear();
    } else if (c != '\r') {
      cur += c;
    }
  }
  out.push_back(cur);
  return out;
}

// "7,520" -> 7520; "" or "n/a" -> nothing.
bool number(const std::string& s, double& v) {
  std::string t;
  for (char c : s)
    if (c != ',') t += c;
  if (t.empty()) return false;
  char* end = nullptr;
  v = std::strtod(t.c_str(), &end);
  return end && *end == '\0';
}

}  // namespace

std::string locate_ncu() {
  return locate_cuda_tool("ncu", "EVOTUNE_NCU");
}

std::string ncu_metrics() {
  return "gpu__time_duration.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed,"
         "dram__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_sector_hit_rate.pct,"
         "sm__warps_active.avg.pct_of_peak_sustained_active,sm__cycles_elapsed.avg.per_second,"
         "launch__registers_per_thread,launch__shared_mem_per_block_dynamic,launch__shared_mem_per_block_static,"
         "launch__grid_size,launch__block_size,"
         "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,"
         "regex:^smsp__average_warps_issue_stalled_.*_per_issue_active\\.ratio$";
}

std::vector<KernelProfile> parse_ncu_raw_csv(const std::string& text) {
  std::istringstream in(text);
  std::string line;
  std::vector<std::string> header;
  while (std::getline(in, line))
    if (line.rfind("\"ID\",", 0) == 0) {
      header = csv_fields(line);
      break;
    }
  if (header.empty()) throw EngineError("ncu printed no CSV header (no kernel profiled?)");
  std::map<std::string, size_t> col;
  for (size_t i = 0; i < header.size(); ++i) col[header[i]] = i;
  static const std::string kStallPrefix = "smsp__average_warps_issue_stalled_";
  static const std::string kStallSuffix = "_per_issue_active.ratio";
  std::vector<KernelProfile> out;
  bool units = true;  // the row after the header gives units
  while (std::getline(in, line)) {
    if (line.empty() || line[0] != '"') continue;
    std::vector<std::string> f = csv_fields(line);
    if (units) {
      units = false;
      if (f.empty() || f[0].empty()) continue;
    }
    auto get = [&](const std::string& name, double& v) {
      auto it = col.find(name);
      return it != col.end() && it->second < f.size() && number(f[it->second], v);
    };
    KernelProfile p;
    if (auto it = col.find("Kernel Name"); it != col.end() && it->second < f.size()) p.kernel = f[it->second];
    double v = 0;
    if (!get("gpu__time_duration.sum", v)) throw EngineError("ncu's row for " + p.kernel + " has no duration");
    p.duration_us = v / 1000;  // ns
    if (get("sm__throughput.avg.pct_of_peak_sustained_elapsed", v)) p.sm_pct = v;
    if (get("sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active", v)) p.tensor_pct = v;
    if (get("sm__warps_active.avg.pct_of_peak_sustained_active", v)) p.occupancy_pct = v;
    if (get("dram__throughput.avg.pct_of_peak_sustained_elapsed", v)) p.dram_pct = v;
    if (get("lts__t_sector_hit_rate.pct", v)) p.l2_hit_pct = v;
    if (get("sm__cycles_elapsed.avg.per_second", v)) p.sm_clock_mhz = v / 1e6;
    if (get("launch__registers_per_thread", v)) p.registers = static_cast<int>(v);
    if (get("launch__shared_mem_per_block_dynamic", v)) p.smem_bytes += static_cast<long long>(v);
    if (get("launch__shared_mem_per_block_static", v)) p.smem_bytes += static_cast<long long>(v);
    if (get("launch__grid_size", v)) p.grid = static_cast<long long>(v);
    if (get("launch__block_size", v)) p.block = static_cast<long long>(v);
    for (const auto& [name, i] : col) {
      if (name.size() <= kStallPrefix.size() + kStallSuffix.size() || name.rfind(kStallPrefix, 0) != 0 ||
          name.compare(name.size() - kStallSuffix.size(), kStallSuffix.size(), kStallSuffix) != 0)
        continue;
      std::string reason = name.substr(kStallPrefix.size(), name.size() - kStallPrefix.size() - kStallSuffix.size());
      if (reason != "selected" && i < f.size() && number(f[i], v) && v > 0) p.stalls.emplace_back(reason, v);
    }
    std::stable_sort(p.stalls.begin(), p.stalls.end(),
                     [](const auto& a, const auto& b) { return a.second > b.second; });
    out.push_back(std::move(p));
  }
  return out;
}

std::string baseline_range(const std::string& name, int problem) {
  return "evotune_baseline " + name + " p" + std::to_string(problem);
}

namespace {

// ncu, and what selects the launches: every process, the GPU's own clocks,
// the kernels in one NVTX range (at most `launches` of them when > 0).
std::vector<std::string> ncu_launch_args(const std::string& ncu, const std::string& range, int launches) {
  std::vector<std::string> args = {ncu,      "--target-processes", "all",      "--clock-control", "none",
                                   "--nvtx", "--nvtx-include",     range + "/"};
  if (launches > 0) {
    args.push_back("--launch-count");
    args.push_back(std::to_string(launches));
  }
  return args;
}

NcuOutput run_ncu_args(std::vector<std::string> args, const std::vector<std::string>& program, double timeout_s) {
  args.insert(args.end(), program.begin(), program.end());
  const CapturedRun r = run_captured(args, timeout_s);
  return NcuOutput{r.exit_code, r.text};
}

}  // namespace

NcuOutput run_ncu(const std::string& ncu, const std::vector<std::string>& program, const std::string& range,
                  int launches, double timeout_s) {
  std::vector<std::string> args = ncu_launch_args(ncu, range, launches);
  for (const char* a : {"--csv", "--page", "raw", "--metrics"}) args.push_back(a);
  args.push_back(ncu_metrics());
  return run_ncu_args(std::move(args), program, timeout_s);
}

NcuOutput run_ncu_report(const std::string& ncu, const std::vector<std::string>& program, const std::string& range,
                         int launches, const std::string& report, double timeout_s) {
  std::vector<std::string> args = ncu_launch_args(ncu, range, launches);
  for (const char* a : {"--set", "full", "--import-source", "yes", "-f", "-o"}) args.push_back(a);
  args.push_back(report);
  return run_ncu_args(std::move(args), program, timeout_s);
}

std::string ncu_version(const std::string& ncu) {
  const CapturedRun r = run_captured({ncu, "--version"}, 30);
  for (const std::string& line : split(r.text, '\n'))
    if (line.rfind("Version ", 0) == 0) return "Nsight Compute " + split(line.substr(8), ' ').front();
  return "Nsight Compute";
}

std::string ncu_failure(const std::string& output) {
  if (output.find("ERR_NVGPUCTRPERM") != std::string::npos)
    return "ncu has no permission to read the GPU's performance counters (ERR_NVGPUCTRPERM): run as root, or allow "
           "profiling for all users (NVreg_RestrictProfilingToAdminUsers=0)";
  if (output.find("No kernels were profiled") != std::string::npos) return "ncu profiled no kernel";
  return "";
}

}  // namespace evotune
