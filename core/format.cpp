#include "core/format.hpp"

#include <cmath>

#include "core/strings.hpp"

namespace evotune {

std::string fmt_us(double us) {
  if (us <= 0) return "-";
  if (us < 10) return strfmt("%.3f", us);
  if (us < 100) return strfmt("%.2f", us);
  if (us < 100000) return strfmt("%.1f", us);
  return strfmt("%.4g", us);
}

std::string fmt_us_fixed(double us) {
  return std::isfinite(us) ? strfmt("%.3f us", us) : std::string("n/a");
}

std::string fmt_ratio(double r) {
  return r > 0 ? strfmt("%.2fx", r) : "-";
}

std::string fmt_sci(double v) {
  return strfmt("%.1e", v);
}

std::string fmt_err(double v) {
  return std::isfinite(v) ? strfmt("%.3g", v) : std::string("NaN");
}

std::string fmt_kib(long long bytes) {
  return strfmt("%.1fK", static_cast<double>(bytes) / 1024.0);
}

std::string cuda_version_string(int v) {
  if (v <= 0) return "unknown";
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

std::string cc_string(int cc) {
  return cc > 0 ? std::to_string(cc / 10) + "." + std::to_string(cc % 10) : "unknown";
}

}  // namespace evotune
