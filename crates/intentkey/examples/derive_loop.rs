//! Derives one of `bench/inputs.json`'s keys (or only its material) in a
//! loop: a fixed workload for an instruction count, which, unlike a timing,
//! repeats to the instruction on a shared machine.
//!
//! ```sh
//! cargo build --release -p intentkey --example derive_loop
//! valgrind --tool=callgrind target/release/examples/derive_loop typical material 20000
//! ```
//!
//! Arguments: the case (`typical` or `unicode`), what to derive (`key` or
//! `material`), how many times.

#![allow(clippy::expect_used)]

use std::hint::black_box;

use intentkey::{Deriver, Intent, Payload, Policy, Secret};
use serde_json::Value;

fn main() {
    let mut args = std::env::args().skip(1);
    let case = args.next().unwrap_or_else(|| "typical".to_owned());
    let what = args.next().unwrap_or_else(|| "key".to_owned());
    let times: u32 = args.next().map_or(20_000, |n| n.parse().expect("a count"));

    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../bench/inputs.json");
    let inputs: Value =
        serde_json::from_str(&std::fs::read_to_string(path).expect("bench/inputs.json"))
            .expect("JSON");
    let input = &inputs["cases"][case.as_str()];
    let payload = Payload::from_json(&input["payload"].to_string()).expect("the payload");
    let secret =
        Secret::from_hex(input["secret_hex"].as_str().expect("secret_hex")).expect("the secret");
    let deriver = Deriver::new(&secret, Policy::default());
    let intent = Intent {
        tenant_id: input["tenant_id"].as_str().expect("tenant_id"),
        action_type: input["action_type"].as_str().expect("action_type"),
        payload: &payload,
        intent_epoch: input["intent_epoch"].as_i64().expect("intent_epoch"),
    };
    for _ in 0..times {
        match what.as_str() {
            "material" => {
                black_box(deriver.material(black_box(&intent)).expect("material"));
            }
            _ => {
                black_box(deriver.derive(black_box(&intent)).expect("key"));
            }
        }
    }
}
