"""Your endpoints: one module (or package) each, directly under ``app/endpoints/``.

Every module or package here is imported when the app starts, and every
:class:`~shared.handlers.Endpoint` it defines at module level (or lists in a module-level ``ENDPOINTS``) is
hosted: its queue trigger, its subscriptions (provisioned by ``make run``, served by the ``PUT``) and its
contracts, which the HTTP API then publishes (:mod:`app.discovery`). No other file names it: its queue is
``BUSBAR_<NAME>_QUEUE``, default the endpoint's name. ``sample/`` is the sample's (switched off with
``BUSBAR_SAMPLE_ENDPOINTS=false``). The step-by-step guide is docs/endpoints.md.
"""
