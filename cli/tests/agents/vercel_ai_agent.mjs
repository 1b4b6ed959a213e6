// A Vercel AI SDK agent (`ai` 5, its mock language model: no model
// service) with `experimental_telemetry` on, its spans sent by the
// OpenTelemetry SDK's OTLP/HTTP protobuf exporter to
// OTEL_EXPORTER_OTLP_ENDPOINT (reel collect). The model calls three tools
// in its first step (one of which throws), then answers.
//
//   NODE_PATH=<prefix>/node_modules node vercel_ai_agent.mjs
import { createRequire } from "node:module";
import path from "node:path";

const require = createRequire(path.join(process.env.REEL_VERCEL_AI, "node_modules", "x.js"));
const { generateText, tool, stepCountIs } = require("ai");
const { MockLanguageModelV2 } = require("ai/test");
const { z } = require("zod");
const { NodeTracerProvider, SimpleSpanProcessor } = require("@opentelemetry/sdk-trace-node");
const { OTLPTraceExporter } = require("@opentelemetry/exporter-trace-otlp-proto");
const { resourceFromAttributes } = require("@opentelemetry/resources");

const provider = new NodeTracerProvider({
  resource: resourceFromAttributes({ "service.name": "vercel-weather" }),
  spanProcessors: [new SimpleSpanProcessor(new OTLPTraceExporter())],
});
provider.register();

let step = 0;
const usage = { inputTokens: 10, outputTokens: 5, totalTokens: 15 };
const model = new MockLanguageModelV2({
  doGenerate: async () => {
    step += 1;
    if (step === 1) {
      const call = (id, name, input) => ({
        type: "tool-call", toolCallId: id, toolName: name, input: JSON.stringify(input),
      });
      return {
        content: [
          call("call-1", "weather", { city: "Paris" }),
          call("call-2", "add", { a: 2, b: 3 }),
          call("call-3", "explode", { why: "test" }),
        ],
        finishReason: "tool-calls", usage, warnings: [],
      };
    }
    return { content: [{ type: "text", text: "done" }], finishReason: "stop", usage, warnings: [] };
  },
});

const result = await generateText({
  model,
  prompt: "What is the weather in Paris?",
  stopWhen: stepCountIs(3),
  tools: {
    weather: tool({
      description: "The weather of a city.",
      inputSchema: z.object({ city: z.string() }),
      execute: async ({ city }) => ({ city, sky: "sunny" }),
    }),
    add: tool({
      description: "Adds two numbers.",
      inputSchema: z.object({ a: z.number(), b: z.number() }),
      execute: async ({ a, b }) => a + b,
    }),
    explode: tool({
      description: "Always fails.",
      inputSchema: z.object({ why: z.string() }),
      execute: async ({ why }) => { throw new Error(`boom: ${why}`); },
    }),
  },
  experimental_telemetry: { isEnabled: true, functionId: "weather-agent" },
});
await provider.forceFlush();
await provider.shutdown();
console.log(JSON.stringify({ text: result.text, steps: result.steps.length }));
