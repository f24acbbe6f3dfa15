//! `intentkey derive`.

use std::fs;
use std::io::{self, BufRead, BufReader, BufWriter, Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, ValueEnum};
use intentkey::{
    uuid_key, Error, ErrorCode, Intent, KeyLength, Keyer, Keyring, Payload, Policy, Secret,
};
use serde_json::{json, Value};

use crate::CliError;

/// Which implementation answers.
#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub enum Engine {
    /// The Rust core linked into this binary.
    Native,
    /// The intentkey WebAssembly component on wasmtime (the same binary every runtime runs).
    Wasm,
}

/// Key modes.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum Mode {
    /// HMAC-SHA256 over the canonical material of the payload's key fields.
    Fields,
    /// HMAC-SHA256 over a domain-separated intent id.
    IntentHmac,
    /// A UUID v4 from fresh random bytes.
    Uuid,
}

#[derive(Args)]
pub struct DeriveArgs {
    /// Read JSON lines from stdin (oracle input format: id, secret_hex, tenant_id,
    /// action_type, payload, intent_epoch) and answer each with one line.
    #[arg(long)]
    jsonl: bool,
    /// Read the JSON lines from this file instead of stdin.
    #[arg(long, requires = "jsonl")]
    input: Option<PathBuf>,
    /// Which implementation answers the lines.
    #[arg(long, value_enum, default_value = "native", requires = "jsonl")]
    engine: Engine,
    /// The component for `--engine wasm`: `intentkey-pure.wasm`, or a `.cwasm` made by
    /// `intentkey precompile` (default: $INTENTKEY_COMPONENT, else the build's dist/intentkey-pure.wasm).
    #[arg(long)]
    component: Option<PathBuf>,
    /// Threads answering lines with `--engine native` (default: one per
    /// core); answers keep the input's order whatever the count.
    #[arg(long, requires = "jsonl", value_parser = clap::value_parser!(u16).range(1..=256))]
    threads: Option<u16>,
    /// Print no summary on stderr.
    #[arg(long, short)]
    quiet: bool,
    /// Policy JSON file (default: the built-in payments policy).
    #[arg(long)]
    policy: Option<PathBuf>,
    /// Key mode for a single derivation.
    #[arg(long, value_enum, default_value = "fields", conflicts_with = "jsonl")]
    mode: Mode,
    /// Tenant id.
    #[arg(long)]
    tenant: Option<String>,
    /// Action type (fields mode).
    #[arg(long)]
    action: Option<String>,
    /// Payload JSON object (fields mode).
    #[arg(long, conflicts_with = "payload_file")]
    payload: Option<String>,
    /// File holding the payload JSON object.
    #[arg(long)]
    payload_file: Option<PathBuf>,
    /// Intent epoch in seconds, from the intent record (fields mode; with a
    /// keyring of several secrets, intent-hmac mode too: it picks the secret).
    #[arg(long, allow_hyphen_values = true)]
    epoch: Option<i64>,
    /// One intent as a JSON object with tenant_id, action_type, payload and
    /// intent_epoch (instead of the separate flags).
    #[arg(long, conflicts_with_all = ["tenant", "action", "payload", "payload_file", "epoch"])]
    json: Option<String>,
    /// Intent id (intent-hmac mode).
    #[arg(long)]
    intent_id: Option<String>,
    /// Key length in hex characters, 32..=64 (default: the policy's).
    #[arg(long)]
    length: Option<usize>,
    /// File holding the secret as hex (default: the INTENTKEY_SECRET variable).
    #[arg(long)]
    secret_file: Option<PathBuf>,
    /// File holding a keyring instead of one secret:
    /// {"secrets": [{"id", "active_from", "secret_hex"}, …], "window_seconds": …}.
    /// Each intent is keyed with the secret active at its own epoch.
    #[arg(long, conflicts_with_all = ["secret_file", "jsonl"])]
    keyring_file: Option<PathBuf>,
    /// Also print the canonical material.
    #[arg(long)]
    material: bool,
}

pub fn run(args: DeriveArgs) -> Result<ExitCode, CliError> {
    let policy_text = match &args.policy {
        Some(path) => Some(
            fs::read_to_string(path)
                .map_err(|e| CliError::io(format!("cannot read policy {}: {e}", path.display())))?,
        ),
        None => None,
    };
    // The policy is validated up front, whichever engine answers.
    let policy = match (&policy_text, &args.policy) {
        (Some(text), Some(path)) => Policy::from_json(text)
            .map_err(|e| CliError::new(e.code(), format!("policy {}: {e}", path.display())))?,
        _ => Policy::default(),
    };
    if args.jsonl {
        let engine = match args.engine {
            Engine::Native => None,
            Engine::Wasm => Some(
                crate::component::load(args.component.as_deref())
                    .map_err(|m| CliError::new(ErrorCode::ComponentFailed, m))?,
            ),
        };
        return run_jsonl(&args, policy, policy_text.as_deref(), engine.as_ref());
    }
    match derive_one(&args, policy) {
        Ok(out) => {
            println!("{out}");
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            println!(
                "{}",
                json!({"error": {"code": e.code().as_str(), "message": e.message()}})
            );
            Ok(ExitCode::from(1))
        }
    }
}

/// Lines per component call: large enough to spread the boundary cost.
const BATCH: usize = 1024;

fn run_jsonl(
    args: &DeriveArgs,
    policy: Policy,
    policy_text: Option<&str>,
    engine: Option<&intentkey_wasmtime::WasmEngine>,
) -> Result<ExitCode, CliError> {
    let input: Box<dyn Read> = match &args.input {
        Some(path) => Box::new(
            fs::File::open(path)
                .map_err(|e| CliError::io(format!("cannot open {}: {e}", path.display())))?,
        ),
        None => Box::new(io::stdin().lock()),
    };
    let stdout = io::stdout().lock();
    let mut out = BufWriter::with_capacity(1 << 16, stdout);
    let (lines, keys) = match engine {
        Some(engine) => {
            if args.threads.is_some_and(|n| n > 1) {
                return Err(CliError::new(
                    ErrorCode::InvalidArgument,
                    "--threads applies to --engine native; the component answers on one thread",
                ));
            }
            wasm_lines(input, &mut out, engine, policy_text)?
        }
        None => {
            let threads = match args.threads {
                Some(n) => usize::from(n),
                None => std::thread::available_parallelism().map_or(1, usize::from),
            };
            crate::native_lines::answer(input, &mut out, &policy, threads)?
        }
    };
    out.flush()
        .map_err(|e| CliError::io(format!("writing output: {e}")))?;
    if !args.quiet {
        eprintln!(
            "intentkey: answered {lines} lines: {keys} keys, {} errors",
            lines - keys
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// Answers the lines through the component, [`BATCH`] lines per call.
/// Returns how many lines were answered and how many with a key.
fn wasm_lines(
    input: Box<dyn Read>,
    out: &mut impl Write,
    engine: &intentkey_wasmtime::WasmEngine,
    policy_text: Option<&str>,
) -> Result<(u64, u64), CliError> {
    let mut reader = BufReader::with_capacity(1 << 16, input);
    let mut wasm = intentkey_wasmtime::WasmKeys::new(engine)
        .map_err(|e| CliError::new(ErrorCode::ComponentFailed, e.to_string()))?;
    let (mut lines, mut keys) = (0u64, 0u64);
    let mut batch: Vec<Result<String, String>> = Vec::with_capacity(BATCH);
    let mut buf = Vec::with_capacity(1024);
    loop {
        buf.clear();
        let n = reader
            .read_until(b'\n', &mut buf)
            .map_err(|e| CliError::io(format!("reading input: {e}")))?;
        if n > 0 {
            if buf.last() == Some(&b'\n') {
                buf.pop();
            }
            // A line that is not UTF-8 never reaches the core: it is answered here.
            batch.push(
                String::from_utf8(buf.clone())
                    .map_err(|_| intentkey::request::unreadable_line_answer()),
            );
        }
        if batch.len() == BATCH || (n == 0 && !batch.is_empty()) {
            let answers = answer_batch(&batch, &mut wasm, policy_text)
                .map_err(|m| CliError::new(ErrorCode::ComponentFailed, m))?;
            for answer in answers {
                lines += 1;
                keys += u64::from(crate::native_lines::is_key_answer(&answer));
                writeln!(out, "{answer}")
                    .map_err(|e| CliError::io(format!("writing output: {e}")))?;
            }
            batch.clear();
        }
        if n == 0 {
            break;
        }
    }
    Ok((lines, keys))
}

/// Answers one batch in input order; non-UTF-8 lines keep their place.
fn answer_batch(
    batch: &[Result<String, String>],
    wasm: &mut intentkey_wasmtime::WasmKeys<'_>,
    policy_text: Option<&str>,
) -> Result<Vec<String>, String> {
    let text: Vec<String> = batch
        .iter()
        .filter_map(|l| l.as_ref().ok().cloned())
        .collect();
    let mut answered = match policy_text {
        Some(policy) => wasm.answer_lines_with_policy(policy, &text),
        None => wasm.answer_lines(&text),
    }
    .map_err(|e| e.to_string())?
    .into_iter();
    batch
        .iter()
        .map(|line| match line {
            Ok(_) => answered.next(),
            Err(answer) => Some(answer.clone()),
        })
        .collect::<Option<Vec<String>>>()
        .ok_or_else(|| "the component answered fewer lines than it was given".to_owned())
}

fn read_secret(args: &DeriveArgs) -> Result<Secret, Error> {
    let missing = || {
        Error::field(
            intentkey::ErrorCode::InvalidSecret,
            "secret",
            "no secret: set INTENTKEY_SECRET to the hex secret or pass --secret-file PATH (never on the command line)",
        )
    };
    let hex = match &args.secret_file {
        Some(path) => fs::read_to_string(path).map_err(|_| {
            Error::field(
                intentkey::ErrorCode::InvalidSecret,
                "secret",
                format!("cannot read the secret file {}", path.display()),
            )
        })?,
        None => std::env::var("INTENTKEY_SECRET").map_err(|_| missing())?,
    };
    Secret::from_hex(hex.trim())
}

/// The keyer of `--keyring-file`, or of the one secret (`--secret-file`,
/// `INTENTKEY_SECRET`).
fn read_keyer(args: &DeriveArgs, policy: Policy) -> Result<Keyer, Error> {
    let keyring = match &args.keyring_file {
        Some(path) => {
            let text = fs::read_to_string(path).map_err(|_| {
                Error::field(
                    ErrorCode::InvalidKeyring,
                    "keyring",
                    format!("cannot read the keyring file {}", path.display()),
                )
            })?;
            Keyring::from_json(&text)?
        }
        None => Keyring::single(read_secret(args)?),
    };
    Ok(Keyer::new(&keyring, policy))
}

fn derive_one(args: &DeriveArgs, policy: Policy) -> Result<Value, Error> {
    let policy = match args.length {
        Some(n) => policy.with_key_length(KeyLength::new(n)?),
        None => policy,
    };
    let length = policy.key_length();
    match args.mode {
        Mode::Uuid => {
            let mut random = [0u8; 16];
            getrandom::fill(&mut random).map_err(|e| {
                Error::field(
                    ErrorCode::InvalidRandom,
                    "random",
                    format!("the operating system gave no randomness: {e}"),
                )
            })?;
            Ok(json!({"mode": "uuid", "key": uuid_key(random).as_str()}))
        }
        Mode::IntentHmac => {
            let keyer = read_keyer(args, policy)?;
            let tenant = args.tenant.as_deref().unwrap_or_default();
            let intent_id = args.intent_id.as_deref().unwrap_or_default();
            let key = match args.epoch {
                Some(epoch) => keyer.intent_key(tenant, intent_id, epoch, length)?,
                None => keyer
                    .sole_deriver()?
                    .intent_key(tenant, intent_id, length)?,
            };
            let mut out = json!({"mode": "intent-hmac", "key": key.as_str()});
            if let (Some(_), Some(epoch)) = (&args.keyring_file, args.epoch) {
                out["secret_id"] = Value::String(keyer.secret_id_at(epoch)?.to_owned());
            }
            Ok(out)
        }
        Mode::Fields => {
            let (tenant, action, payload, epoch) = fields_input(args)?;
            let keyer = read_keyer(args, policy)?;
            let intent = Intent {
                tenant_id: &tenant,
                action_type: &action,
                payload: &payload,
                intent_epoch: epoch,
            };
            let material = keyer.material(&intent)?;
            let key = keyer.derive(&intent)?.into_string();
            let fingerprint = keyer.fingerprint(&tenant, &action, &payload, epoch)?;
            let mut out =
                json!({"mode": "fields", "key": key, "fingerprint": fingerprint.as_str()});
            if args.keyring_file.is_some() {
                out["secret_id"] = Value::String(keyer.secret_id_at(epoch)?.to_owned());
            }
            if args.material {
                out["material"] = Value::String(String::from_utf8_lossy(&material).into_owned());
            }
            Ok(out)
        }
    }
}

fn fields_input(args: &DeriveArgs) -> Result<(String, String, Payload, i64), Error> {
    if let Some(text) = &args.json {
        let value: Value = serde_json::from_str(text).map_err(|e| {
            Error::new(
                intentkey::ErrorCode::InvalidJson,
                format!("--json is not valid JSON ({e})"),
            )
        })?;
        let get_str = |name: &str, code| match value.get(name) {
            Some(Value::String(s)) => Ok(s.clone()),
            _ => Err(Error::field(
                code,
                name,
                format!("--json needs a string `{name}`"),
            )),
        };
        let tenant = get_str("tenant_id", intentkey::ErrorCode::InvalidTenantId)?;
        let action = get_str("action_type", intentkey::ErrorCode::InvalidActionType)?;
        let epoch = intentkey::request::epoch(value.get("intent_epoch"))?;
        let payload = Payload::from_value(value.get("payload").cloned().unwrap_or(Value::Null))?;
        return Ok((tenant, action, payload, epoch));
    }
    let payload_text = match (&args.payload, &args.payload_file) {
        (Some(p), _) => p.clone(),
        (None, Some(path)) => fs::read_to_string(path).map_err(|_| {
            Error::field(
                intentkey::ErrorCode::InvalidPayload,
                "payload",
                format!("cannot read the payload file {}", path.display()),
            )
        })?,
        (None, None) => "{}".to_owned(),
    };
    let payload = Payload::from_json(&payload_text)?;
    let epoch = args.epoch.ok_or_else(|| {
        Error::field(
            intentkey::ErrorCode::InvalidEpoch,
            "intent_epoch",
            "--epoch is required in fields mode: the intent's recorded time in seconds",
        )
    })?;
    Ok((
        args.tenant.clone().unwrap_or_default(),
        args.action.clone().unwrap_or_default(),
        payload,
        epoch,
    ))
}
