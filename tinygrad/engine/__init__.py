"""The engine: schedules (ordered kernels with their buffers) and running them."""
