// The journal: an agent's or a workflow's steps and tool calls, each run once
// per run of the intent, over the guard's one claim flow.
//
// Every rule is the core's: the keys (keyer.stepAttempt / toolCallAttempt: the
// run and the step's name, or the run, the tool and its validated arguments;
// never the model's text or a tool-call id), what an output may be
// (claims.stepOutput: JSON, bounded), what each claim outcome means
// (claims.stepAnswer: run it, replay it, step-in-flight, step-input-changed),
// and recovery (the guard's recover, the core's flow). This file runs the
// functions and converts values.
//
// The outcome classes:
//   - a step's function that returns: its output is recorded (terminal) and
//     replayed to every later attempt;
//   - a step's function that throws: nothing is recorded, the claim is released
//     (a step has no effect outside its output) and the error is rethrown, so a
//     retry asks again;
//   - a process that dies mid-step leaves the claim in flight; once it is stale
//     (staleAfterSeconds) the next attempt takes it over through the core's
//     recovery flow and runs the step again: a step's output lives only in the
//     journal, so "absent" is the truth;
//   - a tool call is an effect on the world: the guard's classes apply (a throw
//     is ambiguous and stays in flight), and a tool call in flight is settled by
//     the destination's look-up (`lookup`): found is recorded, unknown never
//     re-executes.
import { IntentkeyError } from './errors.js';
import { refused } from './guard.js';

const decoder = new TextDecoder();
/** How many times a step or tool call claims again after its record changed under it. */
const SETTLE_TRIES = 3;

/**
 * Makes `createJournal` over one API (the Node entry's).
 * @param {{ claims: any, createGuard: (options: object) => any }} api
 */
export function journalFactory({ claims, createGuard }) {
  /**
   * @param {{
   *   store: object,
   *   keyer: object,
   *   maxOutputBytes?: number,
   *   staleAfterSeconds?: number,
   *   ttlSeconds?: number,
   *   now?: () => number,
   *   observe?: (event: object) => void,
   * }} options
   */
  return function createJournal(options = {}) {
    if (options === null || typeof options !== 'object') {
      throw new TypeError('createJournal takes { store, keyer, maxOutputBytes?, staleAfterSeconds?, ttlSeconds?, now?, observe? }');
    }
    const { keyer, maxOutputBytes, observe } = options;
    if (keyer === null || typeof keyer !== 'object' || typeof keyer.stepAttempt !== 'function') {
      throw new TypeError('createJournal needs a keyer: createJournal({ store, keyer: createKeyer({ secret, policy }) })');
    }
    if (observe !== undefined && typeof observe !== 'function') throw new TypeError('observe must be a function (event) => void');
    const guard = createGuard({
      store: options.store,
      keyer,
      now: options.now,
      staleAfterSeconds: options.staleAfterSeconds,
      ttlSeconds: options.ttlSeconds,
    });
    const tell = (event) => {
      if (observe !== undefined) observe(event);
    };

    /** The recorded response of `name` from an output value: JSON text checked by the core. */
    function outputResponse(name, value) {
      let json;
      try {
        json = JSON.stringify(value);
      } catch (e) {
        throw new IntentkeyError(
          'invalid-step-output',
          `the output of \`${name}\` cannot be written as JSON (${e instanceof Error ? e.message : e})`,
          'output',
        );
      }
      // undefined (a function, a bare undefined): the core refuses '' as not JSON.
      return claims.stepOutput(name, json ?? '', maxOutputBytes);
    }

    const parse = (response) => JSON.parse(decoder.decode(response.body));

    /** The core's reading of a guard answer: undefined (owned) or the recorded JSON text; throws otherwise. */
    function answerOf(name, r) {
      const outcome = r.outcome === 'done' ? { tag: 'done', val: r.response } : { tag: r.outcome };
      return claims.stepAnswer(name, outcome);
    }

    /** Adds what recovery said to a step-in-flight error. */
    function stillInFlight(e, recovery) {
      if (recovery !== undefined && e instanceof IntentkeyError) {
        e.recovery = recovery;
        if (recovery.outcome === 'not-due') e.dueAt = recovery.dueAt;
      }
      return e;
    }

    /**
     * Runs `fn` once per run and step name; every later attempt gets its recorded
     * output. `input` (any JSON) is checked: the same name with another input is
     * refused (step-in-flight and step-input-changed are IntentkeyErrors).
     */
    async function step(run, name, fn, stepOptions = {}) {
      if (typeof fn !== 'function') throw new TypeError('step(run, name, fn): fn must be a function () => output');
      const attempt = keyer.stepAttempt(run, name, stepOptions.input);
      const failure = { error: undefined };
      const effect = async () => {
        let value;
        try {
          value = await fn();
        } catch (e) {
          failure.error = e;
          throw refused(null, `step ${name} threw; nothing was recorded`);
        }
        try {
          return outputResponse(name, value);
        } catch (e) {
          failure.error = e;
          throw refused(null, `step ${name}: its output cannot be recorded`);
        }
      };
      for (let tries = 0; ; tries++) {
        let r;
        try {
          r = await guard.run(attempt, effect);
        } catch (e) {
          throw failure.error ?? e;
        }
        if (r.outcome === 'owned') {
          if (r.finished === 'stored') {
            tell({ kind: 'step', name, key: attempt.key, outcome: 'ran' });
            return parse(r.response);
          }
          // Superseded: a recoverer took the step over; the journal holds its output.
          if (tries + 1 < SETTLE_TRIES) continue;
        }
        let recorded;
        try {
          recorded = answerOf(name, r);
        } catch (e) {
          if (!(e instanceof IntentkeyError) || e.code !== 'step-in-flight') throw e;
          // A step left in flight by a crash: once stale, the core's recovery gives it
          // to this attempt (a step's output lives only here: absent is the truth).
          const recovery = await guard.recover({
            key: attempt.key,
            lookup: () => 'absent',
            readYourWrites: true,
            effect,
          });
          if (recovery.outcome === 'applied' && recovery.action === 're-execute' && recovery.finished === 'stored') {
            tell({ kind: 'step', name, key: attempt.key, outcome: 'recovered' });
            return parse(recovery.response);
          }
          if (failure.error !== undefined) throw failure.error;
          if ((recovery.outcome === 'missing' || recovery.outcome === 'not-in-flight') && tries + 1 < SETTLE_TRIES) continue;
          throw stillInFlight(e, recovery);
        }
        tell({ kind: 'step', name, key: attempt.key, outcome: 'replayed' });
        return JSON.parse(recorded);
      }
    }

    /**
     * Runs a validated tool call at most once per run: `effect(key)` gets the key
     * (send it to the destination), and returns the tool's result (JSON), which is
     * recorded and replayed. A call left in flight is settled by `lookup(key)`
     * ({ found: result } | 'absent' | 'unknown') once stale.
     */
    async function toolCall(run, call, effect, callOptions = {}) {
      if (call === null || typeof call !== 'object') throw new TypeError('toolCall(run, { tool, arguments }, effect)');
      if (typeof effect !== 'function') throw new TypeError('toolCall(run, call, effect): effect must be a function (key) => result');
      const { lookup } = callOptions;
      if (lookup !== undefined && typeof lookup !== 'function') throw new TypeError('lookup must be a function (key) => answer');
      const name = call.tool;
      const attempt = keyer.toolCallAttempt(run, name, call.arguments);
      const failure = { error: undefined };
      // After the effect, nothing may release the claim: an output the core refuses is ambiguous.
      const wrapped = async (key) => {
        const value = await effect(key);
        try {
          return outputResponse(name, value);
        } catch (e) {
          failure.error = e;
          throw e;
        }
      };
      for (let tries = 0; ; tries++) {
        let r;
        try {
          r = await guard.run(attempt, wrapped);
        } catch (e) {
          throw failure.error ?? e;
        }
        if (r.outcome === 'owned') {
          if (r.finished === 'stored' || r.finished === 'superseded') {
            tell({ kind: 'tool-call', name, key: attempt.key, outcome: 'ran' });
            return parse(r.response);
          }
          // Released (the effect refused) or left in flight with a response: hand it back.
          return parse(r.response);
        }
        let recorded;
        try {
          recorded = answerOf(name, r);
        } catch (e) {
          if (!(e instanceof IntentkeyError) || e.code !== 'step-in-flight' || lookup === undefined) throw e;
          const recovery = await guard.recover({
            key: attempt.key,
            lookup: async (key) => {
              const answer = await lookup(key);
              if (answer !== null && typeof answer === 'object' && 'found' in answer) {
                return { found: outputResponse(name, answer.found) };
              }
              return answer;
            },
            readYourWrites: callOptions.readYourWrites ?? false,
            effect: wrapped,
          });
          if (recovery.outcome === 'applied' && recovery.action === 'record-done') {
            tell({ kind: 'tool-call', name, key: attempt.key, outcome: 'recovered' });
            return parse(recovery.response);
          }
          if (recovery.outcome === 'applied' && recovery.action === 're-execute' && recovery.response !== undefined) {
            tell({ kind: 'tool-call', name, key: attempt.key, outcome: 're-executed' });
            return parse(recovery.response);
          }
          if ((recovery.outcome === 'missing' || recovery.outcome === 'not-in-flight') && tries + 1 < SETTLE_TRIES) continue;
          throw stillInFlight(e, recovery);
        }
        tell({ kind: 'tool-call', name, key: attempt.key, outcome: 'replayed' });
        return JSON.parse(recorded);
      }
    }

    return Object.freeze({ step, toolCall, guard });
  };
}
