//! Bearer tokens: HS256 JWTs (RFC 7519, through `jsonwebtoken`) naming a
//! user, a role and an expiry.
//!
//! A `user` sees and changes only their own reservations; an `operator`
//! sees and changes all. [`Auth::issue`] makes a token (`braid broker
//! token`), [`Auth::verify`] checks one: signature, algorithm and expiry.

use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};

/// Clock skew allowed when checking `exp`, in seconds.
pub const EXP_LEEWAY_SECS: u64 = 5;

/// What a token holder may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Their own reservations only.
    User,
    /// Every reservation.
    Operator,
}

impl std::str::FromStr for Role {
    type Err = AuthError;
    fn from_str(s: &str) -> Result<Role, AuthError> {
        match s {
            "user" => Ok(Role::User),
            "operator" => Ok(Role::Operator),
            other => Err(AuthError::BadRole(other.to_string())),
        }
    }
}

/// A token's claims.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claims {
    /// The user.
    pub sub: String,
    /// Their role.
    pub role: Role,
    /// Expiry, seconds since the Unix epoch.
    pub exp: u64,
}

/// A refused token or a bad request for one.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AuthError {
    /// No `Authorization: Bearer …` header.
    #[error("missing bearer token")]
    Missing,
    /// Expired, tampered with, or not a token.
    #[error("invalid token: {0}")]
    Invalid(jsonwebtoken::errors::Error),
    /// Not `user` or `operator`.
    #[error("unknown role {0:?}: use user or operator")]
    BadRole(String),
    /// An empty user name.
    #[error("the user name is empty")]
    EmptyUser,
}

/// Issues and checks tokens with one secret.
pub struct Auth {
    encoding: EncodingKey,
    decoding: DecodingKey,
    validation: Validation,
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Auth { .. }")
    }
}

impl Auth {
    /// Tokens signed with `secret`.
    pub fn new(secret: &[u8]) -> Auth {
        let mut validation = Validation::new(Algorithm::HS256);
        validation.leeway = EXP_LEEWAY_SECS;
        validation.set_required_spec_claims(&["exp", "sub"]);
        Auth {
            encoding: EncodingKey::from_secret(secret),
            decoding: DecodingKey::from_secret(secret),
            validation,
        }
    }

    /// A token for `user` with `role`, valid until `exp` (Unix seconds).
    ///
    /// # Errors
    /// [`AuthError::EmptyUser`]; [`AuthError::Invalid`] if signing fails.
    pub fn issue(&self, user: &str, role: Role, exp: u64) -> Result<String, AuthError> {
        if user.trim().is_empty() {
            return Err(AuthError::EmptyUser);
        }
        let claims = Claims {
            sub: user.to_string(),
            role,
            exp,
        };
        jsonwebtoken::encode(&Header::new(Algorithm::HS256), &claims, &self.encoding)
            .map_err(AuthError::Invalid)
    }

    /// The claims of a valid token.
    ///
    /// # Errors
    /// [`AuthError::Invalid`] for a bad signature, algorithm or expiry.
    pub fn verify(&self, token: &str) -> Result<Claims, AuthError> {
        jsonwebtoken::decode::<Claims>(token, &self.decoding, &self.validation)
            .map(|d| d.claims)
            .map_err(AuthError::Invalid)
    }

    /// The claims of an `Authorization` header value.
    ///
    /// # Errors
    /// [`AuthError::Missing`] unless `Bearer …`; else as [`Auth::verify`].
    pub fn verify_header(&self, header: Option<&str>) -> Result<Claims, AuthError> {
        let token = header
            .and_then(|h| h.strip_prefix("Bearer "))
            .ok_or(AuthError::Missing)?;
        self.verify(token.trim())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FAR: u64 = 4_000_000_000;

    #[test]
    fn issues_verifies_and_refuses() {
        let auth = Auth::new(b"0123456789abcdef0123456789abcdef");
        let t = auth.issue("alice", Role::User, FAR).unwrap();
        let c = auth.verify(&t).unwrap();
        assert_eq!((c.sub.as_str(), c.role), ("alice", Role::User));
        // Tampered: flip a character of the payload.
        let mut parts: Vec<String> = t.split('.').map(str::to_string).collect();
        parts[1] = parts[1].replacen('e', "f", 1);
        assert!(auth.verify(&parts.join(".")).is_err());
        // Another secret.
        let other = Auth::new(b"fedcba9876543210fedcba9876543210");
        assert!(other.verify(&t).is_err());
        // Expired.
        let old = auth.issue("alice", Role::User, 1_000).unwrap();
        assert!(auth.verify(&old).is_err());
        assert!(matches!(auth.verify_header(None), Err(AuthError::Missing)));
        assert!(auth.verify_header(Some(&format!("Bearer {t}"))).is_ok());
    }
}
