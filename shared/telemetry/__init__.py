"""OpenTelemetry traces and metrics of Busbar's messaging, through the OpenTelemetry *API* only.

The modules here never install an SDK: without one (nothing configured) every tracer and meter is the API's
no-op, so a span costs a context switch and a metric nothing. ``app.telemetry`` installs the SDK at the edge
when ``OTEL_EXPORTER_OTLP_*`` or ``APPLICATIONINSIGHTS_CONNECTION_STRING`` is set.

* :mod:`shared.telemetry.propagation`: W3C trace context in a message's application properties
  (``traceparent``/``tracestate``, and ``Diagnostic-Id`` as azure-servicebus and .NET write it) and in HTTP
  headers.
* :mod:`shared.telemetry.conventions`: attribute and span names (OpenTelemetry messaging conventions for
  Service Bus, plus ``busbar.*``).
* :mod:`shared.telemetry.instruments`: the metrics (``messaging.process.duration``, NServiceBus's
  ``nservicebus.messaging.*`` and Busbar's recoverability counters).
* :mod:`shared.telemetry.processing`: the processing span of one delivery and its settlement.
* :mod:`shared.telemetry.operations`: publish and send spans, and the spans *linked* to a message's original
  trace that re-drive, bridging, retry and replay make.
"""
