"""The training benchmark: a driver each rank runs under DeepSpeed, and its summary schema."""
