// Plain-text tables for the terminal: columns sized to their widest cell,
// numbers right-aligned.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace evotune {

class Table {
 public:
  explicit Table(std::vector<std::string> header) : header_(std::move(header)) {}
  void add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  bool empty() const { return rows_.empty(); }
  void print(std::ostream& os) const;

 private:
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;
};

// "18.42", "1234", "1.23e+05": latency in µs with 3-4 significant digits.
std::string fmt_us(double us);
std::string fmt_ratio(double r);       // "1.23x"
std::string fmt_sci(double v);         // "3.1e-03"
std::string fmt_kib(long long bytes);  // "48.0K"

}  // namespace evotune
