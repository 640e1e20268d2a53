"""``AzureWebJobsStorage`` locally: Azurite, Microsoft's Azure Storage emulator, a child process of devhost.

``settings`` decides when devhost's Azurite serves the app's storage and the connection string it gets;
``azurite`` starts Azurite (``azurite_signals.cjs`` is preloaded into it) and ``azurite_service`` keeps it
running while the host runs. A package of its own: Azurite is a process of its own that the CLI starts
beside the host, and nothing else of devhost imports it.
"""
