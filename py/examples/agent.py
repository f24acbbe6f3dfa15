"""An agent that pays a bill with the official ``openai`` client's
tool-calling loop, made safe to retry with intentkey's journal:

* each completion is a journaled step: sampled once per run and recorded, so
  a resumed run sees the recorded completion, not a new sample;
* the model's tool call is validated by the orchestrator and keyed by the
  run's intent and the normalized arguments (never the model's remittance
  text or its tool_call_id), then claimed before the payment runs;
* a payment left in flight by a crash is settled by asking the bank with the
  same key: found is recorded, the payment never runs twice.

Run the demo against a local OpenAI-compatible server that samples a new
tool_call_id and text on every request (js/examples/agent/fake-openai.mjs)::

    python py/examples/agent.py --llm-url http://127.0.0.1:PORT/v1

It runs the agent, crashes it right after the payment, resumes it from the
journal (one payment), then does the same without intentkey, keyed by the
model's tool_call_id (two payments).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from typing import Any, Callable, Dict, List, Optional

from openai import OpenAI

import intentkey
from intentkey.journal import Journal, JournalEvent

#: The tools offered to the model.
TOOLS: List[Dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "send_pix",
            "description": "Send a Pix payment.",
            "parameters": {
                "type": "object",
                "properties": {
                    "amount": {"type": "string", "description": "Decimal amount, e.g. 150.00"},
                    "currency": {"type": "string", "description": "ISO 4217 code"},
                    "pix_key": {"type": "string", "description": "The creditor's Pix key"},
                    "remittance": {"type": "string", "description": "Free text for the creditor"},
                },
                "required": ["amount", "currency", "pix_key"],
            },
        },
    },
]
#: The model's tool name -> the action type, and the arguments it requires.
ACTIONS = {"send_pix": ("pix.send", ("amount", "currency", "pix_key"))}

#: The policy the tool calls are keyed under: the tools allowed (action types)
#: and every argument classified. The model's free text (``remittance``) is
#: ignored, so a resampled text is the same action.
TOOL_POLICY = {
    "version": 1,
    "actionTypes": ["pix.send"],
    "fields": {
        "amount": {"class": "key", "normalizer": "decimal", "scale": 2},
        "currency": {"class": "key", "normalizer": "currency"},
        "pix_key": {"class": "key", "normalizer": "pix-key"},
        "remittance": {"class": "ignored"},
    },
}

PROMPT = [
    {"role": "system", "content": "You pay bills with the send_pix tool."},
    {"role": "user", "content": "Pay Ana the March rent: 150.00 BRL to the Pix key ana@example.com."},
]

Emit = Callable[[Dict[str, Any]], None]


class Ledger:
    """A bank that does NOT deduplicate: every ``pay`` is a payment, appended
    to a JSON-lines file under the key the caller sent. It answers look-ups by
    that key (read-your-writes: a key it has no payment for was never paid)."""

    def __init__(self, path: str):
        self.path = path

    def payments(self) -> List[Dict[str, Any]]:
        if not os.path.exists(self.path):
            return []
        with open(self.path, encoding="utf-8") as f:
            return [json.loads(line) for line in f if line.strip()]

    def pay(self, key: str, args: Dict[str, Any]) -> Dict[str, Any]:
        payment = {"payment": f"pay_{len(self.payments()) + 1}", "key": key, **args}
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(payment) + "\n")
            f.flush()
            os.fsync(f.fileno())
        return payment

    def lookup(self, key: str) -> Any:
        for payment in self.payments():
            if payment["key"] == key:
                return {"found": {"payment": payment["payment"]}}
        return "absent"


def validate_tool_call(call: Dict[str, Any]) -> Dict[str, Any]:
    """The orchestrator's validation of a tool call the model proposed:
    ``{"tool": action type, "arguments": dict}``, or it raises."""
    function = call.get("function") or {}
    action = ACTIONS.get(function.get("name", "")) if call.get("type") == "function" else None
    if action is None:
        raise ValueError(f"the model asked for a tool that is not offered: {function.get('name')}")
    try:
        args = json.loads(function.get("arguments", ""))
    except ValueError:
        raise ValueError("the model's tool arguments are not JSON") from None
    if not isinstance(args, dict):
        raise ValueError("the tool arguments must be an object")
    for field in action[1]:
        if not isinstance(args.get(field), str) or args[field] == "":
            raise ValueError(f"the tool call lacks {field}")
    return {"tool": action[0], "arguments": args}


def _message(completion: Dict[str, Any]) -> Dict[str, Any]:
    """The assistant message of a completion, as it goes back into the conversation."""
    message = completion["choices"][0]["message"]
    out = {"role": "assistant", "content": message.get("content")}
    if message.get("tool_calls"):
        out["tool_calls"] = message["tool_calls"]
    return out


def run_agent(openai: OpenAI, journal: Journal, session: str, bank: Ledger, emit: Emit,
              crash: Optional[Callable[[], None]] = None) -> str:
    """The tool-calling loop. `session` names this conversation's steps: a
    run resumed after a crash keeps its session (and replays its completions);
    a separate run of the same intent starts a new one (and samples anew).
    ``crash()``, when given, is called right after the payment."""
    messages: List[Dict[str, Any]] = [dict(m) for m in PROMPT]
    for turn in range(1, 5):
        name = f"{session}/completion-{turn}"
        sampled = []

        def sample() -> Any:
            sampled.append(True)
            completion = openai.chat.completions.create(model="fake-model", messages=messages,  # type: ignore[arg-type]
                                                        tools=TOOLS)  # type: ignore[arg-type]
            return completion.model_dump(mode="json")

        message = _message(journal.step(name, sample, input=messages))
        calls = message.get("tool_calls") or []
        emit({"event": "completion", "step": name, "source": "sampled" if sampled else "journal",
              "toolCallId": calls[0]["id"] if calls else None,
              "arguments": json.loads(calls[0]["function"]["arguments"]) if calls else None,
              "text": message["content"]})
        messages.append(message)
        if not calls:
            return str(message["content"])
        for proposed in calls:
            call = validate_tool_call(proposed)
            paid = []

            def pay(key: str, call: Dict[str, Any] = call) -> Any:
                payment = bank.pay(key, call["arguments"])
                paid.append(True)
                emit({"event": "payment", "key": key, "payment": payment["payment"]})
                if crash is not None:
                    emit({"event": "crash", "after": "payment", "key": key})
                    crash()
                return {"payment": payment["payment"]}

            # The bank is asked with the same key; what it found is recorded as
            # the tool's result, in the shape the effect returns.
            result = journal.tool_call(call["tool"], call["arguments"], pay, lookup=bank.lookup, read_your_writes=True)
            emit({"event": "tool-call", "tool": call["tool"], "toolCallId": proposed["id"],
                  "source": "ran" if paid else "journal", "result": result})
            messages.append({"role": "tool", "tool_call_id": proposed["id"], "content": json.dumps(result)})
    raise RuntimeError("the model did not finish in 4 turns")


def run_naive_agent(openai: OpenAI, bank: Ledger, emit: Emit, crash: Optional[Callable[[], None]] = None) -> str:
    """The same loop without intentkey, the way agents are often written:
    nothing is journaled and the payment's idempotency key is the model's
    tool_call_id. A resumed run samples the model again, gets a new
    tool_call_id, and pays again."""
    messages: List[Dict[str, Any]] = [dict(m) for m in PROMPT]
    for turn in range(1, 5):
        completion = openai.chat.completions.create(model="fake-model", messages=messages,  # type: ignore[arg-type]
                                                    tools=TOOLS)  # type: ignore[arg-type]
        message = _message(completion.model_dump(mode="json"))
        calls = message.get("tool_calls") or []
        emit({"event": "completion", "step": f"naive/completion-{turn}", "source": "sampled",
              "toolCallId": calls[0]["id"] if calls else None, "text": message["content"]})
        messages.append(message)
        if not calls:
            return str(message["content"])
        for proposed in calls:
            args = validate_tool_call(proposed)["arguments"]
            payment = bank.pay(proposed["id"], args)
            emit({"event": "payment", "key": proposed["id"], "payment": payment["payment"]})
            if crash is not None:
                emit({"event": "crash", "after": "payment", "key": proposed["id"]})
                crash()
            messages.append({"role": "tool", "tool_call_id": proposed["id"],
                             "content": json.dumps({"payment": payment["payment"]})})
    raise RuntimeError("the model did not finish in 4 turns")


def make_journal(store: intentkey.Store, secret: str, run: intentkey.Run, emit: Emit, *, stale_after_seconds: int = 300,
                 clock_offset_seconds: int = 0) -> Journal:
    """A journal of `run` over `store`; a resumed run may pass its clock
    forward, past the crashed claim's staleness."""
    guard = intentkey.Guard(store, stale_after_seconds=stale_after_seconds,
                            clock=lambda: time.time() + clock_offset_seconds)

    def observe(e: JournalEvent) -> None:
        if e.outcome == "recovered":
            emit({"event": "recovered", "kind": e.kind, "name": e.name, "key": e.key})

    return Journal(guard, intentkey.Keyer(secret=secret, policy=TOOL_POLICY), run=run, observe=observe)


class Crash(BaseException):
    """The demo's crash: raised right after the payment, so nothing after it
    runs (the journal never records the tool call as done)."""


def demo(llm_url: str) -> None:
    def emit(event: Dict[str, Any]) -> None:
        print(json.dumps(event))

    def crash() -> None:
        raise Crash()

    openai = OpenAI(api_key="sk-local-fake", base_url=llm_url, max_retries=2)
    store = intentkey.MemoryStore()  # shared by the crashed run and its resumption
    run = intentkey.Run("acme", "rent-2026-03", 1_764_547_200)
    secret = os.urandom(32).hex()
    with tempfile.TemporaryDirectory() as tmp:
        bank = Ledger(os.path.join(tmp, "ledger.jsonl"))
        print("# with intentkey: the run crashes right after the payment")
        try:
            run_agent(openai, make_journal(store, secret, run, emit, stale_after_seconds=2), "session-1", bank, emit, crash)
        except Crash:
            pass
        print("# resumed from the journal (its clock past the crashed claim's staleness)")
        answer = run_agent(openai, make_journal(store, secret, run, emit, stale_after_seconds=2, clock_offset_seconds=3),
                           "session-1", bank, emit)
        print(f"# answer: {answer}; payments: {len(bank.payments())}")

        naive = Ledger(os.path.join(tmp, "naive.jsonl"))
        print("# without intentkey, keyed by the model's tool_call_id")
        try:
            run_naive_agent(openai, naive, emit, crash)
        except Crash:
            pass
        run_naive_agent(openai, naive, emit)
        print(f"# payments: {len(naive.payments())}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--llm-url", required=True, help="the OpenAI-compatible base URL, e.g. http://127.0.0.1:PORT/v1")
    demo(parser.parse_args().llm_url)
