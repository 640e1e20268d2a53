"""The fallback-topic router: the pure decision (:mod:`~shared.router.decision`) and its I/O
(:mod:`~shared.router.service`: the namespace snapshot, the bridge, the unrouted archive)."""
