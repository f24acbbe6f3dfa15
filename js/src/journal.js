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
import { RUN, refused } from './guard.js';

const decoder = new TextDecoder();

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
   *   wait?: { maxMs?: number },
   *   storeDeadlineMs?: number,
   *   tracer?: object,
   *   meter?: object,
   * }} options
   */
  return function createJournal(options = {}) {
    if (options === null || typeof options !== 'object') {
      throw new TypeError('createJournal takes { store, keyer, maxOutputBytes?, staleAfterSeconds?, ttlSeconds?, now?, observe?, wait?, storeDeadlineMs?, tracer?, meter? }');
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
      // A step or tool call found in flight (another attempt of the run is at
      // it) waits up to wait.maxMs for its output instead of step-in-flight.
      wait: options.wait,
      // The deadline of one store call (the core's 2 s by default).
      storeDeadlineMs: options.storeDeadlineMs,
      // Spans and metrics (the global OpenTelemetry API unless given).
      tracer: options.tracer,
      meter: options.meter,
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

    /** Adds what recovery said to a step-in-flight error. */
    function stillInFlight(e, recovery) {
      if (recovery !== undefined && e instanceof IntentkeyError) {
        e.recovery = recovery;
        if (recovery.outcome === 'not-due') e.dueAt = recovery.dueAt;
      }
      return e;
    }

    /**
     * The journal's answer to a run the core drove: the output when this attempt
     * ran it, the recorded output otherwise, or the core's error (step-in-flight,
     * step-input-changed).
     */
    function answer(kind, name, key, r) {
      if (r.outcome === 'owned') {
        tell({ kind, name, key, outcome: r.recovered ? (kind === 'step' ? 'recovered' : 're-executed') : 'ran' });
        return parse(r.response);
      }
      const outcome = r.outcome === 'done' ? { tag: 'done', val: r.response } : { tag: r.outcome };
      let recorded;
      try {
        recorded = claims.stepAnswer(name, outcome);
      } catch (e) {
        throw stillInFlight(e, r.recovery);
      }
      tell({ kind, name, key, outcome: r.recovered ? 'recovered' : 'replayed' });
      return JSON.parse(recorded);
    }

    /**
     * Runs `fn` once per run and step name; every later attempt gets its recorded
     * output. `input` (any JSON) is checked: the same name with another input is
     * refused (step-in-flight and step-input-changed are IntentkeyErrors). The
     * sequence is the core's run flow for a step: a step left in flight by a
     * crash is taken over once stale (its output lives only in the journal).
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
      let r;
      try {
        // A step's look-up is the journal's own: the core answers it.
        r = await guard[RUN]('step', attempt, effect, { lookup: () => 'absent', readYourWrites: true });
      } catch (e) {
        throw failure.error ?? e;
      }
      return answer('step', name, attempt.key, r);
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
      const recovery =
        lookup === undefined
          ? undefined
          : {
              lookup: async (key) => {
                const found = await lookup(key);
                if (found !== null && typeof found === 'object' && 'found' in found) {
                  return { found: outputResponse(name, found.found) };
                }
                return found;
              },
              readYourWrites: callOptions.readYourWrites ?? false,
            };
      let r;
      try {
        r = await guard[RUN]('tool-call', attempt, wrapped, recovery);
      } catch (e) {
        throw failure.error ?? e;
      }
      return answer('tool-call', name, attempt.key, r);
    }

    return Object.freeze({ step, toolCall, guard });
  };
}
