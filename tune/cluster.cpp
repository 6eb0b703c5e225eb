#include "tune/cluster.hpp"

#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "core/error.hpp"
#include "core/strings.hpp"

namespace evotune {

namespace {

void put_u64(std::string& out, uint64_t v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof v);
}

uint64_t get_u64(const std::string& in, size_t& at) {
  uint64_t v = 0;
  if (in.size() - at < sizeof v) throw EngineError("a message from another rank is cut short");
  std::memcpy(&v, in.data() + at, sizeof v);
  at += sizeof v;
  return v;
}

std::string get_bytes(const std::string& in, size_t& at) {
  const uint64_t n = get_u64(in, at);
  if (in.size() - at < n) throw EngineError("a message from another rank is cut short");
  std::string out = in.substr(at, n);
  at += n;
  return out;
}

int env_int(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return 0;
  auto n = parse_int(v);
  return n && *n > 0 ? static_cast<int>(*n) : 0;
}

}  // namespace

// count | (bytes | data)*, the header first, in CBOR: it keeps a NaN (a
// verification error of a kernel that wrote NaN) where JSON text has none.
std::string pack(const Message& m) {
  std::string out;
  put_u64(out, m.blobs.size() + 1);
  std::string header;
  nlohmann::json::to_cbor(m.header, header);
  put_u64(out, header.size());
  out += header;
  for (const std::string& b : m.blobs) {
    put_u64(out, b.size());
    out += b;
  }
  return out;
}

Message unpack(const std::string& bytes) {
  size_t at = 0;
  const uint64_t count = get_u64(bytes, at);
  if (count == 0) throw EngineError("a message from another rank has no header");
  Message m;
  m.header = nlohmann::json::from_cbor(get_bytes(bytes, at), true, false);
  if (m.header.is_discarded()) throw EngineError("a message from another rank has a malformed header");
  for (uint64_t i = 1; i < count; ++i) m.blobs.push_back(get_bytes(bytes, at));
  return m;
}

int launched_ranks() {
  if (int n = env_int("OMPI_COMM_WORLD_SIZE")) return n;
  if (int n = env_int("PMI_SIZE")) return n;
  if (std::getenv("PMIX_RANK")) {
    if (int n = env_int("SLURM_STEP_NUM_TASKS")) return n;
    if (int n = env_int("SLURM_NTASKS")) return n;
    return 1;
  }
  return 0;
}

}  // namespace evotune
