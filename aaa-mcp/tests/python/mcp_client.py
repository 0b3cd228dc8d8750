"""A real MCP client from another language (the official Python SDK, `mcp`) against
aaa-mcp: lists and calls tools, reads an isError failure, a progress stream, an
approval answered by the user and one declined, and a request sent twice under one
idempotency key. Run by aaa-mcp/tests/python_client.rs; prints one JSON report line.

    python mcp_client.py --mode legacy|2026-07-28 (--stdio COMMAND ARG... | --http URL --token T)
"""

import argparse
import asyncio
import json
import sys

import httpx2
import mcp_types as types
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client


def parse():
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", required=True)
    parser.add_argument("--http")
    parser.add_argument("--token")
    parser.add_argument("--stdio", nargs=argparse.REMAINDER)
    return parser.parse_args()


class User:
    """Answers approval forms, and remembers what it was asked."""

    def __init__(self, approve):
        self.approve = approve
        self.forms = []

    async def __call__(self, context, params):
        self.forms.append(params.message)
        return types.ElicitResult(action="accept", content={"approve": self.approve})


def text(result):
    return result.content[0].text


async def session(args, user):
    if args.stdio:
        server = StdioServerParameters(command=args.stdio[0], args=args.stdio[1:])
        return Client(server, mode=args.mode, elicitation_callback=user)
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {args.token}"}, timeout=30)
    return Client(
        streamable_http_client(args.http, http_client=http),
        mode=args.mode,
        elicitation_callback=user,
    )


async def main():
    args = parse()
    report = {}
    approving = User(approve=True)
    async with await session(args, approving) as client:
        report["protocol"] = client.protocol_version
        tools = await client.list_tools()
        report["tools"] = [tool.name for tool in tools.tools]
        add = next(tool for tool in tools.tools if tool.name == "add")
        report["add_output_schema"] = add.output_schema

        added = await client.call_tool("add", {"a": 2, "b": 40})
        report["add"] = {
            "is_error": added.is_error,
            "structured": added.structured_content,
            "text": text(added),
        }

        failed = await client.call_tool("fail", {})
        report["fail"] = {"is_error": failed.is_error, "text": text(failed)}

        steps = []

        async def on_progress(progress, total, message):
            steps.append({"progress": progress, "total": total, "message": message})

        stepped = await client.call_tool("stepwise", {"steps": 4}, progress_callback=on_progress)
        report["stepwise"] = {"text": text(stepped), "progress": steps}

        paid = await client.call_tool("send_payment", {"to": "bob", "amount_cents": 1250})
        report["payment"] = {
            "is_error": paid.is_error,
            "structured": paid.structured_content,
            "approval": (paid.meta or {}).get("aaa-tools/approval"),
            "forms": approving.forms,
        }

        key = {"aaa-tools/idempotencyKey": f"python-{args.mode}"}
        first = await client.call_tool("counted", {"note": "py"}, meta=key)
        again = await client.call_tool("counted", {"note": "py"}, meta=key)
        report["resent"] = [first.structured_content, again.structured_content]

    declining = User(approve=False)
    async with await session(args, declining) as client:
        denied = await client.call_tool("send_payment", {"to": "eve", "amount_cents": 1})
        report["denied"] = {"is_error": denied.is_error, "text": text(denied), "forms": len(declining.forms)}
    print(json.dumps(report))


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except Exception as error:  # report, for the Rust test to show
        print(json.dumps({"error": f"{type(error).__name__}: {error}"}))
        sys.exit(1)
