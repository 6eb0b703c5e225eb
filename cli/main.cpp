#include "cli/app.hpp"

int main(int argc, char** argv) {
  return evotune::cli_main(argc, argv);
}
