//! Runs every golden vector in `tests/vectors/*.json` against the native core,
//! through the shared runner (`intentkey-vectors`). A failure names `file#tcId`.

#![allow(missing_docs, clippy::panic, clippy::unwrap_used, clippy::expect_used)]

use intentkey::{
    uuid_key_from_slice, Deriver, Error, Intent, KeyLength, Payload, Policy, RequestAnswerer,
    Secret,
};
use intentkey_vectors::{Answer, Refusal, Subject};
use serde_json::Value;

struct Native;

fn refusal(e: Error) -> Refusal {
    Refusal {
        code: e.code().as_str().to_owned(),
        field: e.field_name().map(str::to_owned),
    }
}

fn policy(policy: Option<&Value>) -> Result<Policy, Error> {
    policy.map_or_else(|| Ok(Policy::default()), Policy::from_value)
}

fn utf8(bytes: Vec<u8>) -> String {
    String::from_utf8(bytes).expect("material is UTF-8")
}

impl Subject for Native {
    fn fields(
        &mut self,
        p: Option<&Value>,
        secret: &str,
        tenant: &str,
        action: &str,
        payload: &str,
        epoch: i64,
    ) -> Answer<(String, String)> {
        (|| {
            let deriver = Deriver::new(&Secret::from_hex(secret)?, policy(p)?);
            let payload = Payload::from_json(payload)?;
            let intent = Intent {
                tenant_id: tenant,
                action_type: action,
                payload: &payload,
                intent_epoch: epoch,
            };
            Ok((
                utf8(deriver.material(&intent)?),
                deriver.derive(&intent)?.into_string(),
            ))
        })()
        .map_err(refusal)
    }

    fn request_line(&mut self, line: &str) -> String {
        RequestAnswerer::new(Policy::default()).answer_line(line)
    }

    fn policy(&mut self, p: &Value) -> Answer<()> {
        Policy::from_value(p).map(|_| ()).map_err(refusal)
    }

    fn intent_hmac(
        &mut self,
        secret: &str,
        tenant: &str,
        intent_id: &str,
        length: u32,
    ) -> Answer<String> {
        (|| {
            let deriver = Deriver::new(&Secret::from_hex(secret)?, Policy::default());
            Ok(deriver
                .intent_key(tenant, intent_id, KeyLength::new(length as usize)?)?
                .into_string())
        })()
        .map_err(refusal)
    }

    fn fingerprint(
        &mut self,
        p: Option<&Value>,
        secret: &str,
        tenant: &str,
        action: &str,
        payload: &str,
    ) -> Answer<(String, String)> {
        (|| {
            let deriver = Deriver::new(&Secret::from_hex(secret)?, policy(p)?);
            let payload = Payload::from_json(payload)?;
            let material = utf8(deriver.fingerprint_material(tenant, action, &payload)?);
            let fingerprint = deriver.fingerprint(tenant, action, &payload)?;
            assert!(fingerprint.matches(fingerprint.as_str()));
            Ok((material, fingerprint.as_str().to_owned()))
        })()
        .map_err(refusal)
    }

    fn uuid(&mut self, random: &[u8]) -> Answer<String> {
        uuid_key_from_slice(random)
            .map(intentkey::Key::into_string)
            .map_err(refusal)
    }
}

#[test]
fn golden_vectors_native() {
    let report = intentkey_vectors::run(&mut Native).unwrap_or_else(|e| panic!("{e}"));
    report.assert_passed("native core");
}
