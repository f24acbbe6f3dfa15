//! Typed errors with stable kebab-case codes.
//!
//! Every failure the core can report is an [`Error`]: a stable [`ErrorCode`] that
//! programs match on, the name of the field at fault (when there is one), and a
//! message that says what was wrong and what to do. Messages name fields, never
//! their values (payloads carry personal data) and never secret bytes.

use std::fmt;

/// The stable, kebab-case error codes. The same strings appear in the golden
/// vectors (`expectedError`), the command-line JSON output and every binding.
/// Not `non_exhaustive`: every binding maps it with an exhaustive match, so a
/// new code cannot compile until each binding (and the WIT enum) has it.
///
/// This enum and [`ErrorCode::ALL`] are the one source of the codes:
/// `cargo xtask gen-bindings` writes them into the npm package's types, the
/// Python binding and the adapters' maps, and `--check` (a step of
/// scripts/test-all.sh) fails when one of those, or the hand-written WIT
/// `enum error-code`, differs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ErrorCode {
    /// The secret is shorter than 32 bytes.
    SecretTooShort,
    /// The secret is missing or is not hex.
    InvalidSecret,
    /// The tenant id is missing, empty or not a string.
    InvalidTenantId,
    /// The action type is missing, empty or not a string.
    InvalidActionType,
    /// The policy closes its action types and this one is not among them.
    UnknownActionType,
    /// The intent epoch is missing, not an integer, or outside the signed 64-bit range.
    InvalidEpoch,
    /// The payload is missing, not a JSON object, or nested too deeply.
    InvalidPayload,
    /// The payload has fields the policy does not classify.
    UnclassifiedFields,
    /// A field has the wrong JSON type for its normalizer.
    InvalidFieldType,
    /// A decimal field is not a finite decimal number written in ASCII digits.
    InvalidDecimal,
    /// A decimal field needs more than 28 significant digits at its scale.
    DecimalOutOfRange,
    /// An integer field is not an integer.
    InvalidInteger,
    /// A currency field is not three ASCII letters.
    InvalidCurrency,
    /// A pix-key field normalizes to nothing, or is a document key with non-ASCII digits.
    InvalidPixKey,
    /// The intent id is empty.
    InvalidIntentId,
    /// The policy document is malformed.
    InvalidPolicy,
    /// The input is not valid JSON, or not the expected JSON shape.
    InvalidJson,
    /// A key length outside 32..=64 hex characters was asked for.
    InvalidKeyLength,
    /// The random bytes for a `uuid` key are not exactly 16.
    InvalidRandom,
    /// The store could not be reached or was busy (retryable: nothing was
    /// decided or lost; try again).
    StoreUnavailable,
    /// The store refused the operation or holds malformed data (not retryable).
    StoreFailed,
    /// A claim's record was purged between a lost insert and its read, three
    /// times in a row (retryable).
    RecordVanished,
    /// A host resumed a claim flow with the wrong result: a bug in the host.
    FlowMisuse,
    /// A file or stream could not be read or written (the command-line tool's input, output or policy file).
    IoFailed,
    /// A command-line argument or option value is not valid; the message names it.
    InvalidArgument,
    /// The WebAssembly component could not be loaded, or trapped (a bug in intentkey: report it).
    ComponentFailed,
    /// The keyring is empty or malformed: an id missing, repeated or not
    /// printable ASCII, two secrets with one activation epoch, or a
    /// keyring-only call without the intent's epoch.
    InvalidKeyring,
    /// No secret of the keyring is active at the intent's epoch: the secret
    /// that keyed the intent was dropped.
    SecretRetired,
    /// A journaled step's name is empty, longer than 200 bytes, or holds a
    /// control character.
    InvalidStepName,
    /// A journaled step's output is not JSON text.
    InvalidStepOutput,
    /// A journaled step's output is larger than the journal's limit.
    StepOutputTooLarge,
    /// Another attempt of this step or tool call is running, or crashed
    /// mid-run (retryable: recovery settles a crashed one).
    StepInFlight,
    /// This step or tool call of the run was recorded with another input or
    /// other arguments under the same name.
    StepInputChanged,
    /// A response is larger than the store can keep in one record
    /// (DynamoDB's 400 KB item); nothing was written.
    ResponseTooLarge,
}

impl ErrorCode {
    /// Every code, in declaration order.
    pub const ALL: [ErrorCode; 34] = [
        ErrorCode::SecretTooShort,
        ErrorCode::InvalidSecret,
        ErrorCode::InvalidTenantId,
        ErrorCode::InvalidActionType,
        ErrorCode::UnknownActionType,
        ErrorCode::InvalidEpoch,
        ErrorCode::InvalidPayload,
        ErrorCode::UnclassifiedFields,
        ErrorCode::InvalidFieldType,
        ErrorCode::InvalidDecimal,
        ErrorCode::DecimalOutOfRange,
        ErrorCode::InvalidInteger,
        ErrorCode::InvalidCurrency,
        ErrorCode::InvalidPixKey,
        ErrorCode::InvalidIntentId,
        ErrorCode::InvalidPolicy,
        ErrorCode::InvalidJson,
        ErrorCode::InvalidKeyLength,
        ErrorCode::InvalidRandom,
        ErrorCode::StoreUnavailable,
        ErrorCode::StoreFailed,
        ErrorCode::RecordVanished,
        ErrorCode::FlowMisuse,
        ErrorCode::IoFailed,
        ErrorCode::InvalidArgument,
        ErrorCode::ComponentFailed,
        ErrorCode::InvalidKeyring,
        ErrorCode::SecretRetired,
        ErrorCode::InvalidStepName,
        ErrorCode::InvalidStepOutput,
        ErrorCode::StepOutputTooLarge,
        ErrorCode::StepInFlight,
        ErrorCode::StepInputChanged,
        ErrorCode::ResponseTooLarge,
    ];

    /// The stable kebab-case code, e.g. `"unclassified-fields"`.
    ///
    /// ```
    /// assert_eq!(intentkey::ErrorCode::SecretTooShort.as_str(), "secret-too-short");
    /// ```
    pub const fn as_str(self) -> &'static str {
        match self {
            ErrorCode::SecretTooShort => "secret-too-short",
            ErrorCode::InvalidSecret => "invalid-secret",
            ErrorCode::InvalidTenantId => "invalid-tenant-id",
            ErrorCode::InvalidActionType => "invalid-action-type",
            ErrorCode::UnknownActionType => "unknown-action-type",
            ErrorCode::InvalidEpoch => "invalid-epoch",
            ErrorCode::InvalidPayload => "invalid-payload",
            ErrorCode::UnclassifiedFields => "unclassified-fields",
            ErrorCode::InvalidFieldType => "invalid-field-type",
            ErrorCode::InvalidDecimal => "invalid-decimal",
            ErrorCode::DecimalOutOfRange => "decimal-out-of-range",
            ErrorCode::InvalidInteger => "invalid-integer",
            ErrorCode::InvalidCurrency => "invalid-currency",
            ErrorCode::InvalidPixKey => "invalid-pix-key",
            ErrorCode::InvalidIntentId => "invalid-intent-id",
            ErrorCode::InvalidPolicy => "invalid-policy",
            ErrorCode::InvalidJson => "invalid-json",
            ErrorCode::InvalidKeyLength => "invalid-key-length",
            ErrorCode::InvalidRandom => "invalid-random",
            ErrorCode::StoreUnavailable => "store-unavailable",
            ErrorCode::StoreFailed => "store-failed",
            ErrorCode::RecordVanished => "record-vanished",
            ErrorCode::FlowMisuse => "flow-misuse",
            ErrorCode::IoFailed => "io-failed",
            ErrorCode::InvalidArgument => "invalid-argument",
            ErrorCode::ComponentFailed => "component-failed",
            ErrorCode::InvalidKeyring => "invalid-keyring",
            ErrorCode::SecretRetired => "secret-retired",
            ErrorCode::InvalidStepName => "invalid-step-name",
            ErrorCode::InvalidStepOutput => "invalid-step-output",
            ErrorCode::StepOutputTooLarge => "step-output-too-large",
            ErrorCode::StepInFlight => "step-in-flight",
            ErrorCode::StepInputChanged => "step-input-changed",
            ErrorCode::ResponseTooLarge => "response-too-large",
        }
    }

    /// Looks a code up by its kebab-case string.
    ///
    /// ```
    /// use intentkey::ErrorCode;
    /// assert_eq!(ErrorCode::parse("invalid-epoch"), Some(ErrorCode::InvalidEpoch));
    /// assert_eq!(ErrorCode::parse("nope"), None);
    /// ```
    pub fn parse(code: &str) -> Option<ErrorCode> {
        ErrorCode::ALL.into_iter().find(|c| c.as_str() == code)
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An intentkey error: a stable code, the field at fault and a message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    code: ErrorCode,
    field: Option<String>,
    message: String,
}

impl Error {
    /// Makes an error that concerns no single field.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Error {
            code,
            field: None,
            message: message.into(),
        }
    }

    /// Makes an error about one named field (a payload member, a request member
    /// or a policy path such as `fields.amount.scale`).
    pub fn field(code: ErrorCode, field: impl Into<String>, message: impl Into<String>) -> Self {
        Error {
            code,
            field: Some(field.into()),
            message: message.into(),
        }
    }

    /// The stable code.
    pub fn code(&self) -> ErrorCode {
        self.code
    }

    /// The field (or policy path) at fault, if the error concerns one.
    pub fn field_name(&self) -> Option<&str> {
        self.field.as_deref()
    }

    /// The human-readable message: what was wrong and what to do.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for Error {}

/// Shorthand for results carrying an [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The first 64 characters of a client- or caller-supplied string, for
/// quoting it in a message without letting the message grow with the input.
pub(crate) fn clip(text: &str) -> String {
    text.chars().take(64).collect()
}

#[cfg(test)]
mod tests {
    use super::ErrorCode;

    /// A code's place in [`ErrorCode::ALL`], checked while compiling.
    ///
    /// The match is exhaustive, so a new variant does not compile until it is
    /// given a place here; `at!` then asserts, at compile time, that `ALL` holds
    /// that variant at that place (an index past the end of `ALL` is a compile
    /// error too). So a variant cannot be left out of `ALL`.
    fn place(code: ErrorCode) -> usize {
        macro_rules! at {
            ($index:literal, $variant:ident) => {
                const {
                    assert!(
                        matches!(ErrorCode::ALL[$index], ErrorCode::$variant),
                        concat!(
                            "ErrorCode::ALL[",
                            stringify!($index),
                            "] is not ErrorCode::",
                            stringify!($variant)
                        )
                    );
                    $index
                }
            };
        }
        match code {
            ErrorCode::SecretTooShort => at!(0, SecretTooShort),
            ErrorCode::InvalidSecret => at!(1, InvalidSecret),
            ErrorCode::InvalidTenantId => at!(2, InvalidTenantId),
            ErrorCode::InvalidActionType => at!(3, InvalidActionType),
            ErrorCode::UnknownActionType => at!(4, UnknownActionType),
            ErrorCode::InvalidEpoch => at!(5, InvalidEpoch),
            ErrorCode::InvalidPayload => at!(6, InvalidPayload),
            ErrorCode::UnclassifiedFields => at!(7, UnclassifiedFields),
            ErrorCode::InvalidFieldType => at!(8, InvalidFieldType),
            ErrorCode::InvalidDecimal => at!(9, InvalidDecimal),
            ErrorCode::DecimalOutOfRange => at!(10, DecimalOutOfRange),
            ErrorCode::InvalidInteger => at!(11, InvalidInteger),
            ErrorCode::InvalidCurrency => at!(12, InvalidCurrency),
            ErrorCode::InvalidPixKey => at!(13, InvalidPixKey),
            ErrorCode::InvalidIntentId => at!(14, InvalidIntentId),
            ErrorCode::InvalidPolicy => at!(15, InvalidPolicy),
            ErrorCode::InvalidJson => at!(16, InvalidJson),
            ErrorCode::InvalidKeyLength => at!(17, InvalidKeyLength),
            ErrorCode::InvalidRandom => at!(18, InvalidRandom),
            ErrorCode::StoreUnavailable => at!(19, StoreUnavailable),
            ErrorCode::StoreFailed => at!(20, StoreFailed),
            ErrorCode::RecordVanished => at!(21, RecordVanished),
            ErrorCode::FlowMisuse => at!(22, FlowMisuse),
            ErrorCode::IoFailed => at!(23, IoFailed),
            ErrorCode::InvalidArgument => at!(24, InvalidArgument),
            ErrorCode::ComponentFailed => at!(25, ComponentFailed),
            ErrorCode::InvalidKeyring => at!(26, InvalidKeyring),
            ErrorCode::SecretRetired => at!(27, SecretRetired),
            ErrorCode::InvalidStepName => at!(28, InvalidStepName),
            ErrorCode::InvalidStepOutput => at!(29, InvalidStepOutput),
            ErrorCode::StepOutputTooLarge => at!(30, StepOutputTooLarge),
            ErrorCode::StepInFlight => at!(31, StepInFlight),
            ErrorCode::StepInputChanged => at!(32, StepInputChanged),
            ErrorCode::ResponseTooLarge => at!(33, ResponseTooLarge),
        }
    }

    #[test]
    fn all_lists_every_variant_once() {
        for (index, code) in ErrorCode::ALL.into_iter().enumerate() {
            assert_eq!(
                place(code),
                index,
                "{code} is listed twice in ErrorCode::ALL"
            );
        }
    }

    #[test]
    fn codes_are_distinct_kebab_case_and_parse_back() {
        let mut seen = std::collections::BTreeSet::new();
        for code in ErrorCode::ALL {
            let text = code.as_str();
            assert!(seen.insert(text), "{text} is the string of two codes");
            assert!(
                !text.is_empty()
                    && !text.starts_with('-')
                    && !text.ends_with('-')
                    && !text.contains("--")
                    && text
                        .bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-'),
                "{text} is not kebab-case"
            );
            assert_eq!(ErrorCode::parse(text), Some(code));
            assert_eq!(code.to_string(), text);
        }
    }
}
