// The whole public API: endpoints and connections on DPDK ports
// (endpoint.hpp), their vocabulary (types.hpp, counters.hpp), the
// transport in virtual time (simulation.hpp) or with I/O of your own
// (sans_io.hpp), and the version.
#pragma once

#include "metaroce/counters.hpp"
#include "metaroce/endpoint.hpp"
#include "metaroce/sans_io.hpp"
#include "metaroce/simulation.hpp"
#include "metaroce/types.hpp"
#include "metaroce/version.hpp"
