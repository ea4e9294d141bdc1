# Flow sizes of the data-mining workload: a data-mining cluster measured by
# Greenberg et al., "VL2: A Scalable and Flexible Data Center Network",
# SIGCOMM 2009 (its flow-size distribution figure), in the tabulated form
# of Alizadeh et al., "pFabric: Minimal Near-Optimal Datacenter Transport",
# SIGCOMM 2013, whose points count 1460-byte packets; here converted to
# bytes (packets x 1460).
#
# Format (sim::FlowSizeCdf): SIZE_BYTES CUMULATIVE_PROBABILITY, one point a
# line; linear between points; a repeated size is a point mass there.
# Heavy-tailed: half the flows are one packet, and the largest 1% (up to
# 973 MB) carry most of the bytes (mean 7.5 MB).
1460 0
1460 0.5
2920 0.6
4380 0.7
10220 0.8
389820 0.9
3076220 0.95
97333820 0.99
973333820 1
