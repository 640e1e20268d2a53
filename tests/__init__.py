"""Busbar's tests: a package tree, so test helpers import each other as ``tests.<dir>.<module>``."""
