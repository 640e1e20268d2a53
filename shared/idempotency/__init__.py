"""Endpoints that handle a message id once: a record per handled message, committed with the handlers' rows
and their outgoing messages (an outbox, as NServiceBus's Outbox on its Azure Table persistence).

:mod:`.records` keeps the records in Azure Table Storage (the app's ``AzureWebJobsStorage``; Azurite under
``make run``); :mod:`.once` runs a message's handlers at most once per endpoint and message id, dispatching
its outgoing messages after the commit, from the record, so a crash between the commit and the dispatch
re-dispatches the same messages (the same ids: the broker's duplicate detection drops the copies).
"""
