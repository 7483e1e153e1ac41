//! Content-addressed blob files: `blobs/<hash[:2]>/<hash>`, written atomically (temp file in
//! the same directory, fsync, rename), so a crash never leaves a partial blob under its final
//! name. The content hash alone names a file: the same bytes uploaded as `notes.txt` and as
//! `notes` are one file (the upload's name travels in the job, for format detection). Rows
//! written before this rule keep the paths they have.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use hmac::Mac;
use sha2::{Digest, Sha256};

/// How an upload's content hash is computed: SHA-256 of the bytes (shared by every team that
/// uploads them), or HMAC-SHA256 under a team's own key (an isolated team: its hash, and so
/// its blob, is its alone).
#[derive(Clone, Copy)]
pub enum ContentKey {
    Shared,
    Team([u8; 32]),
}

enum Hasher {
    Plain(Sha256),
    Keyed(hmac::Hmac<Sha256>),
}

impl Hasher {
    fn new(key: ContentKey) -> Hasher {
        match key {
            ContentKey::Shared => Hasher::Plain(Sha256::new()),
            ContentKey::Team(k) => match <hmac::Hmac<Sha256> as Mac>::new_from_slice(&k) {
                Ok(m) => Hasher::Keyed(m),
                // HMAC takes a key of any length.
                Err(_) => Hasher::Plain(Sha256::new()),
            },
        }
    }

    fn update(&mut self, bytes: &[u8]) {
        match self {
            Hasher::Plain(h) => h.update(bytes),
            Hasher::Keyed(m) => m.update(bytes),
        }
    }

    fn hex(self) -> String {
        match self {
            Hasher::Plain(h) => hex::encode(h.finalize()),
            Hasher::Keyed(m) => hex::encode(m.finalize().into_bytes()),
        }
    }
}

#[derive(Clone, Debug)]
pub struct BlobStore {
    root: PathBuf,
}

/// A blob written (or found already present).
#[derive(Clone, Debug)]
pub struct StoredBlob {
    pub content_hash: String,
    pub size: u64,
    /// Path relative to the data directory (what `content_blobs.storage_uri` holds).
    pub storage_uri: String,
}

#[derive(Debug, thiserror::Error)]
pub enum BlobError {
    #[error("the upload is larger than the limit of {limit} bytes")]
    TooLarge { limit: u64 },
    #[error("blob storage: {0}")]
    Io(#[from] std::io::Error),
}

impl BlobStore {
    pub fn new(data_dir: &Path) -> BlobStore {
        BlobStore {
            root: data_dir.join("blobs"),
        }
    }

    pub fn data_dir(&self) -> PathBuf {
        self.root
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default()
    }

    pub fn path_of(&self, storage_uri: &str) -> PathBuf {
        self.data_dir().join(storage_uri)
    }

    /// Streams `reader` into the store, hashing as it goes (as `key` says), refusing past
    /// `limit` bytes (nothing is left behind then). A file already under the hash is kept; a
    /// missing one is written again (heal-on-write for the file). Blocking: call from a
    /// blocking thread.
    pub fn write(
        &self,
        mut reader: impl Read,
        limit: u64,
        key: ContentKey,
    ) -> Result<StoredBlob, BlobError> {
        std::fs::create_dir_all(&self.root)?;
        let tmp = self.root.join(format!(
            ".partial.{}.{:016x}",
            std::process::id(),
            rand::random::<u64>()
        ));
        let result = (|| {
            let mut file = std::fs::File::create(&tmp)?;
            let mut hasher = Hasher::new(key);
            let mut size: u64 = 0;
            let mut buf = vec![0u8; 64 * 1024];
            loop {
                let n = reader.read(&mut buf)?;
                if n == 0 {
                    break;
                }
                size += n as u64;
                if size > limit {
                    return Err(BlobError::TooLarge { limit });
                }
                hasher.update(&buf[..n]);
                file.write_all(&buf[..n])?;
            }
            file.sync_all()?;
            let hash = hasher.hex();
            let rel = format!("blobs/{}/{}", &hash[..2], hash);
            let dest = self.data_dir().join(&rel);
            if let Some(dir) = dest.parent() {
                std::fs::create_dir_all(dir)?;
            }
            if dest.exists() {
                std::fs::remove_file(&tmp)?;
            } else {
                std::fs::rename(&tmp, &dest)?;
            }
            Ok(StoredBlob {
                content_hash: hash,
                size,
                storage_uri: rel,
            })
        })();
        if result.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        result
    }

    /// Whether the file a row names is there.
    pub fn exists(&self, storage_uri: &str) -> bool {
        self.path_of(storage_uri).is_file()
    }

    /// Removes a blob file (after its row is gone). Missing files are fine.
    pub fn remove(&self, storage_uri: &str) {
        let path = self.path_of(storage_uri);
        if let Err(e) = std::fs::remove_file(&path) {
            if e.kind() != std::io::ErrorKind::NotFound {
                tracing::warn!(path = %path.display(), error = %e, "removing a blob failed");
            }
        }
    }
}

/// `basename`, then every character outside `[A-Za-z0-9_.-]` becomes `_` (the seed's
/// `re.sub(r"[^\w.\-]", "_", …)`); names made only of dots, or empty, become `upload`.
pub fn sanitize_filename(raw: &str) -> String {
    let base = raw.rsplit(['/', '\\']).next().unwrap_or_default();
    let cleaned: String = base
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-') {
                c
            } else {
                '_'
            }
        })
        .take(200)
        .collect();
    if cleaned.chars().all(|c| c == '.') {
        "upload".to_owned()
    } else {
        cleaned
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filenames_are_defanged() {
        assert_eq!(sanitize_filename("../../etc/passwd"), "passwd");
        assert_eq!(sanitize_filename("..\\..\\boot.ini"), "boot.ini");
        assert_eq!(
            sanitize_filename("a b;rm -rf $(x).pdf"),
            "a_b_rm_-rf___x_.pdf"
        );
        assert_eq!(sanitize_filename(".."), "upload");
        assert_eq!(sanitize_filename(""), "upload");
        assert_eq!(sanitize_filename("dir/"), "upload");
        assert_eq!(sanitize_filename("Résumé.docx"), "R_sum_.docx");
    }

    #[test]
    fn blobs_are_content_addressed_and_capped() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let store = BlobStore::new(dir.path());
        let a = store
            .write(&b"hello"[..], 100, ContentKey::Shared)
            .unwrap_or_else(|e| panic!("{e}"));
        let b = store
            .write(&b"hello"[..], 100, ContentKey::Shared)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(a.storage_uri, b.storage_uri);
        // SHA-256 of the bytes, as any tool computes it.
        assert_eq!(
            a.content_hash,
            "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"
        );
        // A team's key gives its own hash (and file); the same key, the same one.
        let k1 = store
            .write(&b"hello"[..], 100, ContentKey::Team([1; 32]))
            .unwrap_or_else(|e| panic!("{e}"));
        let k1b = store
            .write(&b"hello"[..], 100, ContentKey::Team([1; 32]))
            .unwrap_or_else(|e| panic!("{e}"));
        let k2 = store
            .write(&b"hello"[..], 100, ContentKey::Team([2; 32]))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(k1.content_hash, k1b.content_hash);
        assert_ne!(k1.content_hash, a.content_hash);
        assert_ne!(k1.content_hash, k2.content_hash);
        assert!(store.exists(&k1.storage_uri) && store.exists(&k2.storage_uri));
        for uri in [&k1.storage_uri, &k2.storage_uri] {
            std::fs::remove_file(store.path_of(uri)).unwrap_or_else(|e| panic!("{e}"));
            let _ = std::fs::remove_dir(store.path_of(uri).parent().unwrap_or(dir.path()));
        }
        // A lost file is written again by the next upload of the same bytes.
        std::fs::remove_file(store.path_of(&a.storage_uri)).unwrap_or_else(|e| panic!("{e}"));
        assert!(!store.exists(&a.storage_uri));
        let again = store
            .write(&b"hello"[..], 100, ContentKey::Shared)
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(store.exists(&again.storage_uri));
        assert!(a
            .storage_uri
            .starts_with(&format!("blobs/{}/", &a.content_hash[..2])));
        assert_eq!(
            std::fs::read(store.path_of(&a.storage_uri)).unwrap_or_default(),
            b"hello"
        );
        let big = vec![7u8; 1000];
        assert!(matches!(
            store.write(&big[..], 999, ContentKey::Shared),
            Err(BlobError::TooLarge { .. })
        ));
        // Nothing but the one blob (and its shard directory) is left.
        let leftovers: Vec<_> = std::fs::read_dir(dir.path().join("blobs"))
            .unwrap_or_else(|e| panic!("{e}"))
            .filter_map(Result::ok)
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(leftovers, vec![a.content_hash[..2].to_owned()]);
    }
}
