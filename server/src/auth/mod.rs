//! Principals, API tokens, capabilities and the readable-document rule.
//!
//! Invariants:
//! - A token is 32 random bytes shown once (`cairn_<base64url>`); only its SHA-256 is stored.
//!   Tokens are high-entropy, so a fast hash is the right tool (no password KDF needed).
//! - A presented token is looked up by hash and the stored hash is compared again in constant
//!   time before it is trusted.
//! - [`can_read_document`] is THE readable-document rule. `store::readable` writes the same
//!   rule as SQL for every query that returns document-derived rows; a property test over both
//!   backends keeps the two equal.

use base64::Engine;
use rand::RngCore;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::domain::{Capability, Role, Visibility};

/// An authenticated caller: a user of one team, acting through one token.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Principal {
    pub user_id: i64,
    pub team_id: i64,
    pub name: String,
    pub role: Role,
    pub token_id: i64,
}

impl Principal {
    pub fn can(&self, cap: Capability) -> bool {
        self.role.has(cap)
    }

    /// `Ok(())` when the principal holds `cap`, else [`AuthError::Forbidden`].
    pub fn require(&self, cap: Capability) -> Result<(), AuthError> {
        if self.can(cap) {
            Ok(())
        } else {
            Err(AuthError::Forbidden(cap))
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    #[error("missing bearer token")]
    MissingToken,
    #[error("invalid or revoked token")]
    InvalidToken,
    #[error("this action needs the `{}` capability", .0.as_str())]
    Forbidden(Capability),
    /// System corpora are written by the instance operator (the `cairn` command line) only.
    #[error("system corpora are written by the instance operator (`cairn ingest --system`), not through a team's token")]
    SystemCorpus,
}

/// The facts about a document that decide who may read it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DocumentAccess {
    pub team_id: i64,
    pub owner_id: i64,
    pub visibility: Visibility,
    /// The document sits in a system corpus (readable by every team).
    pub in_system_corpus: bool,
}

/// DESIGN.md §8: readable iff it is in the principal's team (or in a system corpus) and
/// (its visibility is `team` or the principal owns it).
pub fn can_read_document(p: &Principal, d: &DocumentAccess) -> bool {
    (d.team_id == p.team_id || d.in_system_corpus)
        && (d.visibility == Visibility::Team || d.owner_id == p.user_id)
}

/// Whether `p` may change a document of its team (attach a new version, set its visibility,
/// move it): its owner, or an admin of its team. Never a document of another team.
pub fn may_replace(p: &Principal, team_id: i64, owner_id: i64) -> bool {
    team_id == p.team_id && (owner_id == p.user_id || p.can(Capability::Admin))
}

/// Whether `p` may follow a job of its team at all: its own, or any for admins.
pub fn can_see_job(p: &Principal, created_by: Option<i64>) -> bool {
    created_by == Some(p.user_id) || p.can(Capability::Admin)
}

/// Whether `p` may see what a visible job says about its document (filename, result, error):
/// the readable rule for the document it uploads. A private upload's details are its
/// creator's alone; an admin watching the team's jobs sees its state and progress only.
pub fn can_see_job_details(p: &Principal, created_by: Option<i64>, private: bool) -> bool {
    created_by == Some(p.user_id) || !private
}

/// A freshly minted token: `secret` is shown to the user once, `hash` is what is stored.
pub struct NewTokenSecret {
    pub secret: String,
    pub hash: String,
}

const TOKEN_PREFIX: &str = "cairn_";

pub fn generate_token() -> NewTokenSecret {
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    let secret = format!(
        "{TOKEN_PREFIX}{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
    );
    let hash = hash_token(&secret);
    NewTokenSecret { secret, hash }
}

/// Hex SHA-256 of the token as presented.
pub fn hash_token(secret: &str) -> String {
    hex::encode(Sha256::digest(secret.as_bytes()))
}

/// Constant-time equality of two stored-form hashes.
pub fn hashes_match(a: &str, b: &str) -> bool {
    a.len() == b.len() && bool::from(a.as_bytes().ct_eq(b.as_bytes()))
}

/// Whether a string is shaped like one of our tokens (cheap pre-check before any lookup).
pub fn looks_like_token(s: &str) -> bool {
    s.len() == TOKEN_PREFIX.len() + 43
        && s.starts_with(TOKEN_PREFIX)
        && s[TOKEN_PREFIX.len()..]
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// Pulls the token out of an `Authorization: Bearer …` header value.
pub fn bearer(header: &str) -> Option<&str> {
    let (scheme, rest) = header.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| rest.trim())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn principal(user: i64, team: i64) -> Principal {
        Principal {
            user_id: user,
            team_id: team,
            name: "u".into(),
            role: Role::Member,
            token_id: 1,
        }
    }

    #[test]
    fn tokens_are_random_and_hash_stably() {
        let a = generate_token();
        let b = generate_token();
        assert_ne!(a.secret, b.secret);
        assert!(looks_like_token(&a.secret), "{}", a.secret);
        assert_eq!(hash_token(&a.secret), a.hash);
        assert!(hashes_match(&a.hash, &hash_token(&a.secret)));
        assert!(!hashes_match(&a.hash, &b.hash));
        assert!(!looks_like_token("cairn_short"));
    }

    #[test]
    fn bearer_header() {
        assert_eq!(bearer("Bearer abc"), Some("abc"));
        assert_eq!(bearer("bearer  abc "), Some("abc"));
        assert_eq!(bearer("Basic abc"), None);
        assert_eq!(bearer("Bearer"), None);
    }

    #[test]
    fn readable_rule() {
        let me = principal(1, 10);
        let doc = |team, owner, vis, sys| DocumentAccess {
            team_id: team,
            owner_id: owner,
            visibility: vis,
            in_system_corpus: sys,
        };
        assert!(can_read_document(&me, &doc(10, 2, Visibility::Team, false)));
        assert!(!can_read_document(
            &me,
            &doc(10, 2, Visibility::Private, false)
        ));
        assert!(can_read_document(
            &me,
            &doc(10, 1, Visibility::Private, false)
        ));
        assert!(!can_read_document(
            &me,
            &doc(11, 2, Visibility::Team, false)
        ));
        assert!(can_read_document(&me, &doc(11, 2, Visibility::Team, true)));
        assert!(!can_read_document(
            &me,
            &doc(11, 2, Visibility::Private, true)
        ));
    }

    #[test]
    fn forbidden_names_the_capability() {
        let mut v = principal(1, 1);
        v.role = Role::Viewer;
        let err = v.require(Capability::CorpusCreate).err();
        assert!(matches!(
            err,
            Some(AuthError::Forbidden(Capability::CorpusCreate))
        ));
        assert!(v.require(Capability::Search).is_ok());
    }
}
