"""A real agent loop: the official ``openai`` client's tool-calling loop
(py/examples/agent.py) against the repository's local OpenAI-compatible
server (js/examples/agent/fake-openai.mjs, run with node), which samples a
different remittance text, amount spelling and tool_call_id on every request,
paying through a ledger that does not deduplicate. Each run is its own
process sharing one SQLite file (tests/_sqlite_store.py, the core's
statements):

1. the run dies (``os._exit``) right after the payment, before the journal
   records the tool call: its record is left in flight;
2. resumed from the journal (its clock past the claim's staleness), it sees
   the recorded completion (same tool_call_id, no new sample), the ledger's
   look-up settles the payment, and the run finishes: ONE payment;
3. a separate run of the same intent samples anew (another tool_call_id) and
   is recognized as the same intent: no payment;
4. another intent pays once more (runs never collide).

The negative control: the same loop keyed by the model's tool_call_id pays twice.
"""

import json
import os
import shutil
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
FAKE = os.path.abspath(os.path.join(HERE, os.pardir, os.pardir, "js", "examples", "agent", "fake-openai.mjs"))
PROCESS = os.path.join(HERE, "_agent_process.py")
SECRET = "6a" * 32
STALE = 2

SERVER = """
import { startFakeOpenAI } from %s;
const server = await startFakeOpenAI();
console.log(JSON.stringify({ url: server.url }));
process.stdin.setEncoding('utf8');
process.stdin.on('data', (d) => {
  for (const _ of d.split('\\n').filter(Boolean)) console.log(JSON.stringify({ requests: server.requests() }));
});
process.stdin.on('end', () => server.close().then(() => process.exit(0)));
"""


class FakeOpenAI:
    """The fake model server in a node process; `requests()` asks it how many completions it sampled."""

    def __init__(self):
        node = shutil.which("node")
        if node is None or not os.path.exists(FAKE):
            reason = f"node or {FAKE} is not available"
            if os.environ.get("CI") == "true":
                pytest.fail(reason)
            pytest.skip(reason)
        source = SERVER % json.dumps("file://" + FAKE)
        self.proc = subprocess.Popen([node, "--input-type=module", "-e", source], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        self.url = json.loads(self.proc.stdout.readline())["url"]

    def requests(self):
        self.proc.stdin.write("requests\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())["requests"]

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=10)


@pytest.fixture
def llm():
    server = FakeOpenAI()
    yield server
    server.close()


def agent(config):
    env = {**os.environ, "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"}
    done = subprocess.run([sys.executable, PROCESS, json.dumps(config)], capture_output=True, text=True, timeout=120,
                          env=env, cwd=HERE)
    events = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    return done.returncode, events, done.stderr


def only(events, kind):
    return [e for e in events if e["event"] == kind]


def payments(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def test_a_crashed_and_resumed_agent_pays_once_and_the_same_intent_is_recognized(llm, tmp_path):
    ledger = str(tmp_path / "ledger.jsonl")
    base = {"llmUrl": llm.url, "ledger": ledger, "store": str(tmp_path / "journal.db"), "secretHex": SECRET,
            "staleAfterSeconds": STALE}
    run = {"tenant_id": "acme", "intent_id": "rent-2026-03", "intent_epoch": 1_764_547_200}

    # 1. The run dies right after the ledger took the payment.
    code, crashed, err = agent({**base, "run": run, "session": "session-1", "crashAfterPayment": True})
    assert code == 137, err
    [sampled] = only(crashed, "completion")
    assert sampled["source"] == "sampled"
    assert len(only(crashed, "payment")) == 1
    assert len(payments(ledger)) == 1
    assert llm.requests() == 1

    # 2. Resumed from the journal, its clock past the crashed claim's staleness.
    code, resumed, err = agent({**base, "run": run, "session": "session-1", "clockOffsetSeconds": STALE + 1})
    assert code == 0, json.dumps(resumed) + err
    replayed, final = only(resumed, "completion")
    assert replayed["source"] == "journal", "the resumed run sees the recorded completion"
    assert replayed["toolCallId"] == sampled["toolCallId"]
    assert replayed["arguments"] == sampled["arguments"]
    assert final["source"] == "sampled"
    assert [e["kind"] for e in only(resumed, "recovered")] == ["tool-call"], "the ledger's look-up settled the payment"
    assert only(resumed, "payment") == [], "the payment did not run again"
    assert only(resumed, "tool-call")[0]["source"] == "journal"
    assert len(payments(ledger)) == 1, "ONE payment"
    assert llm.requests() == 2, "one new sample: the final answer"
    assert "pay_1" in only(resumed, "done")[0]["answer"]

    # 3. A separate run of the same intent: the model is sampled anew.
    code, separate, err = agent({**base, "run": run, "session": "session-2"})
    assert code == 0, json.dumps(separate) + err
    [resample, _final] = only(separate, "completion")
    assert resample["source"] == "sampled"
    assert resample["toolCallId"] != sampled["toolCallId"], "a new tool_call_id"
    [call] = only(separate, "tool-call")
    assert call["source"] == "journal", "recognized as the same intent"
    assert call["result"] == {"payment": "pay_1"}
    assert len(payments(ledger)) == 1, "still one payment"

    # 4. Another intent, the same request: its own payment.
    code, other, err = agent({**base, "run": {**run, "intent_id": "rent-2026-03-b"}, "session": "session-1"})
    assert code == 0, json.dumps(other) + err
    assert only(other, "tool-call")[0]["source"] == "ran"
    assert len(payments(ledger)) == 2, "two intents: two payments"


def test_the_negative_control_keyed_by_the_tool_call_id_pays_twice(llm, tmp_path):
    ledger = str(tmp_path / "naive.jsonl")
    base = {"llmUrl": llm.url, "ledger": ledger, "naive": True}
    code, crashed, err = agent({**base, "crashAfterPayment": True})
    assert code == 137, err
    code, resumed, err = agent(base)
    assert code == 0, err
    paid = payments(ledger)
    assert len(paid) == 2, "the resumed run resampled and paid again"
    assert paid[0]["key"] != paid[1]["key"], "each sample brought its own tool_call_id"
