// Numbers as people read them: latencies, ratios, errors, sizes and versions,
// formatted one way everywhere — in the terminal's tables, the Markdown
// report and the exported header's provenance comment.
#pragma once

#include <string>

namespace evotune {

// Latency in µs with 3-4 significant digits and no unit, for table columns:
// "1.234", "18.42", "123.4", "1.235e+05"; "-" for none (zero or negative).
std::string fmt_us(double us);
// Latency in µs with three decimals and its unit, for prose: "18.420 us";
// "n/a" when not finite.
std::string fmt_us_fixed(double us);
std::string fmt_ratio(double r);       // "1.23x"; "-" for none (zero or negative)
std::string fmt_sci(double v);         // "3.1e-03": a column of errors
std::string fmt_err(double v);         // "0.0123" (3 significant digits); "NaN" when not finite
std::string fmt_kib(long long bytes);  // "48.0K"

// "13.0" from 13000 (CUDA's 1000*major + 10*minor); "unknown" for 0 (none recorded).
std::string cuda_version_string(int v);
// "9.0" from compute capability 90; "unknown" for 0.
std::string cc_string(int cc);

}  // namespace evotune
