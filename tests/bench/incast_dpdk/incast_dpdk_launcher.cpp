// tools/bench incast-dpdk: runs incast_dpdk_bench.sh (the processes, the
// table and the JSON line are its) with the programs of this build.
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  std::vector<std::string> args = {"/bin/bash", METAROCE_BENCH_SCRIPT, METAROCE_GEN_PATH, METAROCE_SINK_PATH,
                                   METAROCE_FABRIC_PATH};
  for (int i = 1; i < argc; ++i) args.emplace_back(argv[i]);  // --benchmark_* from tools/bench are ignored there
  std::vector<char*> argv_out;
  for (std::string& a : args) argv_out.push_back(a.data());
  argv_out.push_back(nullptr);
  execv("/bin/bash", argv_out.data());
  std::perror("incast-dpdk: /bin/bash");
  return 1;
}
