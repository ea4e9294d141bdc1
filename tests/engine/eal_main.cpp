// gtest main for test binaries that need DPDK: EAL starts once per process
// (rte_eal_init cannot run twice), in a gtest Environment, without
// hugepages, PCI or kernel modules.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "engine/eal.hpp"

namespace {

class EalEnvironment final : public ::testing::Environment {
 public:
  void SetUp() override {
    // Built in one initializer: GCC 12 at -O3 warns falsely (-Wrestrict,
    // PR105329) on assigning string literals to these members one by one.
    // A vdev named on the command line proves the PMD constructors are linked.
    const metaroce::engine::EalOptions options{
        .program_name = std::string("engine-test"),
        .lcores = std::string("0"),
        .memory_mb = 512,
        .hugepages = metaroce::engine::HugepagePolicy::no,
        .vdevs = {std::string("net_ring0")},
        .pci_allow = {},
        .log_level = std::string("error"),
        .extra_args = {},
    };
    std::string error;
    if (!metaroce::engine::start_eal(options, error)) {
      std::fprintf(stderr, "%s\n", error.c_str());
      std::exit(1);
    }
  }
};

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  ::testing::AddGlobalTestEnvironment(new EalEnvironment());
  return RUN_ALL_TESTS();
}
