// What an engine host counts: the host's counters (lib/host), which the
// engine fills in for what only it sees (mbufs, the PMD's rings).
#pragma once

#include "host/host_counters.hpp"

namespace metaroce::engine {

using EngineCounters = host::HostCounters;

}  // namespace metaroce::engine
