// Plain-text tables for the terminal: columns sized to their widest cell,
// numbers right-aligned.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "core/format.hpp"  // what fills the cells

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

}  // namespace evotune
