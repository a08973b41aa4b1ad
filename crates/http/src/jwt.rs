//! Access tokens: JSON Web Tokens signed with HMAC-SHA256 (`[http.jwt]`, PROTOCOL.md §8.2).
//!
//! Only HS256 exists here, so the header is checked to be exactly that algorithm (a token
//! claiming `none` or another algorithm is refused before its signature is looked at), and
//! the signature is compared in constant time by ring. Claims as the reference issues them:
//! `jti`, `iss`, `aud`, `sub` (the user id as decimal), `iat`, `nbf`, `exp` in unix seconds.
//! Time is an argument: the caller reads the clock.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ring::hmac;
use serde::{Deserialize, Serialize};

/// The fixed header of every token this server issues.
const HEADER: &str = r#"{"alg":"HS256","typ":"JWT"}"#;
/// Longest token read (a forged one may be anything).
const TOKEN_LENGTH_MAX: usize = 4096;

/// What a token must say to be accepted, and how new ones are made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JwtSettings {
    pub issuer: String,
    pub audience: String,
    /// Issuers and audiences accepted besides `issuer` and `audience`.
    pub valid_issuers: Vec<String>,
    pub valid_audiences: Vec<String>,
    pub lifetime_s: u64,
    /// Tolerated difference between clocks, for `exp` and `nbf`.
    pub clock_skew_s: u64,
    /// Seconds after issue before a token is valid.
    pub not_before_s: u64,
    pub encoding_secret: Vec<u8>,
    pub decoding_secret: Vec<u8>,
}

/// The claims of one token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claims {
    pub jti: String,
    pub iss: String,
    pub aud: String,
    pub sub: String,
    pub iat: u64,
    pub nbf: u64,
    pub exp: u64,
}

impl Claims {
    /// The user the token was issued to.
    pub fn user_id(&self) -> Option<u32> {
        self.sub.parse().ok()
    }
}

/// Why a token was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum JwtError {
    #[error("the token is not a JWT")]
    Malformed,
    #[error("the token's algorithm is not HS256")]
    Algorithm,
    #[error("the token's signature does not verify")]
    Signature,
    #[error("the token has expired")]
    Expired,
    #[error("the token is not valid yet")]
    NotYetValid,
    #[error("the token's issuer or audience is not accepted")]
    Party,
}

/// Issues and verifies tokens with one pair of keys.
#[derive(Debug)]
pub struct Jwt {
    settings: JwtSettings,
    encoding: hmac::Key,
    decoding: hmac::Key,
}

impl Jwt {
    pub fn new(settings: JwtSettings) -> Self {
        let encoding = hmac::Key::new(hmac::HMAC_SHA256, &settings.encoding_secret);
        let decoding = hmac::Key::new(hmac::HMAC_SHA256, &settings.decoding_secret);
        Self {
            settings,
            encoding,
            decoding,
        }
    }

    pub fn lifetime_s(&self) -> u64 {
        self.settings.lifetime_s
    }

    /// A new token for `user_id` with id `jti`, issued at `now_s`.
    pub fn issue(&self, user_id: u32, jti: String, now_s: u64) -> (String, Claims) {
        let claims = Claims {
            jti,
            iss: self.settings.issuer.clone(),
            aud: self.settings.audience.clone(),
            sub: user_id.to_string(),
            iat: now_s,
            nbf: now_s.saturating_add(self.settings.not_before_s),
            exp: now_s.saturating_add(self.settings.lifetime_s),
        };
        // Serialising a struct of strings and integers cannot fail.
        let payload = serde_json::to_vec(&claims).unwrap_or_default();
        let signed = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(HEADER),
            URL_SAFE_NO_PAD.encode(payload)
        );
        let signature = hmac::sign(&self.encoding, signed.as_bytes());
        let token = format!("{signed}.{}", URL_SAFE_NO_PAD.encode(signature.as_ref()));
        (token, claims)
    }

    /// The claims of `token` if it is well formed, signed with our key, current at `now_s`
    /// and for an accepted issuer and audience.
    pub fn verify(&self, token: &str, now_s: u64) -> Result<Claims, JwtError> {
        if token.len() > TOKEN_LENGTH_MAX {
            return Err(JwtError::Malformed);
        }
        let mut parts = token.split('.');
        let (Some(header), Some(payload), Some(signature), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(JwtError::Malformed);
        };
        let decode = |part: &str| {
            URL_SAFE_NO_PAD
                .decode(part)
                .map_err(|_e| JwtError::Malformed)
        };
        let header: serde_json::Value =
            serde_json::from_slice(&decode(header)?).map_err(|_e| JwtError::Malformed)?;
        if header.get("alg").and_then(serde_json::Value::as_str) != Some("HS256") {
            return Err(JwtError::Algorithm);
        }
        let signed_length = token.len() - signature.len() - 1;
        let signed = token.get(..signed_length).ok_or(JwtError::Malformed)?;
        hmac::verify(&self.decoding, signed.as_bytes(), &decode(signature)?)
            .map_err(|_unspecified| JwtError::Signature)?;
        let claims: Claims =
            serde_json::from_slice(&decode(payload)?).map_err(|_e| JwtError::Malformed)?;
        let skew = self.settings.clock_skew_s;
        if claims.exp.saturating_add(skew) <= now_s {
            return Err(JwtError::Expired);
        }
        if claims.nbf > now_s.saturating_add(skew) {
            return Err(JwtError::NotYetValid);
        }
        let settings = &self.settings;
        let issuer_ok =
            claims.iss == settings.issuer || settings.valid_issuers.contains(&claims.iss);
        let audience_ok =
            claims.aud == settings.audience || settings.valid_audiences.contains(&claims.aud);
        if !issuer_ok || !audience_ok {
            return Err(JwtError::Party);
        }
        Ok(claims)
    }
}

#[cfg(test)]
mod tests {
    use base64::Engine;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;

    use super::{Jwt, JwtError, JwtSettings};

    fn settings(secret: &[u8]) -> JwtSettings {
        JwtSettings {
            issuer: "iggy.apache.org".into(),
            audience: "iggy.apache.org".into(),
            valid_issuers: Vec::new(),
            valid_audiences: Vec::new(),
            lifetime_s: 3600,
            clock_skew_s: 5,
            not_before_s: 0,
            encoding_secret: secret.to_vec(),
            decoding_secret: secret.to_vec(),
        }
    }

    #[test]
    fn a_token_verifies_until_it_expires() {
        let jwt = Jwt::new(settings(b"secret"));
        let (token, claims) = jwt.issue(7, "a".into(), 1_000);
        assert_eq!(jwt.verify(&token, 1_000), Ok(claims.clone()));
        assert_eq!(claims.user_id(), Some(7));
        assert_eq!(jwt.verify(&token, 1_000 + 3600 + 4), Ok(claims));
        assert_eq!(jwt.verify(&token, 1_000 + 3600 + 5), Err(JwtError::Expired));
    }

    #[test]
    fn forged_tokens_are_refused() {
        let jwt = Jwt::new(settings(b"secret"));
        let other = Jwt::new(settings(b"other"));
        let (token, _) = other.issue(0, "a".into(), 1_000);
        assert_eq!(jwt.verify(&token, 1_000), Err(JwtError::Signature));

        // The payload changed to another user under the original signature.
        let (token, _) = jwt.issue(7, "a".into(), 1_000);
        let mut parts: Vec<String> = token.split('.').map(str::to_owned).collect();
        let (forged, _) = jwt.issue(0, "a".into(), 1_000);
        parts[1] = forged.split('.').nth(1).expect("payload").to_owned();
        assert_eq!(
            jwt.verify(&parts.join("."), 1_000),
            Err(JwtError::Signature)
        );

        // alg none with an empty signature.
        let none = URL_SAFE_NO_PAD.encode(r#"{"alg":"none","typ":"JWT"}"#);
        let unsigned = format!("{none}.{}.", parts[1]);
        assert_eq!(jwt.verify(&unsigned, 1_000), Err(JwtError::Algorithm));

        for junk in ["", "a.b", "a.b.c.d", "!!.??.**", &"x".repeat(5000)] {
            assert!(jwt.verify(junk, 1_000).is_err(), "{junk}");
        }
    }

    #[test]
    fn issuer_and_audience_are_checked() {
        let mut other = settings(b"secret");
        other.issuer = "someone.else".into();
        let (token, _) = Jwt::new(other).issue(1, "a".into(), 1_000);
        let jwt = Jwt::new(settings(b"secret"));
        assert_eq!(jwt.verify(&token, 1_000), Err(JwtError::Party));
        let mut accepting = settings(b"secret");
        accepting.valid_issuers.push("someone.else".into());
        assert!(Jwt::new(accepting).verify(&token, 1_000).is_ok());
    }
}
