//! `intentkey`: derive idempotency keys from the command line.
//!
//! ```text
//! intentkey derive --jsonl < intents.jsonl > keys.jsonl
//! INTENTKEY_SECRET=<hex> intentkey derive --tenant t1 --action pix.send --epoch 1700000000 \
//!     --payload '{"amount":"10.50","currency":"BRL","creditor_key":"12345678909"}'
//! ```

mod component;
mod derive_cmd;

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

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Derive(args) => derive_cmd::run(*args),
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
