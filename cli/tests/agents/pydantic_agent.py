"""A Pydantic AI agent (no model service: `TestModel` calls every tool
of the toolset at once, in parallel, as a model asking for several tool
calls in one turn does) over one MCP server, printed as JSON: each tool
call's name, arguments and what the agent got back.

    python3 pydantic_agent.py stdio CMD ARGS...   # the server on stdio
    python3 pydantic_agent.py http URL            # streamable HTTP
"""

import asyncio
import json
import sys

from fastmcp.client.transports import StdioTransport
from pydantic_ai import Agent
from pydantic_ai.mcp import MCPToolset
from pydantic_ai.messages import ToolCallPart, ToolReturnPart, RetryPromptPart
from pydantic_ai.models.test import TestModel


def toolset(mode, rest):
    if mode == "stdio":
        return MCPToolset(StdioTransport(command=rest[0], args=rest[1:]), tool_error_behavior="failed")
    return MCPToolset(rest[0], tool_error_behavior="failed")


async def main():
    mode, rest = sys.argv[1], sys.argv[2:]
    tools = toolset(mode, rest)
    model = TestModel(call_tools="all")
    agent = Agent(model, toolsets=[tools])
    out = {"calls": {}, "returns": {}, "errors": {}, "reads": {}}
    async with agent:
        # What an application reads beside the agent's tool calls.
        motd = await tools.client.read_resource("reel://motd")
        out["reads"]["motd"] = [c.text for c in motd]
        prompt = await tools.client.get_prompt("review", {"code": "x = 1"})
        out["reads"]["review"] = [m.content.text for m in prompt.messages]
        try:
            result = await agent.run("What is the weather?")
            messages = result.all_messages()
        except Exception as e:  # a tool error with retries=0 ends the run
            out["run_error"] = type(e).__name__
            messages = []
    for message in messages:
        for part in message.parts:
            if isinstance(part, ToolCallPart):
                out["calls"][part.tool_call_id] = [part.tool_name, part.args_as_dict()]
            elif isinstance(part, ToolReturnPart):
                out["returns"][part.tool_name] = part.model_response_object()
            elif isinstance(part, RetryPromptPart):
                out["errors"][part.tool_name] = str(part.content)
    print(json.dumps(out, sort_keys=True, default=str))


asyncio.run(main())
