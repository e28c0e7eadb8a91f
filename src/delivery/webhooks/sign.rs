//! Signing per the Standard Webhooks specification, with its own crate: `webhook-id`, `webhook-timestamp` and
//! `webhook-signature: v1,<base64 HMAC-SHA256 of "{id}.{timestamp}.{body}">`, keyed by the secret `whsec_<base64>`.
//! While a rotated secret overlaps its successor, the header carries one signature per secret, space-separated, as
//! the specification allows; its libraries accept a request when any one of them verifies.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use rand::RngCore;

/// The prefix the specification gives secrets.
const PREFIX: &str = "whsec_";

/// A new signing secret: `whsec_` and 32 random bytes in base64 (the specification asks for 24 to 64).
pub fn new_secret() -> String {
    let mut bytes = [0u8; 32];
    rand::rngs::OsRng.fill_bytes(&mut bytes);
    format!("{PREFIX}{}", STANDARD.encode(bytes))
}

/// The three headers of one signed request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signed {
    pub id: String,
    pub timestamp: i64,
    pub signature: String,
}

/// Signs `body`, sent as message `id` at `timestamp` (Unix seconds).
pub fn sign(secret: &str, id: &str, timestamp: i64, body: &[u8]) -> Result<Signed, String> {
    sign_with_each(&[secret], id, timestamp, body)
}

/// Signs `body` with each of `secrets` (the current one first); the signatures are space-separated. No secret: an
/// error, never an unsigned request.
pub fn sign_with_each(
    secrets: &[&str],
    id: &str,
    timestamp: i64,
    body: &[u8],
) -> Result<Signed, String> {
    if secrets.is_empty() {
        return Err("the subscription's signing secret cannot be read".to_owned());
    }
    let mut signatures = Vec::with_capacity(secrets.len());
    for secret in secrets {
        let webhook = standardwebhooks::Webhook::new(secret)
            .map_err(|_| "the subscription's signing secret is not valid".to_owned())?;
        signatures.push(
            webhook
                .sign(id, timestamp, body)
                .map_err(|error| format!("cannot sign: {error}"))?,
        );
    }
    Ok(Signed {
        id: id.to_owned(),
        timestamp,
        signature: signatures.join(" "),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_secret_is_whsec_and_32_bytes() {
        let secret = new_secret();
        let key = STANDARD
            .decode(secret.strip_prefix(PREFIX).unwrap())
            .unwrap();
        assert_eq!(key.len(), 32);
        assert_ne!(new_secret(), secret);
    }

    #[test]
    fn a_signature_matches_the_specification_s_example() {
        // The example of the Standard Webhooks specification (spec/standard-webhooks.md, "Signature scheme").
        let signed = sign(
            "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
            "msg_p5jXN8AQM9LWM0D4loKWxJek",
            1614265330,
            br#"{"test": 2432232314}"#,
        )
        .unwrap();
        assert_eq!(
            signed.signature,
            "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
        );
    }

    #[test]
    fn during_an_overlap_each_secret_alone_verifies_the_request() {
        let (new, old) = (new_secret(), new_secret());
        let body = br#"{"type":"run.resumed"}"#;
        let signed =
            sign_with_each(&[&new, &old], "evt_1", chrono::Utc::now().timestamp(), body).unwrap();
        assert_eq!(signed.signature.split(' ').count(), 2);
        let mut headers = axum::http::HeaderMap::new();
        headers.insert("webhook-id", signed.id.parse().unwrap());
        headers.insert(
            "webhook-timestamp",
            signed.timestamp.to_string().parse().unwrap(),
        );
        headers.insert("webhook-signature", signed.signature.parse().unwrap());
        for secret in [&new, &old] {
            let webhook = standardwebhooks::Webhook::new(secret).unwrap();
            assert!(webhook.verify(body, &headers).is_ok());
        }
        let stranger = standardwebhooks::Webhook::new(&new_secret()).unwrap();
        assert!(stranger.verify(body, &headers).is_err());
        assert!(sign_with_each(&[], "evt_1", 0, body).is_err());
    }

    #[test]
    fn a_signature_verifies_with_the_library_and_fails_for_another_body() {
        let secret = new_secret();
        let body = br#"{"type":"run.resumed"}"#;
        let signed = sign(&secret, "evt_1", chrono::Utc::now().timestamp(), body).unwrap();
        let mut headers = axum::http::HeaderMap::new();
        headers.insert("webhook-id", signed.id.parse().unwrap());
        headers.insert(
            "webhook-timestamp",
            signed.timestamp.to_string().parse().unwrap(),
        );
        headers.insert("webhook-signature", signed.signature.parse().unwrap());
        let webhook = standardwebhooks::Webhook::new(&secret).unwrap();
        assert!(webhook.verify(body, &headers).is_ok());
        assert!(
            webhook
                .verify(br#"{"type":"run.waiting"}"#, &headers)
                .is_err()
        );
    }
}
