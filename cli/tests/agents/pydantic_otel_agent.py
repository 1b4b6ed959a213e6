"""A Pydantic AI agent (TestModel: no model service) with instrumentation
on, its spans sent by the OpenTelemetry SDK's OTLP/HTTP exporter to
OTEL_EXPORTER_OTLP_ENDPOINT (reel collect). Four tools: one answers (and
echoes the API key of WEATHER_API_KEY, which reel must scrub), one adds,
one fails once (ModelRetry) and then answers, one runs a sub-agent with a
tool of its own. Prints the agent's output as JSON."""

import json
import os

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from pydantic_ai import Agent, ModelRetry, RunContext
from pydantic_ai.models.test import TestModel

provider = TracerProvider(
    resource=Resource.create({"service.name": "weather-app", "service.version": "1.2.3"})
)
provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
trace.set_tracer_provider(provider)
Agent.instrument_all()

helper = Agent(TestModel(), name="helper")


@helper.tool_plain
def lookup(term: str) -> str:
    """Looks a term up."""
    return f"definition of {term}"


agent = Agent(TestModel(), name="weather-agent")


@agent.tool_plain
def get_weather(city: str) -> str:
    """The weather of a city."""
    return f"sunny in {city} (key {os.environ['WEATHER_API_KEY']})"


@agent.tool_plain
def add(a: int, b: int) -> int:
    """Adds two numbers."""
    return a + b


attempts = []


@agent.tool_plain(retries=1)
def flaky(reason: str) -> str:
    """Fails the first time."""
    attempts.append(reason)
    if len(attempts) == 1:
        raise ModelRetry(f"not now: {reason}")
    return "ok now"


@agent.tool
async def ask_helper(ctx: RunContext[None], question: str) -> str:
    """Asks the helper agent."""
    result = await helper.run(question)
    return result.output


result = agent.run_sync("What is the weather?")
provider.force_flush()
provider.shutdown()
print(json.dumps({"output": result.output}))
