#include "launch/cli.h"

int main(int argc, char** argv) { return dp::launch::run_cli(argc, argv); }
