from devtools_testutils.perfstress_tests import BatchPerfTest, PerfStressTest, get_random_bytes

__all__ = ["BatchPerfTest", "PerfStressTest", "get_random_bytes"]
