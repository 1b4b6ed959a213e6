"""A trace one of whose spans ends after its run was written, sent by the
OpenTelemetry SDK's OTLP/HTTP exporter to OTEL_EXPORTER_OTLP_ENDPOINT
(reel collect), one span per export as the SDK's SimpleSpanProcessor
sends them.

The agent's root span ends with one tool's span ended beneath it and
another still running; the script prints `root TRACEID` and waits for a
line on standard input (the test sends it once reel has written the run).
Then the running tool's span ends and is exported: late. Last, the
exporter sends that span and the first tool's again, as an exporter
retries a request it is not sure arrived."""

import sys

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult


class Kept(SpanProcessor):
    """Keeps each span as it ends, to send it again."""

    def __init__(self):
        self.ended = {}

    def on_end(self, span):
        self.ended[span.name] = span


exporter = OTLPSpanExporter()
kept = Kept()
provider = TracerProvider(resource=Resource.create({"service.name": "late-app"}))
provider.add_span_processor(SimpleSpanProcessor(exporter))
provider.add_span_processor(kept)
tracer = provider.get_tracer("late-agent")


def tool(name, call_id, arguments, context):
    return tracer.start_span(
        f"execute_tool {name}",
        context=context,
        attributes={
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": name,
            "gen_ai.tool.call.id": call_id,
            "gen_ai.tool.call.arguments": arguments,
        },
    )


root = tracer.start_span(
    "invoke_agent weather-agent",
    attributes={
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "weather-agent",
        "user.id": "ada",
    },
)
inside = trace.set_span_in_context(root)
early = tool("get_weather", "call-1", '{"city": "Paris"}', inside)
early.set_attribute("gen_ai.tool.call.result", "sunny")
early.end()
slow = tool("slow_lookup", "call-2", '{"term": "tides"}', inside)
root.end()
print("root", trace.format_trace_id(root.get_span_context().trace_id), flush=True)

sys.stdin.readline()
slow.set_attribute("gen_ai.tool.call.result", "high tide at noon")
slow.end()
for name in ["execute_tool slow_lookup", "execute_tool get_weather"]:
    assert exporter.export([kept.ended[name]]) == SpanExportResult.SUCCESS
provider.shutdown()
