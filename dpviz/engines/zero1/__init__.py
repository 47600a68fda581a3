"""ZeRO-1: torch's ZeroRedundancyOptimizer over DistributedDataParallel, each rank stepping a shard."""
