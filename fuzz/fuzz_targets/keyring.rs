//! The keyring: any text is a keyring or a typed error that never carries a
//! secret; a keyring picks, for every epoch, the latest activation not after
//! it, and a prior secret only inside the window after an activation.
#![no_main]

use intentkey::Keyring;
use libfuzzer_sys::fuzz_target;

/// The `secret_hex` values of the input that appear nowhere else in it (an
/// id may legitimately repeat one, and ids may be shown).
fn secrets_in(text: &str) -> Vec<&str> {
    text.match_indices("\"secret_hex\"")
        .filter_map(|(i, _)| text[i..].split('"').nth(3))
        .filter(|hex| hex.len() >= 16 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
        .filter(|hex| text.matches(*hex).count() == 1)
        .collect()
}

fuzz_target!(|data: &[u8]| {
    // The first 16 bytes are two epochs; the rest is the keyring document.
    if data.len() < 16 {
        return;
    }
    let (epochs, rest) = data.split_at(16);
    let at = i64::from_le_bytes(epochs[..8].try_into().expect("8 bytes"));
    let now = i64::from_le_bytes(epochs[8..].try_into().expect("8 bytes"));
    let Ok(text) = std::str::from_utf8(rest) else { return };
    let shown = match Keyring::from_json(text) {
        Ok(keyring) => {
            let entries = keyring.entries();
            assert!(!entries.is_empty());
            assert!(entries.windows(2).all(|w| w[0].active_from() < w[1].active_from()));
            match keyring.index_at(at) {
                Ok(i) => {
                    assert!(entries[i].active_from() <= at);
                    assert!(entries.get(i + 1).is_none_or(|next| next.active_from() > at));
                }
                Err(e) => {
                    assert_eq!(e.code().as_str(), "secret-retired");
                    assert!(entries[0].active_from() > at);
                }
            }
            if let Some(prior) = keyring.prior_index_at(now) {
                let current = keyring.index_at(now).expect("a prior implies a current secret");
                assert_eq!(prior + 1, current);
                assert!(now < entries[current].active_from().saturating_add(keyring.window_seconds()));
            }
            format!("{keyring:?}")
        }
        Err(e) => {
            assert!(!e.code().as_str().is_empty());
            assert!(e.message().len() < 1024, "an error message stays short");
            e.message().to_owned()
        }
    };
    for secret in secrets_in(text) {
        assert!(!shown.contains(secret), "a secret was shown: {shown}");
    }
});
