#include "cli/table.hpp"

#include <algorithm>
#include <cctype>

namespace evotune {

namespace {

bool numeric(const std::string& s) {
  if (s.empty()) return false;
  char c = s[0];
  return std::isdigit(static_cast<unsigned char>(c)) || ((c == '-' || c == '.') && s.size() > 1);
}

size_t display_width(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s)
    if ((c & 0xC0) != 0x80) ++n;  // count UTF-8 code points (µ, ×)
  return n;
}

}  // namespace

void Table::print(std::ostream& os) const {
  std::vector<size_t> w(header_.size(), 0);
  for (size_t i = 0; i < header_.size(); ++i) w[i] = display_width(header_[i]);
  for (const auto& r : rows_)
    for (size_t i = 0; i < r.size() && i < w.size(); ++i) w[i] = std::max(w[i], display_width(r[i]));
  auto line = [&](const std::vector<std::string>& r, bool head) {
    std::string out;
    for (size_t i = 0; i < w.size(); ++i) {
      std::string cell = i < r.size() ? r[i] : "";
      std::string pad(w[i] - display_width(cell), ' ');
      bool last = i + 1 == w.size();
      if (!head && numeric(cell))
        out += pad + cell;
      else
        out += cell + (last ? "" : pad);
      if (!last) out += "  ";
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();
    os << out << '\n';
  };
  line(header_, true);
  for (const auto& r : rows_) line(r, false);
}

}  // namespace evotune
