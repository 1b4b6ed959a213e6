"""An OpenAI Agents SDK agent with an offline model (a scripted Model:
no model service), traced through OpenInference's instrumentation, its
spans sent by the OpenTelemetry SDK's OTLP/HTTP exporter to
OTEL_EXPORTER_OTLP_ENDPOINT (reel collect). The model calls three tools
at once: one answers (and echoes the API key of WEATHER_API_KEY, which
reel must scrub), one adds, one fails; then it answers. Prints the
agent's output as JSON."""

import asyncio
import json
import os

from agents import Agent, ModelResponse, Runner, Usage, function_tool
from agents.models.interface import Model
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)
from openinference.instrumentation.openai_agents import OpenAIAgentsInstrumentor
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

provider = TracerProvider(resource=Resource.create({"service.name": "agents-app"}))
provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
# Exclusive (the default): the SDK's own trace upload is replaced.
OpenAIAgentsInstrumentor().instrument(tracer_provider=provider)


def call(call_id, name, arguments):
    return ResponseFunctionToolCall(
        id=f"fc_{call_id}",
        call_id=call_id,
        name=name,
        arguments=json.dumps(arguments),
        type="function_call",
        status="completed",
    )


class ScriptedModel(Model):
    """Answers each turn from a fixed script: the tool calls, then text."""

    def __init__(self):
        self.turns = [
            [
                call("call-1", "get_weather", {"city": "Paris"}),
                call("call-2", "add", {"a": 2, "b": 3}),
                call("call-3", "explode", {"why": "test"}),
            ],
            [
                ResponseOutputMessage(
                    id="msg_1",
                    content=[ResponseOutputText(annotations=[], text="done", type="output_text")],
                    role="assistant",
                    status="completed",
                    type="message",
                )
            ],
        ]

    async def get_response(self, *args, **kwargs):
        return ModelResponse(
            output=self.turns.pop(0),
            usage=Usage(requests=1, input_tokens=10, output_tokens=5, total_tokens=15),
            response_id=None,
        )

    def stream_response(self, *args, **kwargs):
        raise NotImplementedError("the script is not streamed")


@function_tool
def get_weather(city: str) -> str:
    """The weather of a city."""
    return f"sunny in {city} (key {os.environ['WEATHER_API_KEY']})"


@function_tool
def add(a: int, b: int) -> int:
    """Adds two numbers."""
    return a + b


@function_tool
def explode(why: str) -> str:
    """Always fails."""
    raise RuntimeError(f"boom: {why}")


agent = Agent(
    name="weather-agent",
    instructions="Answer with the tools.",
    model=ScriptedModel(),
    tools=[get_weather, add, explode],
)

result = asyncio.run(Runner.run(agent, "What is the weather?"))
provider.force_flush()
provider.shutdown()
print(json.dumps({"output": result.final_output}))
