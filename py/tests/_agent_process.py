"""One agent process for test_agent_openai.py: ``python _agent_process.py
'<json config>'`` runs py/examples/agent.py's loop (with intentkey, over the
SQLite test store the processes share, or the naive control) and prints one
JSON line per event. ``crashAfterPayment``: the process dies (``os._exit``)
right after the bank took the payment, before the journal records anything."""

import importlib.util
import json
import os
import sys

from openai import OpenAI

import intentkey
from _sqlite_store import SqliteTestStore

_EXAMPLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "examples", "agent.py")


def load_example():
    spec = importlib.util.spec_from_file_location("intentkey_agent_example", _EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main():
    config = json.loads(sys.argv[1])
    agent = load_example()

    def emit(event):
        sys.stdout.write(json.dumps(event) + "\n")
        sys.stdout.flush()

    def crash():
        os._exit(137)  # a hard crash: no finally, no completion, no release

    openai = OpenAI(api_key="sk-local-fake", base_url=config["llmUrl"], max_retries=2)
    bank = agent.Ledger(config["ledger"])
    die = crash if config.get("crashAfterPayment") else None
    if config.get("naive"):
        emit({"event": "done", "answer": agent.run_naive_agent(openai, bank, emit, die)})
        return
    store = SqliteTestStore(config["store"])
    run = intentkey.Run(**config["run"])
    journal = agent.make_journal(store, config["secretHex"], run, emit, stale_after_seconds=config["staleAfterSeconds"],
                                 clock_offset_seconds=config.get("clockOffsetSeconds", 0))
    try:
        emit({"event": "done", "answer": agent.run_agent(openai, journal, config["session"], bank, emit, die)})
    except intentkey.IntentkeyError as e:
        emit({"event": "error", "code": e.code, "message": e.message})
        sys.exit(1)
    finally:
        store.close()


if __name__ == "__main__":
    main()
