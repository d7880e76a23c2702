"""Several server processes on one data: Redis carries events, limits and invalidations."""
