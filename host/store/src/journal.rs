//! The journal: an agent's or a workflow's steps and tool calls, each run
//! once per run of the intent, over the one claim flow.
//!
//! Every rule is the core's ([`intentkey::journal`]): the keys (the run and
//! the step's name; the run, the tool and its validated arguments, never the
//! model's text or a tool-call id), what an output may be (JSON, bounded),
//! what each claim outcome means. The journal runs the functions:
//!
//! - a step that returns: its output is recorded and replayed to every later
//!   attempt; a step that fails: nothing is recorded and the claim is
//!   released (a step has no effect outside its output), so a retry asks
//!   again; a step left in flight by a crash: once stale, the next attempt
//!   takes it over through the core's recovery and runs it again (its output
//!   lives only in the journal, so "absent" is the truth);
//! - a tool call is an effect on the world: a failure is ambiguous and stays
//!   in flight, and a tool call in flight is settled by the destination's
//!   look-up ([`Gateway`]): found is recorded, unknown never re-executes.
//!
//! ```
//! use intentkey::journal::Run;
//! use intentkey::{Keyer, Keyring, Policy, Secret};
//! use intentkey_store::{journal::Journal, open};
//!
//! let store = open("memory:")?;
//! let keyer = Keyer::new(&Keyring::single(Secret::new([7u8; 32])?), Policy::default());
//! let journal = Journal::new(store.as_ref(), &keyer);
//! let run = Run { tenant_id: "acme", intent_id: "run-42", intent_epoch: 1_700_000_000 };
//!
//! let mut samples = 0;
//! let mut sample = || -> Result<serde_json::Value, std::convert::Infallible> {
//!     samples += 1;
//!     Ok(serde_json::json!({ "remittance": format!("sample {samples}") }))
//! };
//! let first = journal.step(&run, "plan", None, 1_700_000_000, &mut sample)?;
//! let again = journal.step(&run, "plan", None, 1_700_000_005, &mut sample)?;
//! assert_eq!(first, again);
//! assert_eq!(samples, 1, "recorded once, replayed after");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::fmt;

use intentkey::claim::{EffectResult, Lookup, RunFlow, RunKind, RunOutcome, RunSpec};
use intentkey::journal::{step_answer, step_output, Run, DEFAULT_MAX_OUTPUT_BYTES};
use intentkey::{ErrorCode, Keyer, Payload};
use serde_json::Value;

use crate::guard::{new_seed, Gateway, Guard};
use crate::{Store, StoreError};

/// Why a step or tool call gave no output.
#[derive(Debug)]
pub enum JournalError<E> {
    /// The step's or the tool's own error. A step's records nothing (the
    /// claim is released); a tool call's stays in flight for recovery.
    Failed(E),
    /// The core's answer: `step-in-flight` (retry later), `step-input-changed`,
    /// `step-output-too-large`, `invalid-step-output`, or a key error.
    Journal(intentkey::Error),
    /// The store failed.
    Store(StoreError),
}

impl<E> JournalError<E> {
    /// The stable code of a journal or store error; `None` for the step's own.
    pub fn code(&self) -> Option<ErrorCode> {
        match self {
            JournalError::Failed(_) => None,
            JournalError::Journal(e) => Some(e.code()),
            JournalError::Store(e) => Some(e.code()),
        }
    }
}

impl<E: fmt::Display> fmt::Display for JournalError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JournalError::Failed(e) => write!(f, "the step failed: {e}"),
            JournalError::Journal(e) => e.fmt(f),
            JournalError::Store(e) => e.fmt(f),
        }
    }
}

impl<E: fmt::Debug + fmt::Display> std::error::Error for JournalError<E> {}

impl<E> From<StoreError> for JournalError<E> {
    fn from(e: StoreError) -> Self {
        JournalError::Store(e)
    }
}

impl<E> From<intentkey::Error> for JournalError<E> {
    fn from(e: intentkey::Error) -> Self {
        JournalError::Journal(e)
    }
}

/// A step's destination: its output lives only in the journal.
struct JournalOnly;

impl Gateway for JournalOnly {
    fn lookup(&self, _key: &str) -> Lookup {
        Lookup::Absent
    }
    fn read_your_writes(&self) -> bool {
        true
    }
}

/// Runs steps and tool calls once per run, against one store.
pub struct Journal<'s> {
    guard: Guard<'s>,
    keyer: &'s Keyer,
    max_output_bytes: usize,
}

impl<'s> Journal<'s> {
    /// A journal with the guard's defaults (records kept 24 hours, a claim
    /// left in flight stale after 5 minutes) and outputs up to 1 MiB.
    pub fn new(store: &'s dyn Store, keyer: &'s Keyer) -> Self {
        Journal {
            guard: Guard::new(store),
            keyer,
            max_output_bytes: DEFAULT_MAX_OUTPUT_BYTES,
        }
    }

    /// After how long a step or tool call left in flight may be recovered;
    /// longer than the slowest step.
    pub fn with_stale_after(mut self, seconds: i64) -> Self {
        self.guard = self.guard.with_stale_after(seconds);
        self
    }

    /// The largest output recorded, in bytes of JSON.
    pub fn with_max_output_bytes(mut self, bytes: usize) -> Self {
        self.max_output_bytes = bytes;
        self
    }

    /// Runs `step` once per run and `name`: the first attempt runs it and
    /// records its output; every later one gets the recorded output. `input`
    /// (the prompt, say) is checked: the same name with another input is
    /// refused (`step-input-changed`). The sequence is the core's run flow
    /// for a step.
    ///
    /// # Errors
    /// [`JournalError::Failed`] with the step's error (nothing recorded),
    /// [`JournalError::Journal`] (`step-in-flight` while another attempt
    /// runs it, `step-input-changed`, an output too large or not JSON), or
    /// [`JournalError::Store`] (`record-vanished`, retryable, when the
    /// record changed under every one of the flow's claims).
    pub fn step<E>(
        &self,
        run: &Run<'_>,
        name: &str,
        input: Option<&Value>,
        now: i64,
        step: &mut dyn FnMut() -> Result<Value, E>,
    ) -> Result<Value, JournalError<E>> {
        let attempt = self.keyer.step_attempt(run, name, input)?;
        let recovery = Some(self.guard.recovery_rules(&JournalOnly));
        let mut outcome: Option<Result<Value, JournalError<E>>> = None;
        let ran = self.drive(
            attempt,
            RunKind::Step,
            recovery,
            now,
            None,
            &mut |_| match step() {
                Err(e) => {
                    outcome = Some(Err(JournalError::Failed(e)));
                    EffectResult::Refused(None)
                }
                Ok(value) => self.recorded(name, value, &mut outcome, EffectResult::Refused(None)),
            },
        )?;
        self.answer(name, ran, outcome)
    }

    /// Runs a validated tool call at most once per run: `effect` gets the
    /// key (send it to the destination) and returns the tool's result,
    /// which is recorded and replayed. A call left in flight is settled by
    /// `gateway` (the destination's look-up) once stale; without one, the
    /// attempt answers `step-in-flight`.
    ///
    /// # Errors
    /// [`JournalError::Failed`] with the tool's error (the call stays in
    /// flight: nobody knows whether it happened), [`JournalError::Journal`]
    /// (a key error naming the argument, `step-in-flight`,
    /// `step-input-changed`, a result too large), or [`JournalError::Store`].
    #[allow(clippy::too_many_arguments)]
    pub fn tool_call<E>(
        &self,
        run: &Run<'_>,
        tool: &str,
        arguments: &Payload,
        now: i64,
        gateway: Option<&dyn Gateway>,
        effect: &mut dyn FnMut(&str) -> Result<Value, E>,
    ) -> Result<Value, JournalError<E>> {
        let attempt = self.keyer.tool_call_attempt(run, tool, arguments)?;
        let recovery = gateway.map(|g| self.guard.recovery_rules(g));
        let mut outcome: Option<Result<Value, JournalError<E>>> = None;
        let ran = self.drive(
            attempt,
            RunKind::ToolCall,
            recovery,
            now,
            gateway,
            &mut |key| {
                match effect(key) {
                    Err(e) => {
                        outcome = Some(Err(JournalError::Failed(e)));
                        EffectResult::Failed
                    }
                    // After the effect nothing may release the claim: an output
                    // the core refuses leaves it in flight.
                    Ok(value) => self.recorded(tool, value, &mut outcome, EffectResult::Failed),
                }
            },
        )?;
        self.answer(tool, ran, outcome)
    }

    /// Drives the core's run flow of one step or tool call.
    fn drive(
        &self,
        attempt: intentkey::claim::Attempt,
        kind: RunKind,
        recovery: Option<intentkey::claim::RecoveryRules>,
        now: i64,
        gateway: Option<&dyn Gateway>,
        effect: &mut dyn FnMut(&str) -> EffectResult,
    ) -> Result<RunOutcome, StoreError> {
        let spec = RunSpec {
            attempt,
            kind,
            rules: self.guard.rules().clone(),
            recovery,
            now,
            wait_max_ms: 0,
        };
        let mut flow = RunFlow::new(spec, new_seed()?);
        Ok(self.guard.drive(&mut flow, now, gateway, effect)?.0)
    }

    /// The recorded response of an output (the core checks it), keeping the
    /// value for the caller; `otherwise` when the core refuses it.
    fn recorded<E>(
        &self,
        name: &str,
        value: Value,
        outcome: &mut Option<Result<Value, JournalError<E>>>,
        otherwise: EffectResult,
    ) -> EffectResult {
        match step_output(name, &value.to_string(), self.max_output_bytes) {
            Ok(response) => {
                *outcome = Some(Ok(value));
                EffectResult::Answered(response)
            }
            Err(e) => {
                *outcome = Some(Err(JournalError::Journal(e)));
                otherwise
            }
        }
    }

    /// The journal's answer to a run: what the function gave when it ran,
    /// the recorded output otherwise, or the core's error.
    fn answer<E>(
        &self,
        name: &str,
        ran: RunOutcome,
        outcome: Option<Result<Value, JournalError<E>>>,
    ) -> Result<Value, JournalError<E>> {
        match ran.claim_outcome() {
            None => outcome.unwrap_or_else(|| Err(unreachable_answer(name))),
            Some(claimed) => match step_answer(name, &claimed)? {
                Some(recorded) => recorded_value(name, &recorded),
                None => Err(unreachable_answer(name)),
            },
        }
    }
}

fn recorded_value<E>(name: &str, recorded: &str) -> Result<Value, JournalError<E>> {
    serde_json::from_str(recorded).map_err(|e| {
        JournalError::Journal(intentkey::Error::field(
            ErrorCode::InvalidStepOutput,
            "output",
            format!("the recorded output of `{name}` is not JSON ({e}): this record was not written by a journal"),
        ))
    })
}

/// A run that ran without the function giving a result: not possible with
/// the core's flow; reported as a retryable store error, never a panic.
fn unreachable_answer<E>(name: &str) -> JournalError<E> {
    JournalError::Store(StoreError::retryable(format!(
        "the run of `{name}` ended without an answer; try again"
    )))
}
