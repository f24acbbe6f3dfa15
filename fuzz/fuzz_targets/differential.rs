//! The native core against the component run in wasmtime: the same input
//! gives the same answer, byte for byte, and the component never traps.
//! Half the inputs go to the JSON-lines answerer (payload parsing, every
//! normalizer, the policy, keys and errors), half to the HTTP endpoint's
//! `admit` (key headers, body limits, the request fingerprint) of each
//! profile. Needs `dist/intentkey-pure.wasm` (`cargo xtask build-component`).
#![no_main]

use std::cell::RefCell;
use std::sync::OnceLock;

use intentkey::http::{Endpoint, Incoming, Options, Profile};
use intentkey::{Policy, RequestAnswerer, Secret};
use intentkey_wasmtime::{WasmEndpoint, WasmEngine, WasmKeys};
use libfuzzer_sys::fuzz_target;

#[path = "split.rs"]
mod split;

const SECRET: [u8; 32] = [3u8; 32];
const PROFILES: [Profile; 3] = [Profile::Ietf, Profile::Stripe, Profile::Ofb];

fn engine() -> &'static WasmEngine {
    static ENGINE: OnceLock<WasmEngine> = OnceLock::new();
    ENGINE.get_or_init(|| {
        WasmEngine::from_file(concat!(env!("CARGO_MANIFEST_DIR"), "/../dist/intentkey-pure.wasm"))
            .expect("dist/intentkey-pure.wasm: run `cargo xtask build-component` first")
    })
}

fn options(profile: Profile) -> Options {
    Options { max_body_bytes: 256, ..Options::new(profile) }
}

thread_local! {
    static KEYS: RefCell<WasmKeys<'static>> = RefCell::new(WasmKeys::new(engine()).expect("an instance"));
    static ENDPOINTS: RefCell<Vec<WasmEndpoint<'static>>> = RefCell::new(
        PROFILES
            .iter()
            .map(|p| WasmEndpoint::new(engine(), &SECRET, &options(*p), &[]).expect("an endpoint"))
            .collect(),
    );
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else { return };
    if mode % 2 == 0 {
        let line = String::from_utf8_lossy(rest).replace('\n', " ");
        let native = RequestAnswerer::new(Policy::default()).answer_line(&line);
        let wasm = KEYS
            .with(|k| k.borrow_mut().answer_lines(std::slice::from_ref(&line)))
            .expect("the component answered (a trap is a failure)");
        assert_eq!(wasm, vec![native], "the component and the native core disagree on {line:?}");
        return;
    }
    let Some((&p, rest)) = rest.split_first() else { return };
    let i = usize::from(p % 3);
    let (values, body) = split::values_and_body(rest);
    let refs: Vec<&str> = values.iter().map(String::as_str).collect();
    let content_type = ["application/json", "application/x-www-form-urlencoded", "application/octet-stream"][usize::from(p / 3 % 3)];
    let request = Incoming {
        tenant_id: "tenant-1",
        method: "POST",
        route: "/orders",
        key_values: &refs,
        content_type: Some(content_type),
        body,
    };
    let native = Endpoint::new(Secret::new(SECRET).expect("secret"), options(PROFILES[i]))
        .admit(&request, 1_700_000_000)
        .expect("admit errs only for the server's mistakes");
    let wasm = ENDPOINTS
        .with(|e| e.borrow_mut()[i].admit(&request, 1_700_000_000))
        .expect("the component admitted (a trap is a failure)");
    assert_eq!(wasm, native, "the component and the native core disagree");
});
