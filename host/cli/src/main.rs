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
mod ops_cmd;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

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
        /// Run against this store instead (sqlite:PATH or postgres://…).
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
    /// Compile the component ahead of time for this machine (loads in under a millisecond).
    Precompile {
        /// The component (default: $INTENTKEY_COMPONENT, else the build's dist/intentkey.wasm).
        #[arg(long)]
        component: Option<std::path::PathBuf>,
        /// Where to write the precompiled component (`.cwasm`).
        #[arg(long)]
        out: std::path::PathBuf,
    },
}

fn print_json(result: Result<serde_json::Value, String>) -> Result<ExitCode, String> {
    result.map(|value| {
        println!("{value}");
        ExitCode::SUCCESS
    })
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Derive(args) => derive_cmd::run(*args),
        Command::Demo { store } => demo::run(store).map(|()| ExitCode::SUCCESS),
        Command::Claim(a) => print_json(ops_cmd::claim_cmd(&a)),
        Command::Complete(a) => print_json(ops_cmd::complete_cmd(&a)),
        Command::Inspect(a) => print_json(ops_cmd::inspect_cmd(&a)),
        Command::Recover(a) => print_json(ops_cmd::recover_cmd(&a)),
        Command::Purge(a) => print_json(ops_cmd::purge_cmd(&a)),
        Command::Precompile { component, out } => {
            component::precompile(component.as_deref(), &out).map(|()| ExitCode::SUCCESS)
        }
    };
    match result {
        Ok(code) => code,
        Err(message) => {
            eprintln!("intentkey: {message}");
            ExitCode::from(2)
        }
    }
}
