//! `intentkey`: derive idempotency keys from the command line.
//!
//! ```text
//! intentkey derive --jsonl < intents.jsonl > keys.jsonl
//! INTENTKEY_SECRET=<hex> intentkey derive --tenant t1 --action pix.send --epoch 1700000000 \
//!     --payload '{"amount":"10.50","currency":"BRL","creditor_key":"12345678909"}'
//! ```

mod component;
mod demo;
mod derive_cmd;
mod native_lines;
mod openapi_cmd;
mod ops_cmd;

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use intentkey::ErrorCode;

/// Idempotency keys born with the intent.
#[derive(Parser)]
#[command(name = "intentkey", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Derive keys: one intent from flags or JSON, or a JSON-lines batch.
    Derive(Box<derive_cmd::DeriveArgs>),
    /// The main job: a timeline of claims, replays, conflicts and recoveries on a fresh SQLite file.
    Demo {
        /// Run against this store instead (sqlite:PATH, postgres://…, mysql://…, redis://…, redis+cluster://… or dynamodb://…).
        #[arg(long)]
        store: Option<String>,
    },
    /// Claim a key: prints {"outcome": "owned" | "in-flight" | "done" | "payload-conflict", …}.
    Claim(ops_cmd::ClaimArgs),
    /// Complete an in-flight record with the effect's response.
    Complete(ops_cmd::CompleteArgs),
    /// Show one record, or list records by status.
    Inspect(ops_cmd::InspectArgs),
    /// Apply a destination look-up answer to an in-flight record.
    Recover(ops_cmd::RecoverArgs),
    /// Delete done records past their expiry (never in-flight ones).
    Purge(ops_cmd::StoreArg),
    /// An operator's view: counts by status, the oldest in-flight age, how many are due a look-up, the records awaiting reconciliation.
    Status(ops_cmd::StatusArgs),
    /// Record a human's decision on a record awaiting reconciliation: --found (with the effect's response) or --absent.
    Reconcile(ops_cmd::ReconcileArgs),
    /// Print the OpenAPI fragment of a server's idempotency: key header, expiry policy, error shapes.
    Openapi(openapi_cmd::OpenapiArgs),
    /// Compile the component ahead of time for this machine (loads in under a millisecond).
    Precompile {
        /// The component (default: $INTENTKEY_COMPONENT, else the build's dist/intentkey-pure.wasm).
        #[arg(long)]
        component: Option<std::path::PathBuf>,
        /// Where to write the precompiled component (`.cwasm`).
        #[arg(long)]
        out: std::path::PathBuf,
    },
}

/// A command's failure: a stable kebab-case code (the core's vocabulary,
/// `intentkey::ErrorCode`) and a message saying what to do. Printed on stderr
/// as one JSON object, `{"error":{"code":…,"message":…}}`, with exit status 2.
#[derive(Debug)]
pub struct CliError {
    code: ErrorCode,
    message: String,
}

impl CliError {
    /// An error with this code.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        CliError {
            code,
            message: message.into(),
        }
    }

    /// The core's error, with its code.
    pub fn core(e: &intentkey::Error) -> Self {
        CliError::new(e.code(), e.message())
    }

    /// A file or stream could not be read or written.
    pub fn io(message: impl Into<String>) -> Self {
        CliError::new(ErrorCode::IoFailed, message)
    }
}

fn print_json(result: Result<serde_json::Value, CliError>) -> Result<ExitCode, CliError> {
    result.map(|value| {
        println!("{value}");
        ExitCode::SUCCESS
    })
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        // --help and --version print as usual; a bad argument gets a code too.
        Err(e) if !e.use_stderr() => e.exit(),
        Err(e) => {
            let message = e.render().to_string();
            eprintln!(
                "{}",
                serde_json::json!({"error": {"code": ErrorCode::InvalidArgument.as_str(), "message": message.trim_end()}})
            );
            return ExitCode::from(2);
        }
    };
    let result = match cli.command {
        Command::Derive(args) => derive_cmd::run(*args),
        // The demo's failures are the store's (or a broken rule, reported as the store's).
        Command::Demo { store } => demo::run(store)
            .map(|()| ExitCode::SUCCESS)
            .map_err(|m| CliError::new(ErrorCode::StoreFailed, m)),
        Command::Claim(a) => print_json(ops_cmd::claim_cmd(&a)),
        Command::Complete(a) => print_json(ops_cmd::complete_cmd(&a)),
        Command::Inspect(a) => print_json(ops_cmd::inspect_cmd(&a)),
        Command::Recover(a) => print_json(ops_cmd::recover_cmd(&a)),
        Command::Purge(a) => print_json(ops_cmd::purge_cmd(&a)),
        Command::Status(a) => ops_cmd::status_cmd(&a).map(|(value, text)| {
            if a.json() {
                println!("{value}");
            } else {
                print!("{text}");
            }
            ExitCode::SUCCESS
        }),
        Command::Reconcile(a) => print_json(ops_cmd::reconcile_cmd(&a)),
        Command::Openapi(a) => openapi_cmd::openapi_cmd(&a).map(|value| {
            println!("{value:#}");
            ExitCode::SUCCESS
        }),
        Command::Precompile { component, out } => component::precompile(component.as_deref(), &out)
            .map(|()| ExitCode::SUCCESS)
            .map_err(|m| CliError::new(ErrorCode::ComponentFailed, m)),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!(
                "{}",
                serde_json::json!({"error": {"code": e.code.as_str(), "message": format!("intentkey: {}", e.message)}})
            );
            ExitCode::from(2)
        }
    }
}
