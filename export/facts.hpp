// What the header and the JSON writer both work out from a run before
// writing: the winner checked, the device the spec's expressions see, the
// best trial on each problem and the [defines] on problem 0. Internal to
// export/.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "export/export.hpp"

namespace evotune {

struct ExportFacts {
  const RunInfo& run;
  const KernelSpec& spec;
  const Trial& winner;
  DeviceTraits dev;
  std::vector<std::string> dim_names;                // spec dims, then optional dims with defaults
  std::vector<const Trial*> best_on;                 // per problem: ok trial with the lowest p50 there
  std::map<std::string, std::string> define_values;  // [defines] on problem 0 (those that evaluate)
};

// Throws UsageError when there is no correct winner or no problem.
ExportFacts gather_facts(const ExportInput& in);

const Measurement* measurement_on(const Trial& t, int problem);
bool usable_p50(const Measurement* m);
// The default config's p50 over `t`'s on one problem, when both were measured.
std::optional<double> speedup_on(const ExportInput& in, const Trial& t, int problem);

}  // namespace evotune
