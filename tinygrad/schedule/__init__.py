"""The scheduler: rangeify (tensor graph -> kernel graph) and memory planning."""
