//! The instance's secret key and the sealed form of a team's API key.
//!
//! The key is 32 bytes: `CAIRN_SECRET_KEY` (64 hex digits or base64) when set, else the file
//! `secret.key` in the data directory, created on first start (mode 0600, by whichever process
//! gets there first; the others read it). Instances that share a PostgreSQL database must
//! share the key: set `CAIRN_SECRET_KEY` on each.
//!
//! A sealed value is `v1:` + base64(nonce ‖ ciphertext) under XChaCha20-Poly1305 with a random
//! 24-byte nonce, and the associated data names the team and the role, so a sealed key copied
//! to another team's row (or role) does not open.

use std::fmt;
use std::io::Write;
use std::path::Path;

use base64::Engine;
use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{Key, XChaCha20Poly1305, XNonce};

/// The file name of the generated key in the data directory.
pub const KEY_FILE: &str = "secret.key";
const PREFIX: &str = "v1:";
const NONCE_BYTES: usize = 24;

#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    #[error("CAIRN_SECRET_KEY must be 32 bytes as 64 hex digits or base64")]
    BadKey,
    #[error("the secret key file {path}: {source}")]
    File {
        path: String,
        source: std::io::Error,
    },
    #[error("the secret key file {0} does not hold 64 hex digits")]
    BadFile(String),
    /// The value was sealed under another key, for another team or role, or is damaged.
    #[error("the sealed value does not open with this instance's secret key")]
    Unopenable,
}

/// The instance's secret key. `Debug` never prints it.
#[derive(Clone)]
pub struct SecretKey(Key);

impl fmt::Debug for SecretKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SecretKey(<redacted>)")
    }
}

impl SecretKey {
    /// The configured key, else the data directory's key file (created when missing).
    pub fn load(configured: Option<&str>, data_dir: &Path) -> Result<SecretKey, SecretError> {
        match configured.map(str::trim).filter(|v| !v.is_empty()) {
            Some(v) => parse_key(v).ok_or(SecretError::BadKey),
            None => Self::from_file(&data_dir.join(KEY_FILE)),
        }
    }

    fn from_file(path: &Path) -> Result<SecretKey, SecretError> {
        let shown = path.display().to_string();
        let file_err = |source| SecretError::File {
            path: shown.clone(),
            source,
        };
        let mut opts = std::fs::OpenOptions::new();
        opts.write(true).create_new(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut opts, 0o600);
        match opts.open(path) {
            Ok(mut f) => {
                let key: [u8; 32] = rand::random();
                // Written whole, then synced, before anyone is told the key exists.
                f.write_all(hex::encode(key).as_bytes())
                    .and_then(|()| f.sync_all())
                    .map_err(file_err)?;
                Ok(SecretKey(Key::from(key)))
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                // Another process may be writing it this instant: a short file is retried.
                for _ in 0..50 {
                    let text = std::fs::read_to_string(path).map_err(file_err)?;
                    if text.trim().len() >= 64 {
                        return hex_key(text.trim())
                            .ok_or_else(|| SecretError::BadFile(shown.clone()));
                    }
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                Err(SecretError::BadFile(shown))
            }
            Err(e) => Err(file_err(e)),
        }
    }

    /// A 32-byte key for one purpose, derived from the instance's key: HMAC-SHA256 of
    /// `context` (e.g. a team's content-isolation key). The same on every process that holds
    /// the same instance key; useless without it.
    pub fn derive(&self, context: &str) -> [u8; 32] {
        use hmac::Mac;
        let mut mac = match <hmac::Hmac<sha2::Sha256> as Mac>::new_from_slice(&self.0[..]) {
            Ok(m) => m,
            // HMAC takes a key of any length; this arm cannot be reached.
            Err(_) => return [0u8; 32],
        };
        mac.update(context.as_bytes());
        mac.finalize().into_bytes().into()
    }

    /// Seals `plain` for the record `context` names (team and role).
    pub fn seal(&self, plain: &str, context: &str) -> Result<String, SecretError> {
        let nonce_bytes: [u8; NONCE_BYTES] = rand::random();
        let nonce = XNonce::from(nonce_bytes);
        let sealed = XChaCha20Poly1305::new(&self.0)
            .encrypt(
                &nonce,
                Payload {
                    msg: plain.as_bytes(),
                    aad: context.as_bytes(),
                },
            )
            .map_err(|_| SecretError::Unopenable)?;
        let mut bytes = nonce_bytes.to_vec();
        bytes.extend_from_slice(&sealed);
        Ok(format!(
            "{PREFIX}{}",
            base64::engine::general_purpose::STANDARD.encode(bytes)
        ))
    }

    /// Opens what [`SecretKey::seal`] sealed for the same `context`.
    pub fn open(&self, sealed: &str, context: &str) -> Result<String, SecretError> {
        let bytes = sealed
            .strip_prefix(PREFIX)
            .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
            .filter(|b| b.len() > NONCE_BYTES)
            .ok_or(SecretError::Unopenable)?;
        let (nonce, body) = bytes.split_at(NONCE_BYTES);
        let nonce: [u8; NONCE_BYTES] = nonce.try_into().map_err(|_| SecretError::Unopenable)?;
        let nonce = XNonce::from(nonce);
        let plain = XChaCha20Poly1305::new(&self.0)
            .decrypt(
                &nonce,
                Payload {
                    msg: body,
                    aad: context.as_bytes(),
                },
            )
            .map_err(|_| SecretError::Unopenable)?;
        String::from_utf8(plain).map_err(|_| SecretError::Unopenable)
    }
}

fn hex_key(v: &str) -> Option<SecretKey> {
    let bytes: [u8; 32] = hex::decode(v).ok()?.try_into().ok()?;
    Some(SecretKey(Key::from(bytes)))
}

fn parse_key(v: &str) -> Option<SecretKey> {
    hex_key(v).or_else(|| {
        let bytes: [u8; 32] = base64::engine::general_purpose::STANDARD
            .decode(v)
            .ok()?
            .try_into()
            .ok()?;
        Some(SecretKey(Key::from(bytes)))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seals_and_opens_only_in_its_context() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let k = SecretKey::load(None, dir.path()).unwrap_or_else(|e| panic!("{e}"));
        let sealed = k
            .seal("sk-canary", "team=1 role=utility")
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(!sealed.contains("sk-canary"));
        assert_eq!(
            k.open(&sealed, "team=1 role=utility").ok().as_deref(),
            Some("sk-canary")
        );
        assert!(k.open(&sealed, "team=2 role=utility").is_err());
        assert!(k.open(&sealed, "team=1 role=chat").is_err());
        // Two seals of one value differ (random nonce).
        assert_ne!(
            sealed,
            k.seal("sk-canary", "team=1 role=utility")
                .unwrap_or_default()
        );
        // The file is reused by the next process, and another key does not open the value.
        let again = SecretKey::load(None, dir.path()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            again.open(&sealed, "team=1 role=utility").ok().as_deref(),
            Some("sk-canary")
        );
        let other =
            SecretKey::load(Some(&"ab".repeat(32)), dir.path()).unwrap_or_else(|e| panic!("{e}"));
        assert!(other.open(&sealed, "team=1 role=utility").is_err());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(dir.path().join(KEY_FILE))
                .map(|m| m.permissions().mode() & 0o777)
                .unwrap_or_default();
            assert_eq!(mode, 0o600);
        }
    }

    #[test]
    fn derived_keys_depend_on_the_key_and_the_context() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let a =
            SecretKey::load(Some(&"0f".repeat(32)), dir.path()).unwrap_or_else(|e| panic!("{e}"));
        let b =
            SecretKey::load(Some(&"1f".repeat(32)), dir.path()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(a.derive("team=1"), a.derive("team=1"));
        assert_ne!(a.derive("team=1"), a.derive("team=2"));
        assert_ne!(a.derive("team=1"), b.derive("team=1"));
    }

    #[test]
    fn configured_keys() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        assert!(SecretKey::load(Some(&"0f".repeat(32)), dir.path()).is_ok());
        let b64 = base64::engine::general_purpose::STANDARD.encode([7u8; 32]);
        assert!(SecretKey::load(Some(&b64), dir.path()).is_ok());
        assert!(SecretKey::load(Some("short"), dir.path()).is_err());
        // A configured key never writes the file.
        assert!(!dir.path().join(KEY_FILE).exists());
    }
}
