# Flow sizes of the web-search workload: the background traffic of a
# production web-search cluster measured by Alizadeh et al., "Data Center
# TCP (DCTCP)", SIGCOMM 2010 (its flow-size distribution figure), in the
# tabulated form of Alizadeh et al., "pFabric: Minimal Near-Optimal
# Datacenter Transport", SIGCOMM 2013, whose points count 1460-byte
# packets; here converted to bytes (packets x 1460).
#
# Format (sim::FlowSizeCdf): SIZE_BYTES CUMULATIVE_PROBABILITY, one point a
# line; linear between points; a repeated size is a point mass there.
# Mean 1.67 MB; 53% of flows are at most 77 KB, and flows over 1 MB carry
# most of the bytes.
8760 0
8760 0.15
18980 0.2
27740 0.3
48180 0.4
77380 0.53
194180 0.6
973820 0.7
1946180 0.8
4866180 0.9
9733820 0.97
29200000 1
