"""A minimal OTLP/HTTP receiver for tests: a real HTTP server on 127.0.0.1 (port 0) that decodes the
protobuf ``ExportTraceServiceRequest`` / ``ExportMetricsServiceRequest`` bodies OpenTelemetry's OTLP/HTTP
exporters POST to ``/v1/traces`` and ``/v1/metrics`` (https://opentelemetry.io/docs/specs/otlp/#otlphttp),
and keeps what arrived for the test to read. Gzip-compressed bodies (``OTEL_EXPORTER_OTLP_COMPRESSION``) too.
"""

from __future__ import annotations

import gzip
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    return None if kind is None else getattr(value, kind)


def _attributes(pairs: Any) -> dict[str, Any]:
    return {pair.key: _value(pair.value) for pair in pairs if isinstance(pair, KeyValue)}


@dataclass(frozen=True)
class ReceivedSpan:
    """One exported span, ids as lowercase hex (as a ``traceparent`` spells them)."""

    name: str
    kind: int
    trace_id: str
    span_id: str
    parent_span_id: str
    attributes: dict[str, Any]
    links: list[tuple[str, str]]  # (trace id, span id) of each link
    events: list[tuple[str, dict[str, Any]]]
    service_name: str


@dataclass(frozen=True)
class ReceivedMetric:
    """One exported metric's data points: kind (``histogram``, ``sum``, ...) and each point's attributes
    with its count (histogram) or value (sum)."""

    name: str
    unit: str
    kind: str
    points: list[tuple[dict[str, Any], float]]


@dataclass
class Collector:
    """What the receiver got so far (thread-safe reads through the methods)."""

    port: int = 0
    _spans: list[ReceivedSpan] = field(default_factory=list)
    _metrics: list[ReceivedMetric] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def endpoint(self) -> str:
        """The base URL for ``OTEL_EXPORTER_OTLP_ENDPOINT`` (the exporters append ``/v1/traces``...)."""
        return f"http://127.0.0.1:{self.port}"

    def spans(self) -> list[ReceivedSpan]:
        with self._lock:
            return list(self._spans)

    def metrics(self) -> list[ReceivedMetric]:
        with self._lock:
            return list(self._metrics)

    def process_span(self, trace_id: str, endpoint: str) -> ReceivedSpan | None:
        """The first ``process`` span of ``endpoint`` (its ``busbar.endpoint``) in trace ``trace_id``."""
        return next(
            (
                s
                for s in self.spans()
                if s.trace_id == trace_id
                and s.attributes.get("busbar.endpoint") == endpoint
                and s.attributes.get("messaging.operation.type") == "process"
            ),
            None,
        )

    def wait_for[T](self, find: Callable[[], T | None], what: str, timeout: float = 30.0) -> T:
        """``find()``'s first non-empty answer, polling; AssertionError naming ``what`` after ``timeout``."""
        deadline = time.monotonic() + timeout
        while True:
            found = find()
            if found:
                return found
            if time.monotonic() > deadline:
                names = sorted({s.name for s in self.spans()})
                raise AssertionError(f"timed out waiting for {what}; spans received: {names}")
            time.sleep(0.1)

    def _add_traces(self, body: bytes) -> None:
        request = ExportTraceServiceRequest.FromString(body)
        spans = []
        for resource_spans in request.resource_spans:
            service = _attributes(resource_spans.resource.attributes).get("service.name", "")
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    spans.append(
                        ReceivedSpan(
                            name=span.name,
                            kind=span.kind,
                            trace_id=span.trace_id.hex(),
                            span_id=span.span_id.hex(),
                            parent_span_id=span.parent_span_id.hex(),
                            attributes=_attributes(span.attributes),
                            links=[(link.trace_id.hex(), link.span_id.hex()) for link in span.links],
                            events=[(e.name, _attributes(e.attributes)) for e in span.events],
                            service_name=str(service),
                        )
                    )
        with self._lock:
            self._spans.extend(spans)

    def _add_metrics(self, body: bytes) -> None:
        request = ExportMetricsServiceRequest.FromString(body)
        metrics = []
        for resource_metrics in request.resource_metrics:
            for scope_metrics in resource_metrics.scope_metrics:
                for metric in scope_metrics.metrics:
                    kind = metric.WhichOneof("data") or ""
                    points: list[tuple[dict[str, Any], float]] = []
                    if kind == "histogram":
                        points = [(_attributes(p.attributes), p.count) for p in metric.histogram.data_points]
                    elif kind == "sum":
                        points = [
                            (_attributes(p.attributes), p.as_int or p.as_double)
                            for p in metric.sum.data_points
                        ]
                    metrics.append(ReceivedMetric(metric.name, metric.unit, kind, points))
        with self._lock:
            self._metrics.extend(metrics)


def new_traceparent() -> tuple[str, str, str]:
    """A caller's fresh W3C ``traceparent`` header (sampled), with its trace id and span id."""
    trace_id, span_id = secrets.token_hex(16), secrets.token_hex(8)
    return f"00-{trace_id}-{span_id}-01", trace_id, span_id


def _handler(collector: Collector) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if self.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            if self.path == "/v1/traces":
                collector._add_traces(body)
                answer = ExportTraceServiceResponse().SerializeToString()
            elif self.path == "/v1/metrics":
                collector._add_metrics(body)
                answer = ExportMetricsServiceResponse().SerializeToString()
            else:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, format: str, *args: Any) -> None:  # quiet: the test reads the collector
            pass

    return Handler


@contextmanager
def running_collector() -> Iterator[Collector]:
    """An OTLP/HTTP receiver on 127.0.0.1 (a free port), stopped on exit."""
    collector = Collector()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(collector))
    server.daemon_threads = True
    collector.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, name="otlp-collector", daemon=True)
    thread.start()
    try:
        yield collector
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
