import os


def get_random_bytes(n):
    return os.urandom(n)


class PerfStressTest:
    pass


class BatchPerfTest:
    pass
