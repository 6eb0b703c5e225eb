// A build without MPI, started by a launcher as one of several ranks, would
// otherwise run as many separate searches on one database: it refuses.
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "store/store.hpp"
#include "tests/catch.hpp"
#include "tests/paths.hpp"
#include "tests/temp_dir.hpp"

using namespace evotune;

namespace {

int run_with_ranks(const std::string& ranks, const std::string& db, std::string& output) {
  const std::string cmd = "OMPI_COMM_WORLD_SIZE=" + ranks + " '" + evotune_test::binary() + "' --db '" + db +
                          "' run -q --replay '" + evotune_test::source_dir() +
                          "/tests/data/gemm_h200.json' --budget 2 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  REQUIRE(p);
  char buf[4096];
  size_t n;
  output.clear();
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) output.append(buf, n);
  const int st = pclose(p);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

}  // namespace

TEST_CASE("a build without MPI refuses to run as one of several ranks, and runs as the only one", "[mpi]") {
  evotune_test::TempDir t;
  const std::string db = (t.path / "n.db").string();
  std::string log;
  CHECK(run_with_ranks("3", db, log) == 2);
  CHECK(log.find("started as one of 3 MPI ranks, but this evotune was built without MPI") != std::string::npos);
  CHECK(run_with_ranks("1", db, log) == 0);
  INFO(log);
  CHECK(Store::open(db, Store::Mode::read_only).runs().size() == 1);
}
