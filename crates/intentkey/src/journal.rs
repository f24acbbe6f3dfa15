//! Journaled steps and tool calls: keys for agents and workflows.
//!
//! An agent retries a step, the model resamples, and the same action comes
//! back with new text and a new `tool_call_id`. Nothing the model writes can
//! key the action. The key comes from the **run**: the recorded intent the
//! agent works on ([`Run`]: tenant, intent id, epoch), the same in every
//! attempt and every process that resumes it.
//!
//! - A **step** (an LLM completion, any non-deterministic call) is keyed by
//!   the run and the step's name ([`Keyer::step_attempt`]). Its output is
//!   recorded once ([`step_output`]) and replayed on every retry
//!   ([`step_answer`]); its fingerprint covers the step's input, so the same
//!   name asked with another input is refused (`step-input-changed`), never
//!   answered with the wrong output.
//! - A **tool call** is keyed by the run, the tool's name and its validated
//!   arguments, normalized under the policy ([`Keyer::tool_call_attempt`]).
//!   The tool's name is the action type (a policy that closes its action
//!   types is the list of tools allowed); every argument must be classified,
//!   so an argument the model invents is refused (`unclassified-fields`). The
//!   model's free text belongs in `ignored` (or `fingerprint`) fields, and
//!   its `tool_call_id` is never passed here: two attempts of one run that
//!   propose the same action share a key, and two runs never collide.
//!
//! Both are ordinary claim attempts: the same store, schema and claim flow
//! ([`crate::claim`]). Key material, canonical JSON, HMAC-SHA256 under the
//! secret active at the run's epoch:
//!
//! | what | key material | fingerprint material |
//! |---|---|---|
//! | step | `["intentkey/step/v1", tenant_id, intent_id, step]` | `["intentkey/step-input/v1", tenant_id, intent_id, step, input]` |
//! | tool call | `["intentkey/tool-call/v1", tenant_id, tool, intent_id, {key fields}]` | the payload fingerprint of the arguments under action type `tool` |
//!
//! ```
//! use intentkey::claim::{ClaimOutcome, Record};
//! use intentkey::journal::{step_answer, step_output, Run};
//! use intentkey::{Keyer, Keyring, Payload, Policy, Secret};
//!
//! let keyer = Keyer::new(&Keyring::single(Secret::new([9u8; 32])?), Policy::default());
//! let run = Run { tenant_id: "acme", intent_id: "run-42", intent_epoch: 1_700_000_000 };
//!
//! // A step: keyed by the run and its name; its output recorded once.
//! let plan = keyer.step_attempt(&run, "plan", None)?;
//! assert_eq!(plan, keyer.step_attempt(&run, "plan", None)?, "every attempt of the run: one key");
//! let output = step_output("plan", r#"{"tool":"pix.send"}"#, 1 << 20)?;
//! let mut record = Record::in_flight(&plan, "owner-token", 1_700_000_000);
//! record.complete(output, 1_700_000_001, 86_400);
//! let replay = step_answer("plan", &ClaimOutcome::Done(record.response.clone().unwrap()))?;
//! assert_eq!(replay.as_deref(), Some(r#"{"tool":"pix.send"}"#));
//!
//! // A tool call: the model's remittance text is not in the default policy's
//! // key here, because this policy ignores it.
//! let policy = Policy::from_json(r#"{"version":1,"fields":{
//!     "amount":{"class":"key","normalizer":"decimal","scale":2},
//!     "pix_key":{"class":"key","normalizer":"pix-key"},
//!     "remittance":{"class":"ignored"}}}"#)?;
//! let keyer = Keyer::new(&Keyring::single(Secret::new([9u8; 32])?), policy);
//! let a = Payload::from_json(r#"{"amount":"150.0","pix_key":"a@b.com","remittance":"Rent, March"}"#)?;
//! let b = Payload::from_json(r#"{"remittance":"march rent :)","pix_key":"A@B.com","amount":150}"#)?;
//! assert_eq!(
//!     keyer.tool_call_attempt(&run, "pix.send", &a)?.key,
//!     keyer.tool_call_attempt(&run, "pix.send", &b)?.key,
//! );
//! let other_run = Run { intent_id: "run-43", ..run };
//! assert_ne!(
//!     keyer.tool_call_attempt(&run, "pix.send", &a)?.key,
//!     keyer.tool_call_attempt(&other_run, "pix.send", &a)?.key,
//! );
//! # Ok::<(), intentkey::Error>(())
//! ```

use serde_json::Value;

use crate::canonical::{write_str, write_value};
use crate::claim::{Attempt, ClaimOutcome, Response};
use crate::deriver::{check_tenant, Fingerprint};
use crate::error::{clip, Error, ErrorCode, Result};
use crate::key::Key;
use crate::keyer::Keyer;
use crate::payload::Payload;

/// Domain label of a step's key material.
pub const STEP_LABEL: &str = "intentkey/step/v1";
/// Domain label of a step's fingerprint material.
pub const STEP_INPUT_LABEL: &str = "intentkey/step-input/v1";
/// Domain label of a tool call's key material.
pub const TOOL_CALL_LABEL: &str = "intentkey/tool-call/v1";
/// The longest step name, in bytes.
pub const MAX_STEP_NAME_LEN: usize = 200;
/// The default limit on a recorded step output: 1 MiB of JSON text.
pub const DEFAULT_MAX_OUTPUT_BYTES: usize = 1 << 20;
/// A step's records carry the action type `step:<name>`.
pub const STEP_ACTION_PREFIX: &str = "step:";
/// The status a recorded step output is stored with.
pub const STEP_OUTPUT_STATUS: u16 = 200;

/// One run of an agent or workflow: the recorded intent every attempt of it
/// resumes. The intent id and epoch come from where the run was recorded
/// (a database row, a queue message), never from the attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Run<'a> {
    /// The tenant.
    pub tenant_id: &'a str,
    /// The run's recorded intent id.
    pub intent_id: &'a str,
    /// When the run's intent was recorded (seconds since the Unix epoch): it
    /// picks the secret, so a rotation never re-keys a run.
    pub intent_epoch: i64,
}

impl Keyer {
    /// The claim attempt of step `step` of `run`: its key depends on the run
    /// and the name only; its fingerprint also covers `input` (the prompt,
    /// say), so the same step asked with another input is told apart.
    ///
    /// # Errors
    /// `invalid-step-name`, `invalid-tenant-id`, `invalid-intent-id`,
    /// `secret-retired`, or `invalid-json` for an input number beyond the
    /// double range.
    pub fn step_attempt(
        &self,
        run: &Run<'_>,
        step: &str,
        input: Option<&Value>,
    ) -> Result<Attempt> {
        check_step_name(step)?;
        let deriver = self.deriver_at(run.intent_epoch)?;
        let mut material = Vec::with_capacity(96 + run.intent_id.len() + step.len());
        open_material(&mut material, STEP_LABEL, run)?;
        write_str(&mut material, run.intent_id);
        material.push(b',');
        write_str(&mut material, step);
        material.push(b']');
        let key = Key::from_digest(&deriver.mac_of(&material), self.policy().key_length());

        material.clear();
        open_material(&mut material, STEP_INPUT_LABEL, run)?;
        write_str(&mut material, run.intent_id);
        material.push(b',');
        write_str(&mut material, step);
        material.push(b',');
        write_value(&mut material, input.unwrap_or(&Value::Null), "input")?;
        material.push(b']');
        let fingerprint = Fingerprint::from_digest(&deriver.mac_of(&material));
        Ok(attempt(
            key,
            fingerprint,
            run,
            format!("{STEP_ACTION_PREFIX}{step}"),
        ))
    }

    /// The claim attempt of a validated tool call of `run`: the key covers
    /// the tool's name (the action type) and the arguments' key fields,
    /// normalized under the policy; the fingerprint is the arguments'
    /// payload fingerprint.
    ///
    /// # Errors
    /// `invalid-tenant-id`, `invalid-intent-id`, `invalid-action-type` or
    /// `unknown-action-type` (the tool), `unclassified-fields` (an argument
    /// the policy does not know), a normalizer's error naming the argument,
    /// or `secret-retired`.
    pub fn tool_call_attempt(
        &self,
        run: &Run<'_>,
        tool: &str,
        arguments: &Payload,
    ) -> Result<Attempt> {
        let deriver = self.deriver_at(run.intent_epoch)?;
        check_intent_id(run.intent_id)?;
        let mut material = Vec::with_capacity(256);
        material.push(b'[');
        write_str(&mut material, TOOL_CALL_LABEL);
        material.push(b',');
        deriver.write_head_inner(&mut material, run.tenant_id, tool)?;
        write_str(&mut material, run.intent_id);
        material.extend_from_slice(b",{");
        deriver.write_body(&mut material, arguments, false)?;
        material.extend_from_slice(b"}]");
        let key = Key::from_digest(&deriver.mac_of(&material), self.policy().key_length());
        let fingerprint = deriver.fingerprint(run.tenant_id, tool, arguments)?;
        Ok(attempt(key, fingerprint, run, tool.to_owned()))
    }
}

/// Writes `[label, tenant_id,` after checking the run's tenant and intent id.
fn open_material(out: &mut Vec<u8>, label: &str, run: &Run<'_>) -> Result<()> {
    check_tenant(run.tenant_id)?;
    check_intent_id(run.intent_id)?;
    out.push(b'[');
    write_str(out, label);
    out.push(b',');
    write_str(out, run.tenant_id);
    out.push(b',');
    Ok(())
}

fn attempt(key: Key, fingerprint: Fingerprint, run: &Run<'_>, action_type: String) -> Attempt {
    Attempt {
        key: key.into_string(),
        fingerprint: fingerprint.as_str().to_owned(),
        tenant_id: run.tenant_id.to_owned(),
        action_type,
        prior: None,
    }
}

fn check_intent_id(intent_id: &str) -> Result<()> {
    if intent_id.is_empty() {
        return Err(Error::field(
            ErrorCode::InvalidIntentId,
            "intent_id",
            "the run's `intent_id` is empty; use the id of the recorded intent the run works on",
        ));
    }
    Ok(())
}

fn check_step_name(step: &str) -> Result<()> {
    let problem = if step.is_empty() {
        "is empty"
    } else if step.len() > MAX_STEP_NAME_LEN {
        "is longer than 200 bytes"
    } else if step.chars().any(char::is_control) {
        "holds a control character"
    } else {
        return Ok(());
    };
    Err(Error::field(
        ErrorCode::InvalidStepName,
        "step",
        format!(
            "the step name `{}` {problem}; name each step of a run with short printable text, the same in every attempt (`plan`, `draft-2`)",
            clip(step).escape_debug()
        ),
    ))
}

/// Checks a step's output (JSON text, at most `max_bytes`) and makes the
/// response it is recorded as: status 200, `application/json`.
///
/// # Errors
/// `invalid-step-name`, `invalid-step-output` (not JSON) or
/// `step-output-too-large`.
pub fn step_output(step: &str, output_json: &str, max_bytes: usize) -> Result<Response> {
    check_step_name(step)?;
    if output_json.len() > max_bytes {
        return Err(Error::field(
            ErrorCode::StepOutputTooLarge,
            "output",
            format!(
                "the output of step `{}` is {} bytes, over the journal's limit of {max_bytes}; record a smaller output (an id or a reference to where the full text is kept) or raise the limit",
                clip(step).escape_debug(),
                output_json.len()
            ),
        ));
    }
    if let Err(e) = serde_json::from_str::<serde::de::IgnoredAny>(output_json) {
        return Err(Error::field(
            ErrorCode::InvalidStepOutput,
            "output",
            format!(
                "the output of step `{}` is not JSON ({e}); return a value that serializes to JSON",
                clip(step).escape_debug()
            ),
        ));
    }
    Ok(Response::new(
        STEP_OUTPUT_STATUS,
        "application/json",
        output_json.as_bytes().to_vec(),
    ))
}

/// What a claim outcome means for a step or tool call named `name`:
/// `Ok(None)` when this attempt owns it (run it, then record its output),
/// `Ok(Some(output))` when it is recorded (the recorded body, to replay).
///
/// # Errors
/// `step-in-flight` while another attempt runs it (retry later; recovery
/// settles one that crashed), `step-input-changed` when it was recorded with
/// another input or other arguments, `invalid-step-output` when the recorded
/// body is not UTF-8 text.
pub fn step_answer(name: &str, outcome: &ClaimOutcome) -> Result<Option<String>> {
    let name = clip(name);
    match outcome {
        ClaimOutcome::Owned => Ok(None),
        ClaimOutcome::Done(response) => match std::str::from_utf8(&response.body) {
            Ok(text) => Ok(Some(text.to_owned())),
            Err(_) => Err(Error::field(
                ErrorCode::InvalidStepOutput,
                "output",
                format!(
                    "the recorded output of `{}` is not UTF-8 text: this record was not written by a journal",
                    name.escape_debug()
                ),
            )),
        },
        ClaimOutcome::InFlight => Err(Error::field(
            ErrorCode::StepInFlight,
            "step",
            format!(
                "`{}` of this run is running in another attempt, or crashed while running: retry later; recovery settles one that crashed",
                name.escape_debug()
            ),
        )),
        ClaimOutcome::PayloadConflict => Err(Error::field(
            ErrorCode::StepInputChanged,
            "step",
            format!(
                "`{}` of this run was recorded with another input or other arguments: give a step that asks something new a new name",
                name.escape_debug()
            ),
        )),
    }
}
