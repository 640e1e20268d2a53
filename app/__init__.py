"""The Busbar app: its composition root (settings -> clients -> services, :mod:`app.runtime`,
:mod:`app.services`), start-up provisioning (:mod:`app.bootstrap`) and the sample domain it hosts
(:mod:`app.endpoints.sample.events`, :mod:`app.endpoints.sample`).

The library in ``shared/`` never imports this package: the functions in ``functions/`` take their clients
and services from here and hand them to ``shared``.
"""
