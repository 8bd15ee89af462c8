"""Hidden vs exposed: each draw's time under other lanes' compute, its pieces, and the sampler's wait mapped in."""
