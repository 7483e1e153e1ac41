"""A real MCP client for tests/tests/mcp.rs: the official Python SDK (`mcp`, pinned in
scripts/peer-python.sh) over Streamable HTTP, with a bearer token.

    python tests/mcp_client.py URL TOKEN   < one line of JSON: the steps

Steps, in order, in one MCP session:
    {"list_tools": true}                      -> the tools' names and input schemas
    {"tool": NAME, "args": {...}}             -> the call's text, isError, or the error raised
    {"pause": LABEL}                          -> prints "PAUSE LABEL SESSION_ID", waits for a
                                                 line on stdin

Prints "RESULT <json>" once at the end: {"protocol", "tools", "calls": [...]}. A call that
raises (an MCP error, an HTTP refusal) is recorded as {"error": ...}, and the next step runs.
"""

import json
import sys

import anyio
import httpx2
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client


def text_of(result):
    return "".join(c.text for c in result.content if getattr(c, "type", None) == "text")


async def run(url, token, steps, out):
    headers = {"Authorization": f"Bearer {token}"}
    timeout = httpx2.Timeout(30.0, read=120.0)
    seen = {}

    async def remember_session(response):
        sid = response.headers.get("mcp-session-id")
        if sid:
            seen["session"] = sid

    hooks = {"response": [remember_session]}
    async with httpx2.AsyncClient(headers=headers, timeout=timeout, event_hooks=hooks) as http:
        async with streamable_http_client(url, http_client=http) as (read, write):
            async with ClientSession(read, write, read_timeout_seconds=90) as session:
                init = await session.initialize()
                out["protocol"] = init.protocol_version
                out["server"] = init.server_info.name
                for step in steps:
                    if step.get("list_tools"):
                        listed = await session.list_tools()
                        out["tools"] = [
                            {"name": t.name, "schema": t.input_schema} for t in listed.tools
                        ]
                    elif "pause" in step:
                        print(f"PAUSE {step['pause']} {seen.get('session', '-')}", flush=True)
                        await anyio.to_thread.run_sync(sys.stdin.readline)
                    else:
                        call = {"tool": step["tool"], "args": step.get("args", {})}
                        try:
                            r = await session.call_tool(step["tool"], step.get("args", {}))
                            call["is_error"] = bool(r.is_error)
                            call["text"] = text_of(r)
                        except Exception as e:  # noqa: BLE001 - the test reads what failed
                            call["error"] = f"{type(e).__name__}: {e}"
                        out["calls"].append(call)
                print("RESULT " + json.dumps(out), flush=True)
                out["printed"] = True


async def bounded(url, token, steps, out):
    with anyio.fail_after(600):
        await run(url, token, steps, out)


def main():
    url, token = sys.argv[1], sys.argv[2]
    steps = json.loads(sys.stdin.readline())
    out = {"protocol": None, "tools": None, "calls": []}
    try:
        anyio.run(bounded, url, token, steps, out)
    except BaseException as e:  # noqa: BLE001 - closing a refused session may raise
        if not out.get("printed"):
            out["fatal"] = f"{type(e).__name__}: {e}"
            print("RESULT " + json.dumps(out), flush=True)
            sys.exit(1)


if __name__ == "__main__":
    main()
