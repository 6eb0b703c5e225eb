// Small string helpers used across folders.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace evotune {

std::vector<std::string> split(std::string_view s, char sep);
std::string trim(std::string_view s);
std::string to_lower(std::string_view s);
std::string to_upper(std::string_view s);
std::string join(const std::vector<std::string>& parts, std::string_view sep);
bool starts_with(std::string_view s, std::string_view prefix);
bool ends_with(std::string_view s, std::string_view suffix);
// A whole-string decimal integer ("128", "-3", "0"); nullopt on anything
// else: a leading zero ("0512", which C would read as octal), hex, a '+',
// spaces, or a value past int64. Numbers a user types are decimal.
std::optional<int64_t> parse_int(std::string_view s);
// `s` in double quotes for a message; past `max` characters only its start
// and end, with its length (an expression can be 100 000 characters long).
std::string in_quotes(std::string_view s, size_t max = 160);
uint64_t fnv1a64(std::string_view data, uint64_t seed = 0xcbf29ce484222325ULL);
std::string hex64(uint64_t v);
// printf-style formatting into a std::string.
std::string strfmt(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
// Reads a whole regular file; throws std::runtime_error naming the path
// (also for a directory, which a stream would read as empty).
std::string read_file(const std::string& path);
// UTC time as "2026-11-21T10:00:00Z".
std::string utc_now_iso();

}  // namespace evotune
