//! The shared token: `Authorization: Bearer TOKEN`, compared in constant time.

use subtle::ConstantTimeEq;

/// A bearer token. `Debug` never shows the value.
#[derive(Clone, PartialEq, Eq)]
pub struct Token(String);

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Token(<{} bytes, redacted>)", self.0.len())
    }
}

/// Why a token was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rejection {
    /// No `Authorization` header.
    Missing,
    /// A header that is not `Bearer <token>`.
    Malformed,
    /// A bearer token that is not the agent's.
    Wrong,
}

impl Rejection {
    /// The reason as logged and counted (never contains the token).
    pub fn reason(self) -> &'static str {
        match self {
            Rejection::Missing => "missing_token",
            Rejection::Malformed => "malformed_authorization",
            Rejection::Wrong => "wrong_token",
        }
    }
}

/// An invalid token (empty, or with bytes an HTTP header cannot carry).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid token: {0}")]
pub struct TokenError(pub &'static str);

impl TokenError {
    /// Never the environment.
    pub fn is_environment(&self) -> bool {
        false
    }

    /// Always bad input: the token given is unusable (CLI exit 2).
    pub fn is_bad_input(&self) -> bool {
        true
    }
}

impl Token {
    /// A token from its text; surrounding whitespace (a token file's final
    /// newline) is removed.
    pub fn new(text: &str) -> Result<Token, TokenError> {
        let text = text.trim();
        if text.is_empty() {
            return Err(TokenError("it is empty"));
        }
        if !text.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(TokenError(
                "use printable ASCII without spaces (it travels in an HTTP header)",
            ));
        }
        Ok(Token(text.to_string()))
    }

    /// The value, for a client building its header.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Checks an `Authorization` header value. The token bytes are compared
    /// in constant time (`subtle`); only the length can be learnt from timing.
    pub fn check(&self, header: Option<&str>) -> Result<(), Rejection> {
        let header = header.ok_or(Rejection::Missing)?;
        let (scheme, presented) = header.trim().split_once(' ').ok_or(Rejection::Malformed)?;
        if !scheme.eq_ignore_ascii_case("bearer") {
            return Err(Rejection::Malformed);
        }
        let presented = presented.trim().as_bytes();
        if bool::from(presented.ct_eq(self.0.as_bytes())) {
            Ok(())
        } else {
            Err(Rejection::Wrong)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_check() {
        let t = Token::new("s3cret-Token\n").unwrap();
        assert_eq!(t.check(Some("Bearer s3cret-Token")), Ok(()));
        assert_eq!(t.check(Some("bearer  s3cret-Token ")), Ok(()));
        assert_eq!(t.check(None), Err(Rejection::Missing));
        assert_eq!(t.check(Some("s3cret-Token")), Err(Rejection::Malformed));
        assert_eq!(
            t.check(Some("Basic s3cret-Token")),
            Err(Rejection::Malformed)
        );
        assert_eq!(t.check(Some("Bearer s3cret-Tokem")), Err(Rejection::Wrong));
        assert_eq!(t.check(Some("Bearer s3cret")), Err(Rejection::Wrong));
        assert_eq!(
            t.check(Some("Bearer s3cret-Token-and-more")),
            Err(Rejection::Wrong)
        );
        assert_eq!(t.check(Some("Bearer ")), Err(Rejection::Malformed));
        assert_eq!(t.check(Some("Bearer  x")), Err(Rejection::Wrong));
    }

    #[test]
    fn invalid_tokens_and_redacted_debug() {
        assert!(Token::new("  \n").is_err());
        assert!(Token::new("two words").is_err());
        assert!(Token::new("caf\u{e9}").is_err());
        let t = Token::new("hunter2").unwrap();
        assert!(!format!("{t:?}").contains("hunter2"));
        for r in [Rejection::Missing, Rejection::Malformed, Rejection::Wrong] {
            assert!(!r.reason().contains("hunter2"));
        }
    }
}
