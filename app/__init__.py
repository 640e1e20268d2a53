"""The Busbar app: its composition root (settings -> clients -> services, :mod:`app.runtime`,
:mod:`app.services`), start-up provisioning (:mod:`app.bootstrap`) and the endpoints it hosts: every
endpoint module under ``app/endpoints/`` (:mod:`app.endpoints`, found by :mod:`app.discovery`), the
sample's package :mod:`app.endpoints.sample` among them unless ``BUSBAR_SAMPLE_ENDPOINTS`` switches it off.

The library in ``shared/`` never imports this package: the functions in ``functions/`` take their clients
and services from here and hand them to ``shared``.
"""
