#!/usr/bin/env python3
"""Drives `gjcfs mcp` with the official MCP SDK client (PyPI `mcp`), for the integration
tests (tests/integration/mcp.rs).

    client.py GJCFS CALLS.json -- ARGS...

starts `GJCFS mcp ARGS...` over stdio, initializes, lists the tools, makes each call of
CALLS.json (a list of {"tool": NAME, "arguments": {...}}) in order, and prints one JSON
object: {"server": serverInfo, "tools": [{name, description, inputSchema, annotations}],
"results": [{"ok": structuredContent, "text": the text content} | {"error": message,
"code": code}]}. A call the server answers with an error does not stop the others.
"""

import asyncio
import json
import os
import sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
try:  # the SDK's 2.x name, then its 1.x one
    from mcp.shared.exceptions import MCPError as McpError
except ImportError:
    from mcp.shared.exceptions import McpError


def error_of(e):
    """An SDK error's (message, code), in 2.x (attributes) or 1.x (`error` data)."""
    data = getattr(e, "error", e)
    return data.message, data.code


async def main(gjcfs, calls, args):
    # The server gets the test's environment whole (the SDK passes only a few variables by
    # default): its XDG_CACHE_HOME keeps the search index out of the user's cache.
    server = StdioServerParameters(command=gjcfs, args=["mcp", *args], env=dict(os.environ))
    async with stdio_client(server) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            listed = await session.list_tools()
            tools = [
                {
                    "name": t.name,
                    "description": t.description,
                    "inputSchema": t.input_schema if hasattr(t, "input_schema") else t.inputSchema,
                    "annotations": t.annotations.model_dump(by_alias=True, exclude_none=True)
                    if t.annotations
                    else None,
                }
                for t in listed.tools
            ]
            results = []
            for call in calls:
                try:
                    r = await session.call_tool(call["tool"], call.get("arguments", {}))
                except McpError as e:
                    message, code = error_of(e)
                    results.append({"error": message, "code": code})
                    continue
                text = "".join(c.text for c in r.content if getattr(c, "type", "") == "text")
                is_error = getattr(r, "is_error", None)
                if is_error is None:
                    is_error = getattr(r, "isError", False)
                if is_error:
                    results.append({"error": text, "code": None})
                else:
                    structured = getattr(r, "structured_content", None)
                    if structured is None:
                        structured = getattr(r, "structuredContent", None)
                    results.append({"ok": structured, "text": text})
            info = init.server_info if hasattr(init, "server_info") else init.serverInfo
            print(json.dumps({
                "server": info.model_dump(by_alias=True, exclude_none=True),
                "tools": tools,
                "results": results,
            }))


if __name__ == "__main__":
    gjcfs, calls_file, sep, *args = sys.argv[1:]
    assert sep == "--", "usage: client.py GJCFS CALLS.json -- ARGS..."
    with open(calls_file) as f:
        calls = json.load(f)
    asyncio.run(main(gjcfs, calls, args))
