"""Provisioning endpoints' subscriptions over the management plane: the service
(:mod:`~shared.api.provisioning.service`), its request bodies (:mod:`~shared.api.provisioning.requests`),
which endpoints may be provisioned (:mod:`~shared.api.provisioning.admission`) and the cross-instance
locks that serialise changes (:mod:`~shared.api.provisioning.lock`)."""
