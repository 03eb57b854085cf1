"""A deliberately broken MCP server over stdio (stdlib only).

It completes a 2025-11-25 handshake advertising task support and one task tool, then
answers ``tasks/*`` (or the task-augmented ``tools/call`` when the behaviour name starts
with ``create_``) according to ``argv[1]``:

garbage, wrong_id, silence, exit, non_object, wrong_shape, bad_status, bad_date,
negative_poll, other_id, huge, error_lost, error_missing, create_flat, create_garbage_task,
ok.

Used by ``tests/test_tasks_client_bad_input.py``: every behaviour must end in a typed
``TaskError`` within the client's read timeout, never a hang.
"""

from __future__ import annotations

import json
import sys
from typing import Any

TASK = {
    "taskId": "t1",
    "status": "working",
    "createdAt": "2026-01-01T00:00:00Z",
    "lastUpdatedAt": "2026-01-01T00:00:01Z",
    "ttl": 60000,
    "pollInterval": 500,
}


def send(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def reply(msg_id: Any, result: Any) -> None:
    send({"jsonrpc": "2.0", "id": msg_id, "result": result})


def error(msg_id: Any, code: int, message: str) -> None:
    send({"jsonrpc": "2.0", "id": msg_id, "error": {"code": code, "message": message}})


def task_reply(behaviour: str, msg_id: Any) -> None:
    if behaviour == "garbage":
        sys.stdout.write("{this is not json\n")
        sys.stdout.flush()
    elif behaviour == "wrong_id":
        reply(f"{msg_id}-nope", TASK)
    elif behaviour == "silence":
        pass
    elif behaviour == "exit":
        sys.exit(0)
    elif behaviour == "non_object":
        reply(msg_id, [1, 2, 3])
    elif behaviour == "wrong_shape":
        reply(msg_id, {**TASK, "status": 5, "ttl": "long"})
    elif behaviour == "bad_status":
        reply(msg_id, {**TASK, "status": "running"})
    elif behaviour == "bad_date":
        reply(msg_id, {**TASK, "createdAt": "yesterday at noon"})
    elif behaviour == "negative_poll":
        reply(msg_id, {**TASK, "pollInterval": -5})
    elif behaviour == "other_id":
        reply(msg_id, {**TASK, "taskId": "someone-elses"})
    elif behaviour == "huge":
        reply(msg_id, {**TASK, "statusMessage": "x" * (8 * 1024 * 1024)})
    elif behaviour == "error_lost":
        error(msg_id, -32602, "Failed to retrieve task: Task not found")
    elif behaviour == "error_missing":
        error(msg_id, -32601, "Method not found")
    else:
        reply(msg_id, TASK)


def main() -> None:
    behaviour = sys.argv[1] if len(sys.argv) > 1 else "ok"
    for line in sys.stdin:
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        method, msg_id = msg.get("method"), msg.get("id")
        if msg_id is None:
            continue  # notifications: nothing to answer
        if method == "initialize":
            reply(
                msg_id,
                {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {
                        "tools": {},
                        "tasks": {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}},
                    },
                    "serverInfo": {"name": "bad", "version": "0"},
                },
            )
        elif method == "tools/list":
            tool = {
                "name": "job",
                "inputSchema": {"type": "object"},
                "execution": {"taskSupport": "required"},
            }
            reply(msg_id, {"tools": [tool]})
        elif method == "tools/call":
            if behaviour == "create_flat":
                reply(msg_id, {**TASK, "resultType": "task"})
            elif behaviour == "create_garbage_task":
                reply(msg_id, {"task": {**TASK, "status": "sleeping"}})
            elif behaviour.startswith("create_"):
                task_reply(behaviour.removeprefix("create_"), msg_id)
            else:
                reply(msg_id, {"task": TASK})
        elif method.startswith("tasks/") and not behaviour.startswith("create_"):
            task_reply(behaviour, msg_id)
        elif method.startswith("tasks/"):
            reply(msg_id, TASK)
        else:
            error(msg_id, -32601, "Method not found")


if __name__ == "__main__":
    main()
