"""Per-endpoint monitoring for the console: what each endpoint handled, retried and dead-lettered per
minute, how long its invocations took and how long messages waited (critical time), and its queue length.

Pure aggregation (:mod:`.histogram`, :mod:`.minute_stats`, :mod:`.recorder`, :mod:`.view`), a background
flusher (:mod:`.flusher`) and the Table Storage edge (:mod:`.table`). OpenTelemetry is separate: this is the
console's own record, kept in the app's storage account so every instance's numbers add up in one place.
"""
