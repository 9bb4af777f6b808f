"""Running tasks: analyzing one task or a batch, timing a task in an isolated worker process."""
