// The compute-sanitizer gate's parts that need no GPU: reading the tool's log
// and finding the tool. The logs in tests/data/sanitizer/ are what
// compute-sanitizer 2025.3.1 wrote on an H100 for a small program with a
// write one past the end of a buffer, a shared-memory race, and no fault.
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "core/error.hpp"
#include "core/strings.hpp"
#include "engine/sanitizer.hpp"
#include "tests/catch.hpp"
#include "tests/paths.hpp"
#include "tests/temp_dir.hpp"

using namespace evotune;

namespace {

std::string sample(const std::string& name) {
  return read_file(evotune_test::source_dir() + "/tests/data/sanitizer/" + name);
}

}  // namespace

TEST_CASE("a memcheck log gives its first report, without the host backtrace", "[sanitizer]") {
  auto r = first_sanitizer_report(sample("memcheck_write.log"));
  REQUIRE(r);
  INFO(*r);
  CHECK(starts_with(*r, "Invalid __global__ write of size 4 bytes | at oob_write(float *, int)+0x120"));
  CHECK(r->find("is 1 bytes after the nearest allocation") != std::string::npos);
  CHECK(r->find("Host Frame") == std::string::npos);
  CHECK(r->find("cudaErrorLaunchFailure") == std::string::npos);  // the second report
}

TEST_CASE("a racecheck log gives the race, a clean log gives nothing, a cut-off log is an error", "[sanitizer]") {
  auto r = first_sanitizer_report(sample("racecheck_race.log"));
  REQUIRE(r);
  CHECK(starts_with(*r, "Error: Race reported between Write access"));
  CHECK_FALSE(first_sanitizer_report(sample("clean.log")));
  // Only warnings counted: no finding.
  CHECK_FALSE(
      first_sanitizer_report("========= COMPUTE-SANITIZER\n========= Warning: Race reported between Read access\n"
                             "=========\n========= RACECHECK SUMMARY: 1 hazard displayed (0 errors, 1 warning)\n"));
  // The tool stopped before its summary (killed, crashed): not a verdict.
  CHECK_THROWS_AS(first_sanitizer_report("========= COMPUTE-SANITIZER\n========= Invalid __global__ read\n"),
                  EngineError);
  CHECK_THROWS_AS(first_sanitizer_report(""), EngineError);
}

TEST_CASE("each tool's finding has its status", "[sanitizer]") {
  CHECK(sanitizer_finding_status("memcheck") == TrialStatus::crashed);
  CHECK(sanitizer_finding_status("racecheck") == TrialStatus::incorrect);
  CHECK(sanitizer_finding_status("synccheck") == TrialStatus::incorrect);
}

TEST_CASE("compute-sanitizer is found through EVOTUNE_SANITIZER, else on the usual paths", "[sanitizer]") {
  evotune_test::TempDir t;
  const std::string fake = (t.path / "compute-sanitizer").string();
  std::ofstream(fake) << "#!/bin/sh\n";
  std::filesystem::permissions(fake, std::filesystem::perms::owner_all);
  const char* old = std::getenv("EVOTUNE_SANITIZER");
  const std::string saved = old ? old : "";
  ::setenv("EVOTUNE_SANITIZER", fake.c_str(), 1);
  CHECK(locate_compute_sanitizer() == fake);
  ::setenv("EVOTUNE_SANITIZER", (t.path / "missing").c_str(), 1);
  CHECK(locate_compute_sanitizer().empty());  // named but absent: not silently another one
  if (old)
    ::setenv("EVOTUNE_SANITIZER", saved.c_str(), 1);
  else
    ::unsetenv("EVOTUNE_SANITIZER");
}
