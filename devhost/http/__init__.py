"""The host's HTTP front end: HTTP-triggered functions and the admin endpoints.

``server`` (aiohttp) serves them under the route prefix, matching ``routes``' templates; ``keys`` checks
auth levels and keys, which ``key_store`` keeps across restarts in the app's data directory, and
``python -m devhost.http.show_key`` prints for ``make host-key`` / ``make master-key``.
"""
