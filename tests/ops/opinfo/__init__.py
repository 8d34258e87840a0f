"""torch's OpInfo sample inputs (shipped in the torch wheel) run through our Tensor API and compared with torch,
forward and backward. See driver.py; the adapters per area map a torch op onto ours."""
